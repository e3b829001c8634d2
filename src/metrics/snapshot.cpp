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
#include <stdexcept>

#include "format/input_error.hpp"
#include "recorder/clock.hpp"
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

}  // namespace

std::string MetricsMapping::path_for(int pid) {
  const char* directory = std::getenv("CHRONICLE_METRICS_DIR");
  return fmt::format("{}/chronicle-metrics-{}.shm", directory && *directory ? directory : "/dev/shm", pid);
}

MetricsMapping::MetricsMapping(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  struct stat info {};
  if (fstat(fd_, &info) != 0 || static_cast<uint64_t>(info.st_size) < format::kMetricsHeaderSize) {
    ::close(fd_);
    throw format::InputError(fmt::format("{}: file is too small for chronicle metrics (offset 0)", path));
  }
  size_ = static_cast<size_t>(info.st_size);
  void* mapped = mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
  if (mapped == MAP_FAILED) {
    ::close(fd_);
    throw std::runtime_error(fmt::format("cannot map {}: {}", path, std::strerror(errno)));
  }
  base_ = static_cast<uint8_t*>(mapped);
  const auto& header = *reinterpret_cast<const MetricsHeader*>(base_);
  std::string problem;
  size_t offset = 0;
  if (header.magic != format::kMetricsMagic)
    problem = "bad magic";
  else if (header.version != format::kMetricsVersion) {
    problem = fmt::format("layout version {} is not {}", header.version, format::kMetricsVersion);
    offset = offsetof(MetricsHeader, version);
  } else if (header.file_size != size_ || header.entry_size != sizeof(MetricEntry) ||
             header.directory_offset + uint64_t{header.max_metrics} * sizeof(MetricEntry) > header.shards_offset ||
             header.shards_offset + uint64_t{header.max_shards} * header.shard_size > size_ ||
             sizeof(format::ShardHeader) + uint64_t{header.cells_per_shard} * 8 > header.shard_size) {
    problem = "regions overlap or run past the end of the file";
    offset = offsetof(MetricsHeader, directory_offset);
  }
  if (!problem.empty()) {
    munmap(base_, size_);
    ::close(fd_);
    throw format::InputError(fmt::format("{}: not chronicle metrics: {} (offset {})", path, problem, offset));
  }
}

MetricsMapping::~MetricsMapping() {
  munmap(base_, size_);
  ::close(fd_);
}

bool MetricsMapping::writer_alive() const {
  return shm::writer_alive(fd_);
}

MetricsSnapshot MetricsMapping::read() const {
  return read_metrics(base_);
}

MetricsSnapshot read_metrics(const uint8_t* base) {
  MetricsSnapshot snapshot;
  snapshot.monotonic_ns = recorder::read_monotonic_ns();
  if (!base) return snapshot;
  auto* writable_base = const_cast<uint8_t*>(base);  // the layout helpers take void*; nothing is written
  const auto& header = *reinterpret_cast<const MetricsHeader*>(base);
  snapshot.pid = header.pid;
  snapshot.process_name = bounded_text(header.process_name, sizeof header.process_name);
  snapshot.dropped = header.metrics_dropped.load(std::memory_order_relaxed);
  // Acquire pairs with the writer's release: entries below the count, and shards below theirs,
  // are whole.
  const uint32_t count = std::min(header.metric_count.load(std::memory_order_acquire), header.max_metrics);
  const uint32_t shards = std::min(header.shard_count.load(std::memory_order_acquire), header.max_shards);
  snapshot.threads = shards > 0 ? shards - 1 : 0;
  std::vector<std::atomic<uint64_t>*> cells(shards);
  for (uint32_t shard = 0; shard < shards; ++shard)
    cells[shard] = format::shard_cells(format::metric_shard(writable_base, header, shard));
  auto sum_cell = [&](uint32_t cell) {
    uint64_t total = 0;
    for (auto* shard_cells : cells) total += shard_cells[cell].load(std::memory_order_relaxed);
    return total;
  };
  const MetricEntry* entries = format::metric_entries(writable_base, header);
  snapshot.metrics.reserve(count);
  for (uint32_t index = 0; index < count; ++index) {
    const MetricEntry& entry = entries[index];
    if (entry.state.load(std::memory_order_acquire) != static_cast<uint32_t>(format::MetricEntryState::ready)) continue;
    if (entry.first_cell + entry.cell_count > header.cells_per_shard) continue;
    MetricSample sample;
    sample.name = bounded_text(entry.name, sizeof entry.name);
    sample.labels = decode_labels(bounded_text(entry.labels, sizeof entry.labels));
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
        const uint32_t bounds = std::min(entry.bound_count, format::kMaxHistogramBounds);
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

}  // namespace metrics
}  // namespace chronicle
