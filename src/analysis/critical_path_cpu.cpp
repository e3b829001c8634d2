#include "analysis/critical_path_cpu.hpp"

#include <algorithm>

namespace chronicle::analysis {

namespace {

// Appends [from, to) of `step` in `state`, merged with the piece before when that says the same.
void add_piece(std::vector<CriticalStep>& pieces, const CriticalStep& step, uint64_t from, uint64_t to, StepState state,
               const std::string& what) {
  if (!pieces.empty() && pieces.back().to == from && pieces.back().state == state && pieces.back().what == what) {
    pieces.back().to = to;
    return;
  }
  CriticalStep piece = step;
  piece.from = from;
  piece.to = to;
  piece.state = state;
  piece.what = what;
  pieces.push_back(std::move(piece));
}

// The pieces of a `ran` step, in time order, covering it exactly.
std::vector<CriticalStep> split_step(const CriticalStep& step, const model::Task& task, const CpuTimeline& timeline) {
  std::vector<CriticalStep> pieces;
  uint64_t cursor = step.from;
  auto add = [&](uint64_t from, uint64_t to, StepState state, const std::string& what) {
    if (to <= from) return;
    if (from > cursor) add_piece(pieces, step, cursor, from, step.state, step.what);
    add_piece(pieces, step, from, to, state, what);
    cursor = to;
  };
  for (const model::RunInterval& run : task.runs) {
    const uint64_t from = std::max({run.begin, step.from, cursor}), to = std::min(run.end, step.to);
    if (from >= to) continue;
    timeline.for_each_stretch_between(run.thread_id, from, to, [&](uint64_t begin, uint64_t end, format::CpuState cpu) {
      switch (cpu) {
        case format::CpuState::running:
          add(begin, end, StepState::ran, step.what);
          break;
        case format::CpuState::preempted:
          add(begin, end, StepState::queued, "preempted: runnable, waiting for a CPU");
          break;
        case format::CpuState::blocked:
          add(begin, end, StepState::blocked, "off CPU in its run: blocked");
          break;
      }
    });
  }
  if (step.to > cursor) add_piece(pieces, step, cursor, step.to, step.state, step.what);
  return pieces;
}

}  // namespace

void split_runs_by_cpu_state(CriticalPath& path, const std::vector<const TaskSource*>& graphs,
                             const std::vector<const CpuTimeline*>& timelines) {
  std::vector<CriticalStep> steps;
  steps.reserve(path.steps.size());
  for (CriticalStep& step : path.steps) {
    const model::Task* task =
        step.state == StepState::ran && step.process < graphs.size() ? graphs[step.process]->find(step.task) : nullptr;
    if (!task || step.process >= timelines.size() || timelines[step.process]->empty()) {
      steps.push_back(std::move(step));
      continue;
    }
    for (CriticalStep& piece : split_step(step, *task, *timelines[step.process])) steps.push_back(std::move(piece));
  }
  path.steps = std::move(steps);
}

}  // namespace chronicle::analysis
