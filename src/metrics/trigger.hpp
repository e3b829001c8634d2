// Triggers on metrics (`chronicle record --mode flight --trigger 'rpc.latency_seconds:p99 > 0.05'`):
// a condition over a process's metrics, evaluated on snapshots taken while it runs, that fires
// once each time it becomes true and is armed again only once the value is back on the safe side
// of the threshold by a margin (hysteresis), so a value wobbling around the line fires once.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "metrics/metric_names.hpp"
#include "metrics/snapshot.hpp"

namespace chronicle::metrics {

// What a condition measures of the series it selects (summed over them when several match; a
// quantile merges their histograms).
enum class TriggerMeasure { value, rate, quantile, mean };

struct TriggerCondition {
  std::string text;  // as written, for messages
  std::string metric;
  LabelList where;  // series whose labels include these
  TriggerMeasure measure = TriggerMeasure::value;
  double quantile = 0;     // for TriggerMeasure::quantile: 0.99 for p99
  bool above = true;       // '>' or '>=' (else '<' or '<=')
  bool inclusive = false;  // '>=' or '<='
  double threshold = 0;
};

// "NAME[{label=value,...}][:MEASURE| MEASURE] OP NUMBER[/s]", MEASURE one of value (the default:
// a counter's total, a gauge's value, a histogram's count), rate (per second, over the window),
// p50, p90, p95, p99, p999 (of a histogram's observations in the window), mean (idem); OP one of
// > >= < <=. Examples: "rpc.latency_seconds:p99 > 0.05", "errors rate > 10/s",
// "queue.depth{pool=\"a\"} >= 100". Throws std::invalid_argument saying what is wrong.
TriggerCondition parse_trigger(std::string_view text);

// The measure of `condition` between two snapshots of one process (`before` is `window` older
// than `after`, or the oldest there is); nullopt when there is nothing to measure (no such
// metric yet, a quantile of a window with no observation).
std::optional<double> measure(const TriggerCondition& condition, const MetricsSnapshot& before,
                              const MetricsSnapshot& after);

// The state of one trigger over a stream of measured values.
class TriggerState {
 public:
  // `hysteresis`: the fraction of the threshold by which the value must come back past it before
  // the trigger is armed again (0.1: a "> 0.05" trigger re-arms below 0.045).
  TriggerState(TriggerCondition condition, double hysteresis);
  enum class Step { none, fired, rearmed };
  // One more measured value (or none); fired when it crossed the line while armed.
  Step observe(std::optional<double> value);
  bool armed() const { return armed_; }
  const TriggerCondition& condition() const { return condition_; }
  double rearm_line() const { return rearm_line_; }

 private:
  TriggerCondition condition_;
  double rearm_line_;
  bool armed_ = true;
};

// Snapshots of one process kept for a window, so that rates and quantiles cover the last `window`.
class SnapshotWindow {
 public:
  explicit SnapshotWindow(std::chrono::nanoseconds window) : window_(window) {}
  // Adds `now`; returns the snapshot to measure from (the newest at least `window` older, else the
  // oldest kept).
  const MetricsSnapshot& add(MetricsSnapshot now);
  const MetricsSnapshot& newest() const { return kept_.back(); }

 private:
  std::chrono::nanoseconds window_;
  std::deque<MetricsSnapshot> kept_;
};

}  // namespace chronicle::metrics
