// Reading a process's metrics from its mapping: from another process, with no help from the
// program, or from inside it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chronicle/detail/metrics_layout.hpp"
#include "metrics/metric_names.hpp"
#include "shm/reader_mapping.hpp"

namespace chronicle::metrics {

struct MetricSample {
  std::string name;
  LabelList labels;  // sorted by name
  format::MetricKind kind = format::MetricKind::counter;
  // counter: the total; gauge: the value; histogram: the number of observations.
  double value = 0;
  // histograms only
  std::vector<double> bounds;
  std::vector<uint64_t> buckets;  // per bucket (not cumulative); one more than bounds (+Inf)
  double sum = 0;
  uint64_t count = 0;
};

struct MetricsSnapshot {
  int pid = 0;
  std::string process_name;
  uint64_t monotonic_ns = 0;          // when it was taken, for rates between two snapshots
  uint32_t threads = 0;               // shards that have held a thread
  uint32_t dropped = 0;               // registrations refused (directory or cells full)
  std::vector<MetricSample> metrics;  // in registration order
};

// Where a metrics mapping's regions are, as checked when it was opened: readers use this copy,
// never the header's fields again (a writer could change them after the check).
struct MetricsGeometry {
  uint64_t file_size = 0;
  uint64_t directory_offset = 0;
  uint64_t shards_offset = 0;
  uint32_t max_metrics = 0;
  uint32_t max_shards = 0;
  uint32_t shard_size = 0;
  uint32_t cells_per_shard = 0;
};

// A process's metrics mapping, mapped read-only.
class MetricsMapping {
 public:
  // /dev/shm/chronicle-metrics-<pid>.shm, or under $CHRONICLE_METRICS_DIR.
  static std::string path_for(int pid);
  // Where the metrics of process `pid` may be: path_for(pid) and the chronicle-metrics-<pid>-*.shm
  // a process makes when that name was taken, newest first (shm::find_mapping_files).
  static std::vector<std::string> candidates_for(int pid);

  // Checks every size and offset of the header against the file's size (docs/guarantees.md,
  // "Hostile mappings"). Throws shm::MappingError (a format::InputError) naming the field and its
  // offset when the file is not a sound metrics mapping, std::runtime_error when it cannot be
  // opened.
  explicit MetricsMapping(const std::string& path);
  // The same for a reader that found the file by a process's pid: a file `owner` does not own is
  // refused with shm::MappingRefused.
  MetricsMapping(const std::string& path, uid_t owner);
  MetricsMapping(const MetricsMapping&) = delete;
  MetricsMapping& operator=(const MetricsMapping&) = delete;

  const std::string& path() const { return file_.path(); }
  // True while the writing process holds its lock on the file.
  bool writer_alive() const { return file_.writer_alive(); }
  MetricsSnapshot read() const;

 private:
  MetricsMapping(const std::string& path, std::optional<uid_t> owner);
  shm::ReaderMapping file_;
  MetricsGeometry geometry_;
};

// Sums the shards of the mapping at `base` (mapped by this process, or by MetricsMapping).
MetricsSnapshot read_metrics(const uint8_t* base);

// This process's own metrics (empty when it has none yet). Part of the runtime (recorder/metrics_registry.cpp):
// only a program that links chronicle has metrics of its own.
MetricsSnapshot read_own_metrics();

}  // namespace chronicle::metrics
