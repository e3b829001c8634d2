// The writer side of metrics: the process's metrics mapping, the metric directory, per-thread
// shards. Everything here is off the hot path (see chronicle/metrics.hpp for that).
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "chronicle/metrics.hpp"
#include "format/clock.hpp"
#include "metrics/metric_names.hpp"
#include "metrics/snapshot.hpp"
#include "recorder/test_pause.hpp"
#include "settings/settings.hpp"
#include "shm/shm_file.hpp"

namespace chronicle {
namespace detail {
thread_local constinit MetricShardSlot t_metric_shard{};
}  // namespace detail

namespace {

using format::MetricEntry;
using format::MetricKind;
using format::MetricsHeader;
using format::ShardHeader;

// A metric's trace site: built at run time, so it owns the strings the Site points to.
struct MetricSite {
  std::string category = "metrics";
  std::string name;
  detail::Site site{};
};

// Process-wide, leaked on purpose: threads may update metrics while static destructors run.
struct MetricsRegistry {
  std::mutex mutex;
  uint8_t* base = nullptr;
  MetricsHeader* header = nullptr;
  std::string path;  // empty: private memory (the file could not be made)
  int fd = -1;
  std::vector<uint32_t> free_shards;
  bool forked_child = false;  // mapped privately since fork; no file of its own yet
  std::map<std::string, uint32_t> entry_by_series;
  std::deque<MetricSite> sites;  // by entry index; a deque keeps their addresses
  MetricEntry discarded{};       // what a metric that found no room points to
  MetricSite discarded_site;
};

void hold_metrics_across_fork();
void release_metrics_in_parent();
void reopen_in_child();

// The fork handlers are registered with the registry, before any thread can take its lock.
MetricsRegistry& metrics_registry() {
  static MetricsRegistry* instance = [] {
    auto* made = new MetricsRegistry;
    pthread_atfork(hold_metrics_across_fork, release_metrics_in_parent, reopen_in_child);
    return made;
  }();
  return *instance;
}

std::string metrics_directory() {
  const char* directory = std::getenv("CHRONICLE_METRICS_DIR");
  return directory && *directory ? directory : "/dev/shm";
}

void fill_header(uint8_t* base, MetricsHeader& header) {
  header.version = format::kMetricsVersion;
  header.header_size = format::kMetricsHeaderSize;
  header.pid = getpid();
  header.entry_size = sizeof(MetricEntry);
  const std::string name = recorder::read_process_name();
  std::strncpy(header.process_name, name.c_str(), sizeof header.process_name - 1);
  header.directory_offset = format::kMetricsDirectoryOffset;
  header.shards_offset = format::kMetricsShardsOffset;
  header.file_size = format::kMetricsFileSize;
  header.max_metrics = format::kMaxMetrics;
  header.max_shards = format::kMaxMetricShards;
  header.shard_size = format::kShardSize;
  header.cells_per_shard = format::kCellsPerShard;
  header.realtime_ns_at_create = recorder::read_realtime_ns();
  header.cells_used.store(format::kDiscardCell + format::kDiscardCells, std::memory_order_relaxed);
  format::metric_shard(base, header, format::kSharedShard)
      ->state.store(static_cast<uint32_t>(format::ShardState::active), std::memory_order_relaxed);
  header.shard_count.store(1, std::memory_order_relaxed);
}

// Makes this process's metrics file with `make` (which returns 0 or an errno, and must use
// O_EXCL: an existing file is never written through). The usual name is predictable: a file
// there that cannot be replaced (another user's, a directory) must not hide the metrics, so a
// name with a random part is tried next. Readers find both (MetricsMapping::candidates_for).
bool make_metrics_file(const std::function<int(const std::string&)>& make, std::string& path) {
  const std::string usual = fmt::format("{}/chronicle-metrics-{}.shm", metrics_directory(), getpid());
  // A file left by an earlier process with our pid (it crashed) is replaced.
  ::unlink(usual.c_str());
  path = usual;
  int failure = make(path);
  std::random_device random;
  for (int attempt = 0; failure == EEXIST && attempt < 8; ++attempt) {
    const uint64_t suffix = uint64_t{random()} << 32 | random();
    path = fmt::format("{}/chronicle-metrics-{}-{:016x}.shm", metrics_directory(), getpid(), suffix);
    failure = make(path);
    if (failure == 0)
      fmt::print(stderr, "chronicle: {} already exists and cannot be replaced; the metrics are in {} instead\n", usual,
                 path);
  }
  return failure == 0;
}

void unlink_at_exit() {
  MetricsRegistry& reg = metrics_registry();
  std::lock_guard lock(reg.mutex);
  if (!reg.path.empty() && std::getenv("CHRONICLE_METRICS_KEEP") == nullptr) ::unlink(reg.path.c_str());
}

// Creates the mapping at the first metric. Registry mutex held.
void ensure_mapping(MetricsRegistry& reg) {
  if (reg.base) return;
  const size_t size = format::kMetricsFileSize;
  // The header, the directory and the shared shard are reserved now, other shards when a thread
  // first takes them (attach_metric_shard): a full /dev/shm never turns an update into SIGBUS.
  shm::WriterFile file;
  std::string error;
  std::string path;
  void* mapped = MAP_FAILED;
  auto create = [&](const std::string& candidate) {
    int failure = 0;
    if (shm::create_writer_file(candidate, size, {{0, format::kMetricsShardsOffset + format::kShardSize}}, file, error,
                                &failure))
      return 0;
    return failure != 0 ? failure : EIO;
  };
  if (make_metrics_file(create, path)) {
    mapped = file.base;
    reg.fd = file.fd;
    reg.path = path;
    std::atexit(unlink_at_exit);
  } else {
    // Metrics keep working, only invisible from outside.
    fmt::print(stderr, "chronicle: metrics are private to the process: {}\n", error);
    mapped = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::bad_alloc();
  }
  reg.base = static_cast<uint8_t*>(mapped);
  reg.header = new (mapped) MetricsHeader{};
  fill_header(reg.base, *reg.header);
  format::memory_fence(std::memory_order_release);
  reg.header->magic = format::kMetricsMagic;  // last: a reader that sees it sees a whole header
}

// fork: the forking thread holds the registry lock across it (prepare), and gives it back on both
// sides, so the child never copies the registry halfway through another thread's update (an
// entry in the mapping that entry_by_series does not know yet would be registered twice).
void hold_metrics_across_fork() {
  metrics_registry().mutex.lock();
}

void release_metrics_in_parent() {
  metrics_registry().mutex.unlock();
}

void detach_from_parent_file(MetricsRegistry& reg);

void reopen_in_child() {
  MetricsRegistry& reg = metrics_registry();
  detach_from_parent_file(reg);
  reg.mutex.unlock();  // taken by hold_metrics_across_fork; the child's only thread is its owner
}

// A child forked without exec must not count into its parent's file. Right after fork it gets
// private copy-on-write pages at the same address (every pointer stays valid, no file is made
// for a child that is about to exec); its own file is made at its next slow path
// (publish_child_file), so a child that lives on shows up to readers under its pid.
void detach_from_parent_file(MetricsRegistry& reg) {
  if (reg.path.empty()) return;
  mmap(reg.base, format::kMetricsFileSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, reg.fd, 0);
  ::close(reg.fd);
  reg.fd = -1;
  reg.path.clear();
  reg.forked_child = true;
  reg.header->pid = getpid();
  // Only the forking thread exists here: the parent's other shards become free to reuse.
  reg.free_shards.clear();
  const std::atomic<uint64_t>* own = detail::t_metric_shard.cells;
  for (uint32_t shard = format::kSharedShard + 1; shard < reg.header->shard_count.load(std::memory_order_relaxed);
       ++shard) {
    ShardHeader* header = format::metric_shard(reg.base, *reg.header, shard);
    if (format::shard_cells(header) == own) continue;
    header->state.store(static_cast<uint32_t>(format::ShardState::retired), std::memory_order_relaxed);
    reg.free_shards.push_back(shard);
  }
}

// Registry mutex held. Updates other threads make between the copy and the remapping are lost:
// a short window, once, in a forked child that kept running without exec.
void publish_child_file(MetricsRegistry& reg) {
  if (!reg.forked_child) return;
  reg.forked_child = false;
  std::string path;
  int fd = -1;
  make_metrics_file(
      [&fd](const std::string& candidate) {
        fd = ::open(candidate.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        return fd >= 0 ? 0 : errno;
      },
      path);
  const size_t used = format::kMetricsShardsOffset +
                      size_t{reg.header->shard_count.load(std::memory_order_relaxed)} * format::kShardSize;
  bool copied = fd >= 0 && ftruncate(fd, static_cast<off_t>(format::kMetricsFileSize)) == 0;
  for (size_t done = 0; copied && done < used;) {
    const ssize_t n = ::pwrite(fd, reg.base + done, used - done, static_cast<off_t>(done));
    if (n <= 0)
      copied = false;
    else
      done += static_cast<size_t>(n);
  }
  if (copied &&
      mmap(reg.base, format::kMetricsFileSize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED) {
    flock(fd, LOCK_SH);
    reg.fd = fd;
    reg.path = path;
    return;
  }
  if (fd >= 0) {
    ::close(fd);
    ::unlink(path.c_str());
  }
}

// Gives the thread's shard back when it ends; its cells keep their values (totals never go
// down) and the next thread to take the shard adds to them.
struct MetricShardRelease {
  uint32_t shard = ~uint32_t{0};
  ~MetricShardRelease() {
    if (shard == ~uint32_t{0}) return;
    MetricsRegistry& reg = metrics_registry();
    std::lock_guard lock(reg.mutex);
    format::metric_shard(reg.base, *reg.header, shard)
        ->state.store(static_cast<uint32_t>(format::ShardState::retired), std::memory_order_release);
    reg.free_shards.push_back(shard);
    // Updates made later in this thread's exit (other thread_local destructors) go to shard 0.
    detail::t_metric_shard = {format::shard_cells(format::metric_shard(reg.base, *reg.header, format::kSharedShard)),
                              false};
  }
};
thread_local MetricShardRelease t_metric_shard_release;

format::SiteKind site_kind(MetricKind kind) {
  switch (kind) {
    case MetricKind::counter:
      return format::SiteKind::metric_counter;
    case MetricKind::gauge:
      return format::SiteKind::metric_gauge;
    case MetricKind::histogram:
      return format::SiteKind::metric_histogram;
  }
  return format::SiteKind::metric_counter;
}

void init_site(MetricSite& site, std::string name, MetricKind kind) {
  site.name = std::move(name);
  site.site.category = site.category.c_str();
  site.site.name = site.name.c_str();
  site.site.file = "";
  site.site.line = 0;
  site.site.kind = static_cast<uint8_t>(site_kind(kind));
}

detail::MetricHandle discarded_handle(MetricsRegistry& reg, MetricKind kind) {
  reg.header->metrics_dropped.fetch_add(1, std::memory_order_relaxed);
  if (reg.discarded_site.name.empty()) init_site(reg.discarded_site, "metrics.discarded", kind);
  reg.discarded.bound_count = 0;
  return {format::kDiscardCell, &reg.discarded, &reg.discarded_site.site};
}

}  // namespace

namespace detail {

std::atomic<uint64_t>* attach_metric_shard() {
  MetricsRegistry& reg = metrics_registry();
  std::lock_guard lock(reg.mutex);
  ensure_mapping(reg);
  publish_child_file(reg);
  uint32_t shard = format::kSharedShard;
  if (!reg.free_shards.empty()) {
    shard = reg.free_shards.back();
    reg.free_shards.pop_back();
  } else if (const uint32_t count = reg.header->shard_count.load(std::memory_order_relaxed);
             count < reg.header->max_shards &&
             (reg.fd < 0 || shm::reserve(reg.fd, format::kMetricsShardsOffset + uint64_t{count} * format::kShardSize,
                                         format::kShardSize))) {
    shard = count;
    reg.header->shard_count.store(count + 1, std::memory_order_release);
  }
  ShardHeader* header = format::metric_shard(reg.base, *reg.header, shard);
  const bool exclusive = shard != format::kSharedShard;
  if (exclusive) {
    header->thread_id = static_cast<int32_t>(syscall(SYS_gettid));
    header->state.store(static_cast<uint32_t>(format::ShardState::active), std::memory_order_release);
    t_metric_shard_release.shard = shard;
  }
  t_metric_shard = {format::shard_cells(header), exclusive};
  return t_metric_shard.cells;
}

MetricHandle register_metric(MetricKind kind, std::string_view name, const Labels& given_labels,
                             const std::vector<double>& bounds) {
  if (std::string problem = metrics::metric_name_problem(name); !problem.empty()) throw std::invalid_argument(problem);
  Labels labels = given_labels;
  std::sort(labels.begin(), labels.end());
  if (std::string problem = metrics::labels_problem(name, labels); !problem.empty())
    throw std::invalid_argument(problem);
  if (kind == MetricKind::histogram) {
    if (bounds.empty() || bounds.size() > format::kMaxHistogramBounds)
      throw std::invalid_argument(
          fmt::format("histogram {}: 1 to {} bucket bounds", name, format::kMaxHistogramBounds));
    if (!std::is_sorted(bounds.begin(), bounds.end()) ||
        std::adjacent_find(bounds.begin(), bounds.end()) != bounds.end())
      throw std::invalid_argument(fmt::format("histogram {}: bucket bounds must increase", name));
  }
  const std::string encoded_labels = metrics::encode_labels(labels);
  const std::string series = metrics::series_name(name, labels);

  MetricsRegistry& reg = metrics_registry();
  std::lock_guard lock(reg.mutex);
  ensure_mapping(reg);
  publish_child_file(reg);
  MetricEntry* entries = format::metric_entries(reg.base, *reg.header);
  if (auto found = reg.entry_by_series.find(series); found != reg.entry_by_series.end()) {
    MetricEntry& entry = entries[found->second];
    if (entry.kind != kind) throw std::invalid_argument(fmt::format("metric {} exists with another kind", series));
    return {entry.first_cell, &entry, &reg.sites[found->second].site};
  }
  if (name.size() >= format::kMetricNameSize || encoded_labels.size() >= format::kMetricLabelsSize)
    throw std::invalid_argument(fmt::format("metric {}: name or labels too long", series));
  const uint32_t index = reg.header->metric_count.load(std::memory_order_relaxed);
  const uint32_t cells = kind == MetricKind::counter     ? 1
                         : kind == MetricKind::histogram ? static_cast<uint32_t>(bounds.size()) + 2
                                                         : 0;
  const uint32_t first_cell = reg.header->cells_used.load(std::memory_order_relaxed);
  if (index >= reg.header->max_metrics || first_cell + cells > reg.header->cells_per_shard)
    return discarded_handle(reg, kind);

  MetricEntry& entry = entries[index];
  entry.kind = kind;
  entry.first_cell = first_cell;
  entry.cell_count = cells;
  entry.bound_count = static_cast<uint32_t>(bounds.size());
  std::memcpy(entry.name, name.data(), name.size());
  std::memcpy(entry.labels, encoded_labels.data(), encoded_labels.size());
  std::copy(bounds.begin(), bounds.end(), entry.bounds);
  entry.state.store(static_cast<uint32_t>(format::MetricEntryState::ready), std::memory_order_release);
  reg.header->cells_used.store(first_cell + cells, std::memory_order_relaxed);
  reg.header->metric_count.store(index + 1, std::memory_order_release);
  recorder::test_pause(recorder::TestPoint::metric_registering);

  MetricSite& site = reg.sites.emplace_back();
  init_site(site, series, kind);
  reg.entry_by_series.emplace(series, index);
  return {first_cell, &entry, &site.site};
}

}  // namespace detail

std::string metrics_path() {
  MetricsRegistry& reg = metrics_registry();
  std::lock_guard lock(reg.mutex);
  if (reg.base) publish_child_file(reg);
  return reg.path;
}

}  // namespace chronicle

namespace chronicle::detail {

const uint8_t* own_metrics_base() {
  MetricsRegistry& reg = metrics_registry();
  std::lock_guard lock(reg.mutex);
  return reg.base;
}

}  // namespace chronicle::detail

namespace chronicle::metrics {

MetricsSnapshot read_own_metrics() {
  return read_metrics(detail::own_metrics_base());
}

}  // namespace chronicle::metrics
