// chronicle metrics: counters, gauges and latency histograms that are always on, tracing or not.
//
//   chronicle::Counter bytes{"tcp.bytes_acked", {{"stream", "12"}}};
//   bytes.add(n);
//   chronicle::Gauge depth{"queue.depth", {{"pool", "io"}}};
//   depth.set(17);
//   chronicle::Histogram latency{"rpc.latency_seconds", {{"customer", "acme"}}};
//   latency.observe(0.0042);           // or: { auto timer = latency.time(); ... }
//
//   CHRONICLE_METRIC_ADD("requests", 1);   // a metric per call site, no labels
//
// Values live in the process's metrics mapping (/dev/shm/chronicle-metrics-<pid>.shm), where
// `chronicle top`, `chronicle metrics serve` and other readers sum them without the program's
// help. Each thread writes its own shard, so an increment is a thread-local load and a store.
// While a trace session runs, every change is also a trace event (a counter event of a site
// named after the metric and its labels): counters record the increment, gauges the new value,
// histograms the observation.
//
// Metric objects are cheap handles: constructing the same name and labels twice gives two
// handles on one metric. Names are [A-Za-z_:][A-Za-z0-9_:.]*, label names [A-Za-z_][A-Za-z0-9_]*;
// anything else throws std::invalid_argument.
#pragma once

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chronicle/detail/metrics_layout.hpp"
#include "chronicle/detail/writer.hpp"

namespace chronicle {

using Labels = std::vector<std::pair<std::string, std::string>>;

namespace detail {

// The calling thread's shard. Trivial, so the thread_local needs no guard.
struct MetricShardSlot {
  std::atomic<uint64_t>* cells;
  bool exclusive;  // false: shard 0, shared with other threads, updated with fetch_add
};
extern thread_local constinit MetricShardSlot t_metric_shard __attribute__((tls_model("initial-exec")));

// Slow paths (src/recorder/metrics_registry.cpp).
std::atomic<uint64_t>* attach_metric_shard();

struct MetricHandle {
  uint32_t first_cell = format::kDiscardCell;
  format::MetricEntry* entry = nullptr;
  Site* site = nullptr;  // the trace site its changes are recorded under
};
MetricHandle register_metric(format::MetricKind kind, std::string_view name, const Labels& labels,
                             const std::vector<double>& bounds = {});

CHRONICLE_INLINE std::atomic<uint64_t>* metric_cells() {
  std::atomic<uint64_t>* cells = t_metric_shard.cells;
  if (cells == nullptr) [[unlikely]]
    cells = attach_metric_shard();
  return cells;
}

// Only this thread writes an exclusive shard, so load-add-store is race free and needs no
// locked instruction; readers may see the old or the new value, never a torn one.
CHRONICLE_INLINE void add_to_cell(std::atomic<uint64_t>& cell, uint64_t amount) {
  if (t_metric_shard.exclusive) [[likely]]
    cell.store(cell.load(std::memory_order_relaxed) + amount, std::memory_order_relaxed);
  else
    cell.fetch_add(amount, std::memory_order_relaxed);
}

CHRONICLE_INLINE void add_to_double_cell(std::atomic<uint64_t>& cell, double amount) {
  if (t_metric_shard.exclusive) [[likely]] {
    const double sum = std::bit_cast<double>(cell.load(std::memory_order_relaxed)) + amount;
    cell.store(std::bit_cast<uint64_t>(sum), std::memory_order_relaxed);
    return;
  }
  uint64_t expected = cell.load(std::memory_order_relaxed);
  while (!cell.compare_exchange_weak(expected, std::bit_cast<uint64_t>(std::bit_cast<double>(expected) + amount),
                                     std::memory_order_relaxed)) {
  }
}

template <typename Value>
CHRONICLE_INLINE void trace_metric_change([[maybe_unused]] Site* site, [[maybe_unused]] Value value) {
#ifndef CHRONICLE_DISABLE
  const uint32_t generation = g_generation.load(std::memory_order_relaxed);
  if (generation != 0) [[unlikely]]
    emit_counter_at(*site, generation, value);
#endif
}

}  // namespace detail

// A cumulative count: only goes up. Readers derive rates.
class Counter {
 public:
  explicit Counter(std::string_view name, const Labels& labels = {})
      : handle_(detail::register_metric(format::MetricKind::counter, name, labels)) {}

