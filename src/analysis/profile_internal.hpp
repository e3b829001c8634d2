// Private to the profile's files (src/analysis/profile*.cpp): the accumulators both passes over
// the events fill, and what they give the report. These were one file's anonymous namespace; the
// using-directive at the end keeps their names unqualified. Include it from nowhere else.
#pragma once

#include "reader/span_pairing.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/counter_series.hpp"
#include "analysis/log_histogram.hpp"
#include "analysis/profile.hpp"
#include "analysis/span_time.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::analysis {
namespace profile_internal {

// A name's spans, in TimelineClock ns (analysis/span_time.hpp): their wall times (durations,
// total), wall times less their children's (self), and running times.
struct SpanAccumulator {
  LogHistogram durations;
  uint64_t total = 0;
  uint64_t self = 0;
  uint64_t running = 0;

  void merge(const SpanAccumulator& other) {
    durations.merge(other.durations);
    total += other.total;
    self += other.self;
    running += other.running;
  }
};

struct CounterAccumulator {
  uint64_t samples = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double first = 0, last = 0;
  uint64_t first_ticks = 0, last_ticks = 0;

  void add(uint64_t ticks, double value) {
    if (samples++ == 0) {
      first = value;
      first_ticks = ticks;
    }
    min = std::min(min, value);
    max = std::max(max, value);
    last = value;
    last_ticks = ticks;
  }
  // Takes in the count and extremes of another part of the same series (first and last depend on
  // where the parts stand: the caller's).
  void add_count_and_extremes(const CounterAccumulator& other) {
    samples += other.samples;
    min = std::min(min, other.min);
    max = std::max(max, other.max);
  }
};

// A thread is busy while inside an outermost span of its own or a task run (times in TimelineClock
// ns, as range stats count them from the viewer's index). The events come in
// time order, so counting what is open on the thread gives the time covered, overlaps once,
// without keeping any interval: memory grows with the nesting, not with the events.
class BusyClock {
 public:
  void open_span(uint64_t ticks) {
    change(ticks, [this] { ++open_spans_; });
  }
  void close_span(uint64_t ticks) {
    change(ticks, [this] { open_spans_ -= open_spans_ > 0; });
  }
  void begin_run(uint64_t ticks, uint64_t task) {
    change(ticks, [&] { runs_.push_back(task); });
  }
  // As the task graph does: the innermost run of the task ends, and runs opened inside it and
  // never ended end with it; an end with no run pairs with nothing.
  void end_run(uint64_t ticks, uint64_t task) {
    change(ticks, [&] {
      const auto match = std::find(runs_.rbegin(), runs_.rend(), task);
      if (match != runs_.rend()) runs_.resize(static_cast<size_t>(runs_.rend() - match) - 1);
    });
  }
  // Busy time that began and ended while the clock was idle (ThreadPass::append).
  void add_closed(uint64_t length) { busy_ += length; }
  // What never ended counts until the trace's end.
  uint64_t busy_until(uint64_t end) const { return busy_ + (is_busy() && end > since_ ? end - since_ : 0); }

 private:
  bool is_busy() const { return open_spans_ > 0 || !runs_.empty(); }
  template <typename Change>
  void change(uint64_t ticks, Change&& apply) {
    const bool was_busy = is_busy();
    apply();
    if (!was_busy && is_busy()) since_ = ticks;
    if (was_busy && !is_busy() && ticks > since_) busy_ += ticks - since_;
  }

  uint32_t open_spans_ = 0;
  std::vector<uint64_t> runs_;  // tasks running on the thread, innermost last
  uint64_t since_ = 0;
  uint64_t busy_ = 0;
};

struct ThreadAccumulator {
  uint64_t events = 0;
  uint64_t first = 0, last = 0;
  BusyClock busy;
  bool runs_tasks = false;  // a task ran on it (a flight recording's window then bounds task ends)
};

using SpanKey = std::pair<std::string, std::string>;

SpanKey span_key(const reader::Trace& trace, uint32_t name_id);

// A counter series and its samples, as the profile shows them.
struct CounterTotals {
  SeriesInfo series;
  CounterAccumulator values;
};

// What the pass over the events gives, to draw the profile from.
struct EventTotals {
  uint64_t seen = 0;
  uint64_t first = std::numeric_limits<uint64_t>::max(), last = 0;
  // Call sites with the same category and name are one span to the reader of the profile.
  std::map<SpanKey, SpanAccumulator> spans;
  std::map<uint32_t, ThreadAccumulator> threads;
  std::vector<CounterTotals> counters;
  reader::PairingProblems pairing_problems;
  bool read_in_pieces = false;
};

// profile_threads.cpp
bool threads_are_apart(const reader::Trace& trace);
std::optional<EventTotals> follow_threads_apart(const reader::Trace& trace, const TimelineClock& timeline,
                                                const ProgressCallback& progress, uint64_t expected,
                                                const ProfileOptions& options);

}  // namespace profile_internal

using namespace profile_internal;

}  // namespace chronicle::analysis
