// A critical path told with scheduler data (record --sched): a step never says `ran` for time its
// task's thread was off CPU.
#pragma once

#include <vector>

#include "analysis/cpu_timeline.hpp"
#include "analysis/critical_path.hpp"

namespace chronicle::analysis {

// Splits each `ran` step at the changes of its thread's CPU state: running stays `ran`; runnable
// becomes `queued` ("preempted: runnable, waiting for a CPU"); blocked becomes `blocked` ("off CPU
// in its run: blocked"). Time the timeline says nothing of (before the thread's first switch, or
// outside the task's runs) stays as it was. The steps still cover the same time, in order.
// `graphs` and `timelines` are per process, as the path's steps number them.
void split_runs_by_cpu_state(CriticalPath& path, const std::vector<const TaskSource*>& graphs,
                             const std::vector<const CpuTimeline*>& timelines);

}  // namespace chronicle::analysis
