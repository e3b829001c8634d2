#include "analysis/critical_path.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

namespace chronicle::analysis {

namespace {

using WaitsByTask = std::unordered_map<model::TaskId, std::vector<const model::Edge*>>;

// Every step of the walk looks up a task's last wait before a moment, or its first run after
// one: binary searches, so that a task visited once per child (a loop awaiting its children in
// turn) costs a logarithm per visit, not its whole list.
WaitsByTask waits_in_time_order(const model::TaskGraph& graph) {
  WaitsByTask waits;
  for (const auto& edge : graph.edges())
    if (edge.kind == model::EdgeKind::waits_on) waits[edge.from].push_back(&edge);
  for (auto& [task, list] : waits)
    std::stable_sort(list.begin(), list.end(),
                     [](const model::Edge* a, const model::Edge* b) { return a->ticks < b->ticks; });
  return waits;
}

// The last wait of `task` strictly before `moment`; nullptr when none.
const model::Edge* last_wait_before(const WaitsByTask& waits, model::TaskId task, uint64_t moment) {
  const auto found = waits.find(task);
  if (found == waits.end()) return nullptr;
  const auto& list = found->second;
  const auto after = std::partition_point(list.begin(), list.end(),
                                          [moment](const model::Edge* edge) { return edge->ticks < moment; });
  return after == list.begin() ? nullptr : *(after - 1);
}

// The earliest beginning of a run of `task` in [from, before); `before` when none. Runs are in
// order of their beginning.
uint64_t first_run_between(const model::Task& task, uint64_t from, uint64_t before) {
  const auto run = std::partition_point(task.runs.begin(), task.runs.end(),
                                        [from](const model::RunInterval& run) { return run.begin < from; });
  return run != task.runs.end() && run->begin < before ? run->begin : before;
}

}  // namespace

CriticalPath critical_path(const model::TaskGraph& graph, model::TaskId target) {
  const model::Task* first = graph.find(target);
  if (!first) throw std::invalid_argument(fmt::format("no task {} in the trace", model::task_id_text(target)));
  const WaitsByTask waits = waits_in_time_order(graph);

  auto last_activity = [&graph](const model::Task& task) {
    if (task.resolved) return *task.resolved;
    uint64_t last = task.created.value_or(graph.first_ticks());
    for (const auto& run : task.runs) last = std::max(last, run.end);
    return last;
  };
  auto beginning = [&graph](const model::Task& task) {
    if (task.created) return *task.created;
    return task.runs.empty() ? graph.first_ticks() : task.runs.front().begin;
  };
  auto name_of = [](const model::Task& task) {
    return fmt::format("{} {}", model::task_id_text(task.id), task.display_name());
  };

  CriticalPath path;
  path.target = target;
  path.end = last_activity(*first);
  std::vector<CriticalStep> backwards;
  model::TaskId current = target;
  uint64_t moment = path.end;
  bool at_resolution = first->resolved.has_value();
  // Each step moves to an earlier moment or to another task at the same moment, and a task is
  // entered at a given moment once: the walk ends on any graph, cycles included.
  std::unordered_map<model::TaskId, uint64_t> entered;
  const size_t step_limit = 4 * (graph.tasks().size() + graph.edges().size()) + 16;
  while (backwards.size() < step_limit) {
    const model::Task* task = graph.find(current);
    if (!task) break;
    auto [seen, inserted] = entered.emplace(current, moment);
    if (!inserted) {
      if (seen->second <= moment) break;
      seen->second = moment;
    }
    if (at_resolution && task->resolver != 0 && task->resolver != current && graph.find(task->resolver)) {
      backwards.push_back({current, name_of(*task), fmt::format("resolved by {}", model::task_id_text(task->resolver)),
                           moment, moment});
      current = task->resolver;
      at_resolution = false;
      continue;
    }
    at_resolution = false;
    if (const model::Edge* wait = last_wait_before(waits, current, moment)) {
      const model::Task* awaited = graph.find(wait->to);
      if (awaited && awaited->resolved && *awaited->resolved <= moment && *awaited->resolved >= wait->ticks) {
        backwards.push_back({current, name_of(*task),
                             fmt::format("ran after {} finished", model::task_id_text(awaited->id)), *awaited->resolved,
                             moment});
        current = awaited->id;
        moment = *awaited->resolved;
        at_resolution = true;
        continue;
      }
      // Something else released it (a timeout, a cancellation): the task's own time.
      backwards.push_back({current, name_of(*task),
                           fmt::format("waited on {}, released before it finished", model::task_id_text(wait->to)),
                           wait->ticks, moment});
      moment = wait->ticks;
      continue;
    }
    const uint64_t began = std::min(beginning(*task), moment);
    // Split at its first run: before it, the task was pending (queued, or waiting for I/O).
    const uint64_t first_run = first_run_between(*task, began, moment);
    if (first_run > began && first_run < moment) {
      backwards.push_back({current, name_of(*task), "ran", first_run, moment});
      backwards.push_back(
          {current, name_of(*task), "pending since creation (queued or waiting for I/O)", began, first_run});
    } else {
      backwards.push_back({current, name_of(*task), "ran since creation", began, moment});
    }
    moment = began;
    const model::Task* parent = task->parent ? graph.find(task->parent) : nullptr;
    if (!parent || beginning(*parent) > moment) break;
    current = parent->id;
  }
  path.start = moment;
  // In place: a copy would hold the chain twice.
  std::reverse(backwards.begin(), backwards.end());
  path.steps = std::move(backwards);
  return path;
}

std::vector<model::TaskId> find_tasks(const model::TaskGraph& graph, const std::string& id_or_label) {
  for (const auto& task : graph.tasks())
    if (model::task_id_text(task.id) == id_or_label) return {task.id};
  std::vector<model::TaskId> found;
  for (const auto& task : graph.tasks())
    if (task.label == id_or_label) found.push_back(task.id);
  if (!found.empty()) return found;
  for (const auto& task : graph.tasks())
    if (task.name == id_or_label) found.push_back(task.id);
  return found;
}

model::TaskId find_task(const model::TaskGraph& graph, const std::string& id_or_label) {
  const std::vector<model::TaskId> found = find_tasks(graph, id_or_label);
  if (found.empty())
    throw std::invalid_argument(fmt::format("no task with id, label or name '{}' in the trace", id_or_label));
  return found.front();
}

}  // namespace chronicle::analysis
