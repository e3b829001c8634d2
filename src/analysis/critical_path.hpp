// The critical path of a task: the chain of runs, waits and resolutions that decided when it
// finished, walked back through the task graph, with the time each step contributed.
//
// From the moment the task finished, walk back: if another task resolved it, that task's
// progress decided the moment; otherwise the task's last wait before that moment tells what
// held it up. The task ran (or was ready) from when the awaited task finished; before that,
// the awaited task's own path is what mattered. With no wait left, the task ran since its
// creation, and its creator's path decided when that was. Each step's contribution is the time
// it covers, so they add up to the chain's length.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/task_graph.hpp"

namespace chronicle::analysis {

struct CriticalStep {
  model::TaskId task = 0;
  std::string task_name;
  std::string what;   // "ran after t1.5 finished", "ran since creation", "resolved by t1.4", ...
  uint64_t from = 0;  // ticks
  uint64_t to = 0;
};

struct CriticalPath {
  model::TaskId target = 0;
  uint64_t start = 0;               // ticks: where the chain begins
  uint64_t end = 0;                 // ticks: when the target finished (or its last activity)
  std::vector<CriticalStep> steps;  // in time order
};

CriticalPath critical_path(const model::TaskGraph& graph, model::TaskId target);

// The tasks `id_or_label` names: the one with that id text ("t3.17"); else those with that
// label; else those with that name. Empty when none does.
std::vector<model::TaskId> find_tasks(const model::TaskGraph& graph, const std::string& id_or_label);

// The first of find_tasks. Throws std::invalid_argument naming what was not found.
model::TaskId find_task(const model::TaskGraph& graph, const std::string& id_or_label);

}  // namespace chronicle::analysis
