#include "analysis/critical_path_cpu.hpp"

namespace chronicle::analysis {

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
    std::vector<RunOn> runs;
    for (const model::RunInterval& run : task->runs) runs.push_back({run.thread_id, run.begin, run.end});
    const CpuTimeline& timeline = *timelines[step.process];
    auto stretches = [&timeline](uint64_t thread, uint64_t from, uint64_t to, auto&& visit) {
      timeline.for_each_stretch_between(static_cast<uint32_t>(thread), from, to, visit);
    };
    for (CriticalStep& piece : split_ran_step(step, runs, stretches)) steps.push_back(std::move(piece));
  }
  path.steps = std::move(steps);
}

}  // namespace chronicle::analysis
