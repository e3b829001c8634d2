// A critical path told with scheduler data (record --sched): a step never says `ran` for time its
// task's thread was off CPU. One rule for `stats` (split_runs_by_cpu_state, over the trace's
// context switches) and the viewer (split_ran_step, over its index's off-CPU rows, in ns).
#pragma once

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "analysis/cpu_timeline.hpp"
#include "analysis/critical_path.hpp"

namespace chronicle::analysis {

// A run of a task on a thread (`thread`: whatever the stretches know it by), in the step's unit.
struct RunOn {
  uint64_t thread = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// The state and words of a stretch of a run in CPU state `cpu`: running stays `ran` (with the
// step's words); preempted is `queued`, blocked `blocked`.
inline std::pair<StepState, std::string> run_stretch_state(format::CpuState cpu, const std::string& ran_what) {
  switch (cpu) {
    case format::CpuState::preempted:
      return {StepState::queued, "preempted: runnable, waiting for a CPU"};
    case format::CpuState::blocked:
      return {StepState::blocked, "off CPU in its run: blocked"};
    case format::CpuState::running:
      break;
  }
  return {StepState::ran, ran_what};
}

// The pieces of a `ran` step (any type with from, to, state and what), in time order, covering
// it exactly: each of its task's `runs` (by beginning) split at the CPU state changes
// `stretches(thread, from, to, visit)` gives as `visit(begin, end, format::CpuState)`. Time no
// stretch covers stays as the step was.
template <typename Step, typename Stretches>
std::vector<Step> split_ran_step(const Step& step, std::span<const RunOn> runs, Stretches&& stretches) {
  std::vector<Step> pieces;
  auto append = [&](uint64_t from, uint64_t to, StepState state, const std::string& what) {
    if (to <= from) return;
    if (!pieces.empty() && pieces.back().to == from && pieces.back().state == state && pieces.back().what == what) {
      pieces.back().to = to;
      return;
    }
    Step piece = step;
    piece.from = from;
    piece.to = to;
    piece.state = state;
    piece.what = what;
    pieces.push_back(std::move(piece));
  };
  uint64_t cursor = step.from;
  auto add = [&](uint64_t from, uint64_t to, format::CpuState cpu) {
    from = std::max(from, cursor);
    if (to <= from) return;
    append(cursor, from, step.state, step.what);
    const auto [state, what] = run_stretch_state(cpu, step.what);
    append(from, to, state, what);
    cursor = to;
  };
  for (const RunOn& run : runs) {
    const uint64_t from = std::max({run.begin, step.from, cursor}), to = std::min(run.end, step.to);
    if (from < to) stretches(run.thread, from, to, add);
  }
  append(cursor, step.to, step.state, step.what);
  return pieces;
}

// split_ran_step for each `ran` step of `path`, with the trace's context switches.
// `graphs` and `timelines` are per process, as the path's steps number them.
void split_runs_by_cpu_state(CriticalPath& path, const std::vector<const TaskSource*>& graphs,
                             const std::vector<const CpuTimeline*>& timelines);

}  // namespace chronicle::analysis
