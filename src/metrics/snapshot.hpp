// Reading a process's metrics from its mapping: from another process, with no help from the
// program, or from inside it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chronicle/detail/metrics_layout.hpp"
#include "metrics/metric_names.hpp"

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

// A process's metrics mapping, mapped read-only.
class MetricsMapping {
 public:
  // /dev/shm/chronicle-metrics-<pid>.shm, or under $CHRONICLE_METRICS_DIR.
  static std::string path_for(int pid);

  // Throws format::InputError when the file is not a metrics mapping, std::runtime_error when
  // it cannot be opened.
  explicit MetricsMapping(const std::string& path);
  ~MetricsMapping();
  MetricsMapping(const MetricsMapping&) = delete;
  MetricsMapping& operator=(const MetricsMapping&) = delete;

  const std::string& path() const { return path_; }
  // True while the writing process holds its lock on the file.
  bool writer_alive() const;
  MetricsSnapshot read() const;

 private:
  std::string path_;
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
};

// Sums the shards of the mapping at `base` (mapped by this process, or by MetricsMapping).
MetricsSnapshot read_metrics(const uint8_t* base);

// This process's own metrics (empty when it has none yet). Part of the runtime (registry.cpp):
// only a program that links chronicle has metrics of its own.
MetricsSnapshot read_own_metrics();

}  // namespace chronicle::metrics
