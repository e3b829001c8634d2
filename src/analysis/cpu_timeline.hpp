// Each thread's CPU state over time, from a trace's context switches (cpu_switch events, recorded
// with `record --sched`): for asking how a stretch of a thread's time was spent, e.g. a step of
// a critical path.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <unordered_map>
#include <vector>

#include "analysis/sample_profile.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::analysis {

class CpuTimeline {
 public:
  explicit CpuTimeline(const reader::Trace& trace);
  bool empty() const { return threads_.empty(); }
  // The time of [from, to) (ticks) that `thread` spent in each state; what comes before its first
  // switch in the trace is in none.
  CpuStateTimes between(uint32_t thread, uint64_t from, uint64_t to) const;
  // Each stretch [begin, end) (ticks) of `thread` in one state, in time order, up to its last
  // switch (what follows it is not known); `visit(begin, end, state)`.
  // The stretches of [from, to) (ticks) of `thread` in one state each, in time order, from its
  // first switch on (the state after its last switch lasts); `visit(begin, end, state)`.
  template <typename Visitor>
  void for_each_stretch_between(uint32_t thread, uint64_t from, uint64_t to, Visitor&& visit) const {
    const auto found = threads_.find(thread);
    if (found == threads_.end() || to <= from) return;
    const std::vector<Change>& changes = found->second;
    auto at = std::upper_bound(changes.begin(), changes.end(), from,
                               [](uint64_t ticks, const Change& change) { return ticks < change.ticks; });
    uint64_t since = from;
    if (at == changes.begin()) {
      if (at == changes.end() || at->ticks >= to) return;
      since = at->ticks;
      ++at;
    }
    format::CpuState state = std::prev(at)->state;
    for (; at != changes.end() && at->ticks < to; ++at) {
      if (at->ticks > since) visit(since, at->ticks, state);
      since = std::max(since, at->ticks);
      state = at->state;
    }
    visit(since, to, state);
  }
  template <typename Visitor>
  void for_each_stretch(uint32_t thread, Visitor&& visit) const {
    const auto found = threads_.find(thread);
    if (found == threads_.end()) return;
    const std::vector<Change>& changes = found->second;
    for (size_t k = 0; k + 1 < changes.size(); ++k)
      if (changes[k + 1].ticks > changes[k].ticks) visit(changes[k].ticks, changes[k + 1].ticks, changes[k].state);
  }

 private:
  struct Change {
    uint64_t ticks;
    format::CpuState state;  // from then on
  };
  const reader::Trace& trace_;
  std::unordered_map<uint32_t, std::vector<Change>> threads_;
};

}  // namespace chronicle::analysis
