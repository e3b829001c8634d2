// What a trace's sampler events say (docs/profiling.md): the call stacks of cpu_sample events,
// symbolised against the trace's module definitions, as CPU profiles (the whole process, and
// split by thread, by the innermost open span or by the running task); and, from cpu_switch
// events, how each thread, span and task spent its time: running, runnable but waiting for a CPU
// (preempted), or blocked.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/cpu_profile.hpp"
#include "analysis/sample_stacks.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::analysis {

enum class SampleGrouping : uint8_t { by_thread, by_span, by_task };

// Time in each CPU state, in ns, from the thread's first context switch in the trace on (before
// it, what the thread was doing is not known).
struct CpuStateTimes {
  uint64_t running = 0;
  uint64_t runnable = 0;  // preempted: ready, waiting for a CPU
  uint64_t blocked = 0;   // sleeping or waiting (I/O, a lock, a futex)
  uint64_t total() const { return running + runnable + blocked; }
  void add(format::CpuState state, uint64_t ns) {
    if (state == format::CpuState::running)
      running += ns;
    else if (state == format::CpuState::preempted)
      runnable += ns;
    else
      blocked += ns;
  }
  void add(const CpuStateTimes& other) {
    running += other.running;
    runnable += other.runnable;
    blocked += other.blocked;
  }
};

class SampleProfile {
 public:
  SampleProfile(const reader::Trace& trace, SampleGrouping grouping);
  ~SampleProfile();

  const CpuProfile& overall() const { return overall_; }
  // By thread ("name (tid)"), innermost span ("category/name"; "(no span)") or running task
  // ("name"; "(no task)").
  const std::map<std::string, CpuProfile>& groups() const { return groups_; }
  const std::string& function_name(uint32_t id) const { return stacks_->function_name(id); }

  uint64_t samples() const { return samples_; }
  uint64_t other_process_samples() const { return other_process_samples_; }  // children's: not symbolised
  bool has_switches() const { return switches_ > 0; }
  const std::map<std::string, CpuStateTimes>& thread_states() const { return thread_states_; }
  const std::map<std::string, CpuStateTimes>& span_states() const { return span_states_; }
  const std::map<std::string, CpuStateTimes>& task_states() const { return task_states_; }
  // Modules whose files are missing or another build, and modules where the stacks stop after
  // one frame (compiled without frame pointers).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::unique_ptr<SampleStacks> stacks_;
  CpuProfile overall_;
  std::map<std::string, CpuProfile> groups_;
  uint64_t samples_ = 0;
  uint64_t other_process_samples_ = 0;
  uint64_t switches_ = 0;
  std::map<std::string, CpuStateTimes> thread_states_;
  std::map<std::string, CpuStateTimes> span_states_;
  std::map<std::string, CpuStateTimes> task_states_;
  std::vector<std::string> warnings_;
};

}  // namespace chronicle::analysis
