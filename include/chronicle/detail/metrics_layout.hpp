// The binary layout of a process's metrics mapping, shared by the writer (the instrumented
// program) and readers in other processes (`chronicle top`, `chronicle metrics serve`).
//
// Why a mapping of its own rather than a region of the trace session's file: metrics are always
// on, tracing or not, and must outlive sessions that start and stop; a session's file exists only
// while it runs. So each process has one metrics file, /dev/shm/chronicle-metrics-<pid>.shm,
// created at its first metric. It follows the session file's conventions: magic and version
// first (magic written last), the pid in the header, and the writer holding a shared flock for
// its whole life so a reader learns it is gone by taking an exclusive one.
//
//   [MetricsHeader, 4 KiB][MetricEntry x max_metrics][Shard x max_shards]
//
// The directory is append-only: an entry, once its state is ready, never changes except for a
// gauge's value. Every thread writes its own shard (a cache-line-aligned block of 8-byte cells)
// with plain relaxed stores, no read-modify-write; readers sum a metric's cells over all shards.
// Shard 0 is shared by the threads that found no free shard and is updated with fetch_add.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace chronicle::format {

inline constexpr uint64_t kMetricsMagic = 0x31304d4e52484343ULL;  // "CCHRNM01"
inline constexpr uint32_t kMetricsVersion = 1;
inline constexpr size_t kMetricsHeaderSize = 4096;
inline constexpr uint32_t kMaxMetrics = 2048;
inline constexpr uint32_t kMaxMetricShards = 128;
inline constexpr uint32_t kCellsPerShard = 8192 - 8;  // a shard is 64 KiB with its header line
inline constexpr size_t kMetricNameSize = 96;
inline constexpr size_t kMetricLabelsSize = 224;
inline constexpr uint32_t kMaxHistogramBounds = 24;
// Labels are stored as key US value RS key US value ... (ASCII unit/record separators), which
// cannot occur in label names and are refused in values.
inline constexpr char kLabelKeyEnd = '\x1f';
inline constexpr char kLabelEnd = '\x1e';
// Cells [kDiscardCell, kDiscardCell + kDiscardCells) of every shard take the updates of metrics
// that found no room; readers ignore them. Two, because the handle such a metric gets has no
// bounds: a counter adds to the first cell, a histogram to its sum (the first) and to its one
// bucket (the second). With one cell, that bucket was the first registered metric's cell.
inline constexpr uint32_t kDiscardCell = 0;
inline constexpr uint32_t kDiscardCells = 2;
inline constexpr uint32_t kSharedShard = 0;

enum class MetricKind : uint32_t { counter = 1, gauge = 2, histogram = 3 };

enum class MetricEntryState : uint32_t { empty = 0, ready = 1 };

enum class ShardState : uint32_t { unused = 0, active = 1, retired = 2 };

struct MetricsHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t header_size;
  int32_t pid;
  uint32_t entry_size;
  char process_name[64];
  uint64_t directory_offset;
  uint64_t shards_offset;
  uint64_t file_size;
  uint32_t max_metrics;
  uint32_t max_shards;
  uint32_t shard_size;  // bytes, header line included
  uint32_t cells_per_shard;
  uint64_t realtime_ns_at_create;
  std::atomic<uint32_t> metric_count;  // entries [0, metric_count) are ready (release)
  std::atomic<uint32_t> shard_count;   // shards [0, shard_count) may hold values
  std::atomic<uint32_t> cells_used;
  std::atomic<uint32_t> metrics_dropped;  // registrations refused (directory or cells full): their
                                          // handles write to the discard cells
};
static_assert(sizeof(MetricsHeader) <= kMetricsHeaderSize);

// A metric as readers find it. Cells, relative to the start of each shard's cell array:
//   counter:   [first_cell]                       the count
//   gauge:     none; the value is gauge_bits (a double), set by whichever thread sets it
//   histogram: [first_cell]                       sum of observations (double bits)
//              [first_cell + 1 + i]               observations <= bounds[i] (and > bounds[i-1])
//              [first_cell + 1 + bound_count]     observations above the last bound
// A histogram's count is the sum of its buckets, so a reader never sees a count that disagrees
// with them even though it reads the cells one at a time.
struct alignas(64) MetricEntry {
  std::atomic<uint32_t> state;  // MetricEntryState; ready is stored with release
  MetricKind kind;
  uint32_t first_cell;
  uint32_t cell_count;
  uint32_t bound_count;
  uint32_t reserved;
  char name[kMetricNameSize];
  char labels[kMetricLabelsSize];
  double bounds[kMaxHistogramBounds];
  // Its own cache line: a gauge set often does not slow readers of the entry's other fields.
  alignas(64) std::atomic<uint64_t> gauge_bits;
};
static_assert(sizeof(MetricEntry) == 640);

struct alignas(64) ShardHeader {
  std::atomic<uint32_t> state;  // ShardState
  int32_t thread_id;            // the last thread that owned it
};
static_assert(sizeof(ShardHeader) == 64);

inline constexpr uint32_t kShardSize = sizeof(ShardHeader) + kCellsPerShard * 8;
static_assert(kShardSize == 65536);

inline constexpr uint64_t kMetricsDirectoryOffset = kMetricsHeaderSize;
inline constexpr uint64_t kMetricsShardsOffset = kMetricsDirectoryOffset + uint64_t{kMaxMetrics} * sizeof(MetricEntry);
inline constexpr uint64_t kMetricsFileSize = kMetricsShardsOffset + uint64_t{kMaxMetricShards} * kShardSize;

inline MetricEntry* metric_entries(void* base, const MetricsHeader& header) {
  return reinterpret_cast<MetricEntry*>(static_cast<uint8_t*>(base) + header.directory_offset);
}

inline ShardHeader* metric_shard(void* base, const MetricsHeader& header, uint32_t shard) {
  return reinterpret_cast<ShardHeader*>(static_cast<uint8_t*>(base) + header.shards_offset +
                                        uint64_t{shard} * header.shard_size);
}

inline std::atomic<uint64_t>* shard_cells(ShardHeader* shard) {
  return reinterpret_cast<std::atomic<uint64_t>*>(shard + 1);
}

}  // namespace chronicle::format