  CHRONICLE_INLINE void add(uint64_t amount = 1) {
    detail::add_to_cell(detail::metric_cells()[handle_.first_cell], amount);
    detail::trace_metric_change(handle_.site, static_cast<int64_t>(amount));
  }
  CHRONICLE_INLINE void inc() { add(1); }

 private:
  detail::MetricHandle handle_;
};

// A value that goes up and down. One value per metric (not per thread): set() from any thread
// replaces it for all.
class Gauge {
 public:
  explicit Gauge(std::string_view name, const Labels& labels = {})
      : handle_(detail::register_metric(format::MetricKind::gauge, name, labels)) {}

  void set(double value) {
    handle_.entry->gauge_bits.store(std::bit_cast<uint64_t>(value), std::memory_order_relaxed);
    detail::trace_metric_change(handle_.site, value);
  }
  void add(double amount) {
    std::atomic<uint64_t>& bits = handle_.entry->gauge_bits;
    uint64_t expected = bits.load(std::memory_order_relaxed);
    double updated;
    do {
      updated = std::bit_cast<double>(expected) + amount;
    } while (!bits.compare_exchange_weak(expected, std::bit_cast<uint64_t>(updated), std::memory_order_relaxed));
    detail::trace_metric_change(handle_.site, updated);
  }
  void sub(double amount) { add(-amount); }
  double value() const { return std::bit_cast<double>(handle_.entry->gauge_bits.load(std::memory_order_relaxed)); }

 private:
  detail::MetricHandle handle_;
};

// A distribution (latencies, in seconds by convention) in fixed buckets; readers compute counts,
// sums and quantiles from them.
class Histogram {
 public:
  // 100 µs to 10 s, about three buckets per decade.
  static std::vector<double> default_latency_bounds() {
    return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  }

  explicit Histogram(std::string_view name, const Labels& labels = {},
                     const std::vector<double>& bounds = default_latency_bounds())
      : handle_(detail::register_metric(format::MetricKind::histogram, name, labels, bounds)),
        bounds_(handle_.entry->bounds),
        bound_count_(handle_.entry->bound_count) {}

  CHRONICLE_INLINE void observe(double value) {
    std::atomic<uint64_t>* cells = detail::metric_cells() + handle_.first_cell;
    uint32_t bucket = 0;
    while (bucket < bound_count_ && value > bounds_[bucket]) ++bucket;
    detail::add_to_cell(cells[1 + bucket], 1);
    detail::add_to_double_cell(cells[0], value);
    detail::trace_metric_change(handle_.site, value);
  }

  // Observes the seconds from its construction to its destruction.
  class Timer {
   public:
    explicit Timer(Histogram& histogram) : histogram_(histogram), start_(std::chrono::steady_clock::now()) {}
    ~Timer() { histogram_.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()); }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

   private:
    Histogram& histogram_;
    std::chrono::steady_clock::time_point start_;
  };
  [[nodiscard]] Timer time() { return Timer(*this); }

 private:
  detail::MetricHandle handle_;
  const double* bounds_;
  uint32_t bound_count_;
};

// Path of this process's metrics mapping ("" before the first metric, or when it could not be
// created and metrics live in private memory).
std::string metrics_path();

}  // namespace chronicle

// One metric per call site, registered the first time the line runs.
#define CHRONICLE_METRIC_ADD(name, amount)                      \
  do {                                                          \
    static ::chronicle::Counter chronicle_metric_counter{name}; \
    chronicle_metric_counter.add(amount);                       \
  } while (0)

#define CHRONICLE_METRIC_SET(name, value)                   \
  do {                                                      \
    static ::chronicle::Gauge chronicle_metric_gauge{name}; \
    chronicle_metric_gauge.set(value);                      \
  } while (0)

#define CHRONICLE_METRIC_OBSERVE(name, value)                       \
  do {                                                              \
    static ::chronicle::Histogram chronicle_metric_histogram{name}; \
    chronicle_metric_histogram.observe(value);                      \
  } while (0)
