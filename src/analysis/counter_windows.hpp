// Counter history over time windows, for `chronicle stats --counters`: one pass over a trace's
// counter events builds, per series, prefix sums of the values and of the time-weighted value;
// every window query is then two binary searches, whatever the window or the trace's length.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/counter_series.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::analysis {

struct WindowStats {
  int64_t from_ns = 0;  // the window, Unix ns (closed at both ends)
  int64_t to_ns = 0;
  uint64_t samples = 0;        // events in the window
  double sum = 0;              // of the values in the window (increments: the increase)
  double mean = 0;             // of the values in the window (NaN without samples)
  double time_average = 0;     // level series: the level averaged over time (NaN before the first sample)
  double rate_per_second = 0;  // increments: increase per second; others: samples per second
  double last = 0;             // at the window's end: the level, or the running total of increments
};

class CounterSeries {
 public:
  CounterSeries(std::string label, SeriesKind kind) : label_(std::move(label)), kind_(kind) {}

  const std::string& label() const { return label_; }
  SeriesKind kind() const { return kind_; }
  size_t size() const { return times_ns_.size(); }

  // Samples must come in time order.
  void add(int64_t time_ns, double value);
  WindowStats window(int64_t from_ns, int64_t to_ns) const;

 private:
  // The integral of the level from the first sample to `time_ns` (a step function: each value
  // holds until the next sample).
  double area_until(int64_t time_ns) const;

  std::string label_;
  SeriesKind kind_;
  std::vector<int64_t> times_ns_;
  std::vector<double> values_;
  std::vector<double> prefix_values_{0.0};  // prefix_values_[i]: sum of values_[0, i)
  std::vector<double> prefix_area_;         // prefix_area_[i]: area from times_ns_[0] to times_ns_[i]
};

class CounterWindows {
 public:
  // One pass over the counter events of the trace; series as counter_series.hpp defines them.
  explicit CounterWindows(const reader::Trace& trace);

  const std::vector<CounterSeries>& series() const { return series_; }
  // Times of the trace's first and last event (Unix ns); 0 when it has none.
  int64_t first_ns() const { return first_ns_; }
  int64_t last_ns() const { return last_ns_; }

 private:
  std::vector<CounterSeries> series_;
  int64_t first_ns_ = 0;
  int64_t last_ns_ = 0;
};

// "250ms", "30s", "5m", "2h", "1d", "1.5s", plain numbers are seconds. Nanoseconds; throws
// std::invalid_argument naming the text.
int64_t parse_duration(std::string_view text);

// A point in a trace, Unix ns: "+30s" after its first event, "-30s" before its last,
// "2024-05-01T12:00:00.25Z" or "2024-05-01 12:00:00" (UTC), or Unix seconds ("1714564800.5").
// Throws std::invalid_argument naming the text.
int64_t parse_time_point(std::string_view text, int64_t trace_first_ns, int64_t trace_last_ns);

}  // namespace chronicle::analysis
