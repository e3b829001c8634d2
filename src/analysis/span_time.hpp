// A span's time: one definition for `stats`, the flame graph, range stats and the viewer's
// details (docs/viewer.md, "A span's time").
//
// - Wall time: from its begin to its end, suspension included. A span at the top of a coroutine
//   begins in one run of its task and may end in another, on another thread: its wall time holds
//   the time the task was suspended in between.
// - Running time: the parts of that during which its owner ran (reader/span_pairing.hpp says
//   who owns a span). A thread's own span runs all along (running = wall); a task's span runs
//   while the task has a run open: a piece per run, on the thread of that run.
//
// Both are in nanoseconds on the trace's timeline: a time is TimelineClock::ns of its ticks, and a
// duration the difference of its ends' times, so that a span's time is the same number whoever
// adds it up (stats from the events, the viewer from its index of pieces).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace chronicle::reader {
class Trace;
}

namespace chronicle::analysis {

class TimelineClock {
 public:
  TimelineClock() = default;
  TimelineClock(uint64_t origin_ticks, uint64_t frequency_hz);
  // The trace's: its origin the earliest first event of its streams.
  explicit TimelineClock(const reader::Trace& trace);

  // Nanoseconds since the origin (0 before it), rounded to the nearest.
  uint64_t ns(uint64_t ticks) const;
  uint64_t origin_ticks() const { return origin_ticks_; }
  double ns_per_tick() const { return ns_per_tick_; }

 private:
  uint64_t origin_ticks_ = 0;
  double ns_per_tick_ = 1;
};

// The earliest first event of the trace's streams (0 when it has none).
uint64_t timeline_origin(const reader::Trace& trace);

// How long each task has run so far, to give a task's span its running time from the events in
// time order: running time = ran_until(end) - ran_until(begin). Times are TimelineClock ns; runs
// are told by thread, as a thread's run of a task ends on that thread.
class TaskRunClock {
 public:
  void begin_run(uint64_t task, uint32_t thread_id, uint64_t ns);
  void end_run(uint64_t task, uint32_t thread_id, uint64_t ns);
  // The time `task` has run up to `ns` (its runs open then counted up to it).
  uint64_t ran_until(uint64_t task, uint64_t ns) const;

 private:
  struct OpenRun {
    uint32_t thread_id;
    uint64_t since;
  };
  struct Runs {
    uint64_t closed = 0;
    std::vector<OpenRun> open;
  };
  std::unordered_map<uint64_t, Runs> tasks_;
};

}  // namespace chronicle::analysis
