#include "analysis/cpu_timeline.hpp"

#include <algorithm>

namespace chronicle::analysis {

CpuTimeline::CpuTimeline(const reader::Trace& trace) : trace_(trace) {
  const uint32_t pid = static_cast<uint32_t>(trace.description().pid);
  const uint32_t switches = format::event_type_bit(static_cast<uint32_t>(format::EventId::cpu_switch));
  // The sampler writes its stream in time order: each thread's changes come sorted.
  for (size_t stream = 0; stream < trace.streams().size(); ++stream)
    trace.for_each_in_stream_packets_holding(stream, switches, [&](const reader::Event& event) {
      if (event.type == format::EventId::cpu_switch && event.sampled_pid == pid)
        threads_[event.sampled_tid].push_back(Change{event.ticks, event.cpu_state});
      return true;
    });
  for (auto& [thread, changes] : threads_)
    std::stable_sort(changes.begin(), changes.end(),
                     [](const Change& a, const Change& b) { return a.ticks < b.ticks; });
}

CpuStateTimes CpuTimeline::between(uint32_t thread, uint64_t from, uint64_t to) const {
  CpuStateTimes times;
  const auto found = threads_.find(thread);
  if (found == threads_.end() || to <= from) return times;
  const std::vector<Change>& changes = found->second;
  // The change in force at `from`, then each one until `to`.
  auto at = std::upper_bound(changes.begin(), changes.end(), from,
                             [](uint64_t ticks, const Change& change) { return ticks < change.ticks; });
  uint64_t since = from;
  if (at == changes.begin()) {
    if (at == changes.end() || at->ticks >= to) return times;
    since = at->ticks;
    ++at;
  }
  format::CpuState state = std::prev(at)->state;
  auto add = [&](uint64_t until) {
    times.add(state, static_cast<uint64_t>(std::max<int64_t>(0, trace_.to_unix_ns(until) - trace_.to_unix_ns(since))));
  };
  for (; at != changes.end() && at->ticks < to; ++at) {
    add(at->ticks);
    since = at->ticks;
    state = at->state;
  }
  add(to);
  return times;
}

}  // namespace chronicle::analysis
