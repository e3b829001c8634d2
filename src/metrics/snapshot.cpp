#include "metrics/snapshot.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "format/clock.hpp"
#include "format/input_error.hpp"
#include "metrics/metric_names.hpp"
#include "shm/mapping_check.hpp"
#include "shm/shm_file.hpp"

namespace chronicle {
namespace metrics {
namespace {

using format::MetricEntry;
using format::MetricKind;
using format::MetricsHeader;

std::string bounded_text(const char* text, size_t capacity) {
  return std::string(text, strnlen(text, capacity));
}

MetricsSnapshot read_checked_metrics(const std::string& path, const uint8_t* base, const MetricsGeometry& geometry);

// The header is copied first: what is checked is what is used, whatever the writer does next.
MetricsGeometry checked_geometry(const std::string& path, const uint8_t* base, uint64_t size) {
  shm::MappingCheck check(path, "metrics mapping", size);
  if (size < format::kMetricsHeaderSize) check.fail("file size", 0, "is smaller than the header");
  // Only the fields fixed at creation: the live counters after them change under a writer.
  alignas(MetricsHeader) uint8_t copy[sizeof(MetricsHeader)] = {};
  std::memcpy(copy, base, offsetof(MetricsHeader, metric_count));
  const MetricsHeader& h = *reinterpret_cast<const MetricsHeader*>(copy);
#define CHRONICLE_FIELD(name) #name, offsetof(MetricsHeader, name)
  if (h.magic != format::kMetricsMagic)
    check.fail(CHRONICLE_FIELD(magic), fmt::format("0x{:016x} is not chronicle metrics' (bad magic)", h.magic));
  if (h.version != format::kMetricsVersion)
    check.fail(CHRONICLE_FIELD(version),
               fmt::format("{} is not layout version {}", h.version, format::kMetricsVersion));
  if (h.file_size != size)
    check.fail(CHRONICLE_FIELD(file_size), fmt::format("says {} bytes, the file has {}", h.file_size, size));
  if (h.entry_size != sizeof(MetricEntry))
    check.fail(CHRONICLE_FIELD(entry_size), fmt::format("is {}, not {}", h.entry_size, sizeof(MetricEntry)));
  const uint64_t directory_size = check.product(CHRONICLE_FIELD(max_metrics), h.max_metrics, sizeof(MetricEntry));
  const uint64_t directory_end =
      check.region({CHRONICLE_FIELD(directory_offset)}, h.directory_offset, {CHRONICLE_FIELD(max_metrics)},
                   directory_size, format::kMetricsHeaderSize, alignof(MetricEntry));
  const uint64_t shards_size = check.product(CHRONICLE_FIELD(max_shards), h.max_shards, h.shard_size);
  check.region({CHRONICLE_FIELD(shards_offset)}, h.shards_offset, {CHRONICLE_FIELD(max_shards)}, shards_size,
               directory_end, alignof(format::ShardHeader));
  if (h.shard_size % alignof(format::ShardHeader) != 0)
    check.fail(CHRONICLE_FIELD(shard_size), fmt::format("{} is not a multiple of 64", h.shard_size));
  const uint64_t cells_size = check.product(CHRONICLE_FIELD(cells_per_shard), h.cells_per_shard, 8);
  if (sizeof(format::ShardHeader) + cells_size > h.shard_size)
    check.fail(CHRONICLE_FIELD(cells_per_shard),
               fmt::format("{} cells do not fit a shard of {} bytes", h.cells_per_shard, h.shard_size));
#undef CHRONICLE_FIELD
  return {size, h.directory_offset, h.shards_offset, h.max_metrics, h.max_shards, h.shard_size, h.cells_per_shard};
}

// A ready entry whose cells lie outside the shards, or whose histogram has more bounds than an
// entry holds, cannot come from a writer: the mapping is refused.
void check_entry(const shm::MappingCheck& check, const MetricsGeometry& geometry, const MetricEntry& entry,
                 uint32_t index, const MetricSample& sample) {
  const uint64_t at = geometry.directory_offset + uint64_t{index} * sizeof(MetricEntry);
  const auto field = [&](std::string_view name) { return fmt::format("entries[{}].{}", index, name); };
  if (uint64_t{entry.first_cell} + entry.cell_count > geometry.cells_per_shard)
    check.fail(field("first_cell"), at + offsetof(MetricEntry, first_cell),
               fmt::format("{} with {} cells runs past the {} cells of a shard", entry.first_cell, entry.cell_count,
                           geometry.cells_per_shard));
  // The registry's own rule: what it would refuse cannot come from it, and would be raw lines in
  // exposition. The text itself is left out of the message (it would be raw lines there too).
  if (!metric_name_problem(sample.name).empty())
    check.fail(field("name"), at + offsetof(MetricEntry, name),
               "is not a name the registry accepts ([A-Za-z_:][A-Za-z0-9_:.]*)");
  if (!labels_problem(sample.name, sample.labels).empty())
    check.fail(field("labels"), at + offsetof(MetricEntry, labels),
               "hold a label the registry refuses (names [A-Za-z_][A-Za-z0-9_]*, each once, sorted)");
  if (entry.kind == MetricKind::histogram && entry.bound_count > format::kMaxHistogramBounds)
    check.fail(field("bound_count"), at + offsetof(MetricEntry, bound_count),
               fmt::format("is {}, more than {}", entry.bound_count, format::kMaxHistogramBounds));
}

}  // namespace

std::string MetricsMapping::path_for(int pid) {
  const char* directory = std::getenv("CHRONICLE_METRICS_DIR");
  return fmt::format("{}/chronicle-metrics-{}.shm", directory && *directory ? directory : "/dev/shm", pid);
}

std::vector<std::string> MetricsMapping::candidates_for(int pid) {
  const std::string usual = path_for(pid);
  return shm::find_mapping_files({std::filesystem::path(usual).parent_path().string()},
                                 fmt::format("chronicle-metrics-{}", pid));
}

MetricsMapping::MetricsMapping(const std::string& path) : MetricsMapping(path, std::optional<uid_t>()) {}

MetricsMapping::MetricsMapping(const std::string& path, uid_t owner) : MetricsMapping(path, std::optional(owner)) {}

MetricsMapping::MetricsMapping(const std::string& path, std::optional<uid_t> owner)
    : file_(path, false, owner, format::kMetricsHeaderSize, "metrics mapping"),
      geometry_(checked_geometry(file_.path(), file_.base(), file_.size())) {}

MetricsSnapshot MetricsMapping::read() const {
  return read_checked_metrics(file_.path(), file_.base(), geometry_);
}

MetricsSnapshot read_metrics(const uint8_t* base) {
  if (!base) {
    MetricsSnapshot snapshot;
    snapshot.monotonic_ns = recorder::read_monotonic_ns();
    return snapshot;
  }
  const std::string path = "(this process's metrics)";
  return read_checked_metrics(path, base, checked_geometry(path, base, format::kMetricsFileSize));
}

namespace {

MetricsSnapshot read_checked_metrics(const std::string& path, const uint8_t* base, const MetricsGeometry& geometry) {
  const shm::MappingCheck check(path, "metrics mapping", geometry.file_size);
  MetricsSnapshot snapshot;
  snapshot.monotonic_ns = recorder::read_monotonic_ns();
  const auto& header = *reinterpret_cast<const MetricsHeader*>(base);
  snapshot.pid = header.pid;
  snapshot.process_name = bounded_text(header.process_name, sizeof header.process_name);
  snapshot.dropped = header.metrics_dropped.load(std::memory_order_relaxed);
  // Acquire pairs with the writer's release: entries below the count, and shards below theirs,
  // are whole.
  const uint32_t count = std::min(header.metric_count.load(std::memory_order_acquire), geometry.max_metrics);
  const uint32_t shards = std::min(header.shard_count.load(std::memory_order_acquire), geometry.max_shards);
  snapshot.threads = shards > 0 ? shards - 1 : 0;
  std::vector<const std::atomic<uint64_t>*> cells(shards);
  for (uint32_t shard = 0; shard < shards; ++shard)
    cells[shard] = reinterpret_cast<const std::atomic<uint64_t>*>(
        base + geometry.shards_offset + uint64_t{shard} * geometry.shard_size + sizeof(format::ShardHeader));
  auto sum_cell = [&](uint32_t cell) {
    uint64_t total = 0;
    for (auto* shard_cells : cells) total += shard_cells[cell].load(std::memory_order_relaxed);
    return total;
  };
  const auto* entries = reinterpret_cast<const MetricEntry*>(base + geometry.directory_offset);
  snapshot.metrics.reserve(count);
  for (uint32_t index = 0; index < count; ++index) {
    const MetricEntry& entry = entries[index];
    if (entry.state.load(std::memory_order_acquire) != static_cast<uint32_t>(format::MetricEntryState::ready)) continue;
    MetricSample sample;
    sample.name = bounded_text(entry.name, sizeof entry.name);
    sample.labels = decode_labels(bounded_text(entry.labels, sizeof entry.labels));
    check_entry(check, geometry, entry, index, sample);
    sample.kind = entry.kind;
    switch (entry.kind) {
      case MetricKind::counter:
        sample.count = sum_cell(entry.first_cell);
        sample.value = static_cast<double>(sample.count);
        break;
      case MetricKind::gauge:
        sample.value = std::bit_cast<double>(entry.gauge_bits.load(std::memory_order_relaxed));
        break;
      case MetricKind::histogram: {
        const uint32_t bounds = entry.bound_count;
        if (entry.cell_count != bounds + 2) continue;
        sample.bounds.assign(entry.bounds, entry.bounds + bounds);
        for (auto* shard_cells : cells)
          sample.sum += std::bit_cast<double>(shard_cells[entry.first_cell].load(std::memory_order_relaxed));
        for (uint32_t bucket = 0; bucket <= bounds; ++bucket) {
          sample.buckets.push_back(sum_cell(entry.first_cell + 1 + bucket));
          sample.count += sample.buckets.back();
        }
        sample.value = static_cast<double>(sample.count);
        break;
      }
      default:
        continue;
    }
    snapshot.metrics.push_back(std::move(sample));
  }
  return snapshot;
}

}  // namespace

}  // namespace metrics
}  // namespace chronicle
