#include "analysis/span_time.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "reader/trace_reader.hpp"

namespace chronicle::analysis {

TimelineClock::TimelineClock(uint64_t origin_ticks, uint64_t frequency_hz)
    : origin_ticks_(origin_ticks), ns_per_tick_(1e9 / static_cast<double>(frequency_hz ? frequency_hz : 1)) {}

TimelineClock::TimelineClock(const reader::Trace& trace)
    : TimelineClock(timeline_origin(trace), trace.description().clock.frequency_hz) {}

uint64_t TimelineClock::ns(uint64_t ticks) const {
  if (ticks <= origin_ticks_) return 0;
  return static_cast<uint64_t>(std::llround(static_cast<double>(ticks - origin_ticks_) * ns_per_tick_));
}

uint64_t timeline_origin(const reader::Trace& trace) {
  uint64_t origin = std::numeric_limits<uint64_t>::max();
  for (size_t stream = 0; stream < trace.streams().size(); ++stream) {
    reader::Trace::StreamCursor cursor(trace, stream);
    reader::Event first;
    if (cursor.next(first)) origin = std::min(origin, first.ticks);
  }
  return origin == std::numeric_limits<uint64_t>::max() ? 0 : origin;
}

void TaskRunClock::begin_run(uint64_t task, uint32_t thread_id, uint64_t ns) {
  tasks_[task].open.push_back({thread_id, ns});
}

// As the viewer's pieces do: the end closes the task's run on that thread.
void TaskRunClock::end_run(uint64_t task, uint32_t thread_id, uint64_t ns) {
  const auto found = tasks_.find(task);
  if (found == tasks_.end()) return;
  std::vector<OpenRun>& open = found->second.open;
  for (size_t k = open.size(); k-- > 0;)
    if (open[k].thread_id == thread_id) {
      found->second.closed += ns > open[k].since ? ns - open[k].since : 0;
      open.erase(open.begin() + static_cast<std::ptrdiff_t>(k));
      return;
    }
}

uint64_t TaskRunClock::ran_until(uint64_t task, uint64_t ns) const {
  const auto found = tasks_.find(task);
  if (found == tasks_.end()) return 0;
  uint64_t ran = found->second.closed;
  for (const OpenRun& run : found->second.open) ran += ns > run.since ? ns - run.since : 0;
  return ran;
}

}  // namespace chronicle::analysis
