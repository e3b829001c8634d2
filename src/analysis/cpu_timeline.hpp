// Each thread's CPU state over time, from a trace's context switches (cpu_switch events, recorded
// with `record --sched`): for asking how a stretch of a thread's time was spent, e.g. a step of
// a critical path.
#pragma once

#include <cstdint>
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

 private:
  struct Change {
    uint64_t ticks;
    format::CpuState state;  // from then on
  };
  const reader::Trace& trace_;
  std::unordered_map<uint32_t, std::vector<Change>> threads_;
};

}  // namespace chronicle::analysis
