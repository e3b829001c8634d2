#include "analysis/critical_path.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "reader/messages.hpp"
#include "reader/span_pairing.hpp"

namespace chronicle::analysis {

namespace {

// The last wait strictly before `moment` of waits in time order; nullptr when none. A binary
// search: a task visited once per child (a loop awaiting its children in turn) costs a logarithm
// per visit, not its whole list.
const TaskSource::Wait* last_wait_before(std::span<const TaskSource::Wait> waits, uint64_t moment) {
  const auto after = std::partition_point(waits.begin(), waits.end(),
                                          [moment](const TaskSource::Wait& wait) { return wait.ticks < moment; });
  return after == waits.begin() ? nullptr : &*(after - 1);
}

// The last of the task's runs (in order of their beginnings) that began at or before `moment`:
// one search, not a scan, since a root awaiting its children in turn has a run per child.
const model::RunInterval* last_run_begun_by(const model::Task& task, uint64_t moment) {
  const auto after = std::partition_point(task.runs.begin(), task.runs.end(),
                                          [moment](const model::RunInterval& run) { return run.begin <= moment; });
  return after == task.runs.begin() ? nullptr : &*(after - 1);
}

// The wait that decided when `task` went on at `moment`: of the waits of its last suspension
// before `moment` (those recorded from the beginning of the run in which the last of them was
// recorded: a when_all records one per child in a row), the one whose task was resolved last,
// within the wait and no later than `moment`. When none was (a timeout, a cancellation released
// it), the last wait, which `released` then says.
struct DecidingWait {
  const TaskSource::Wait* wait = nullptr;
  const model::Task* awaited = nullptr;  // resolved in [wait, moment]; nullptr when released
};

DecidingWait deciding_wait(const TaskSource& graph, const model::Task& task, std::span<const TaskSource::Wait> waits,
                           uint64_t moment) {
  const TaskSource::Wait* last = last_wait_before(waits, moment);
  if (!last) return {};
  const model::RunInterval* suspended_in = last_run_begun_by(task, last->ticks);
  const uint64_t suspension_begin = suspended_in ? suspended_in->begin : 0;
  DecidingWait decided{last, nullptr};
  for (size_t i = static_cast<size_t>(last - waits.data()) + 1; i-- > 0 && waits[i].ticks >= suspension_begin;) {
    const model::Task* awaited = graph.find(waits[i].awaited);
    if (!awaited || !awaited->resolved || *awaited->resolved > moment || *awaited->resolved < waits[i].ticks) continue;
    if (!decided.awaited || *awaited->resolved > *decided.awaited->resolved) decided = {&waits[i], awaited};
  }
  return decided;
}

}  // namespace

std::string_view step_state_name(StepState state) {
  switch (state) {
    case StepState::ran:
      return "ran";
    case StepState::queued:
      return "queued";
    case StepState::waiting:
      return "waiting";
    case StepState::blocked:
      return "blocked";
  }
  return "ran";
}

std::span<const TaskSource::Wait> GraphTasks::waits(model::TaskId id) const {
  if (!waits_) {
    waits_.emplace();
    for (const auto& edge : graph_.edges())
      if (edge.kind == model::EdgeKind::waits_on) (*waits_)[edge.from].push_back({edge.ticks, edge.to});
    for (auto& [task, list] : *waits_)
      std::stable_sort(list.begin(), list.end(), [](const Wait& a, const Wait& b) { return a.ticks < b.ticks; });
  }
  const auto found = waits_->find(id);
  return found == waits_->end() ? std::span<const Wait>() : std::span<const Wait>(found->second);
}

MessageArrivals MessageArrivals::find(const std::vector<ProcessGraph>& processes) {
  MessageArrivals arrivals;
  arrivals.by_task_.resize(processes.size());
  struct End {
    size_t process = 0;
    model::TaskId task = 0;
    uint64_t ticks = 0;
  };
  std::unordered_map<reader::MessageKey, End, reader::MessageKeyHash> sends;
  std::vector<std::pair<reader::MessageKey, End>> receives;
  for (size_t p = 0; p < processes.size(); ++p) {
    // In time order with the span pairing: it knows the task each end happened in.
    reader::SpanPairing pairing(*processes[p].trace);
    processes[p].trace->for_each_event(pairing, [&](const reader::Event& event) {
      reader::MessageEnd end;
      if (!reader::message_end_of(event, end)) return true;
      const End seen{p, pairing.running_task(event.thread_id), event.ticks};
      if (end.send)
        sends.emplace(end.key, seen);
      else if (seen.task != 0)
        receives.emplace_back(end.key, seen);
      return true;
    });
  }
  for (const auto& [key, receive] : receives) {
    const auto send = sends.find(key);
    if (send == sends.end() || send->second.task == 0) continue;
    arrivals.by_task_[receive.process][receive.task].push_back(
        {receive.ticks, send->second.process, send->second.task, send->second.ticks});
    ++arrivals.count_;
  }
  for (auto& tasks : arrivals.by_task_)
    for (auto& [task, list] : tasks)
      std::sort(list.begin(), list.end(),
                [](const Arrival& a, const Arrival& b) { return a.receive_ticks < b.receive_ticks; });
  return arrivals;
}

const MessageArrivals::Arrival* MessageArrivals::first_between(size_t process, model::TaskId task, uint64_t from,
                                                               uint64_t to) const {
  if (process >= by_task_.size()) return nullptr;
  const auto found = by_task_[process].find(task);
  if (found == by_task_[process].end()) return nullptr;
  const auto& list = found->second;
  const auto first = std::partition_point(list.begin(), list.end(),
                                          [from](const Arrival& arrival) { return arrival.receive_ticks < from; });
  return first != list.end() && first->receive_ticks <= to ? &*first : nullptr;
}

namespace {

uint64_t last_activity(const TaskSource& graph, const model::Task& task) {
  if (task.resolved) return *task.resolved;
  uint64_t last = task.created.value_or(graph.first_ticks());
  for (const auto& run : task.runs) last = std::max(last, run.end);
  return last;
}

uint64_t beginning(const TaskSource& graph, const model::Task& task) {
  if (task.created) return *task.created;
  return task.runs.empty() ? graph.first_ticks() : task.runs.front().begin;
}

std::string name_of(const model::Task& task) {
  return fmt::format("{} {}", model::task_id_text(task.id), task.display_name());
}

// How a step of a task's own time is explained: the gap before its first run there (`lead`), and
// its runs.
struct OwnTime {
  StepState lead_state = StepState::queued;
  std::string lead_what;
  std::string ran_what;
  // The lead is the first gap wherever it lies (a wait recorded inside a run lasts from the run's
  // end); otherwise only a gap at the step's beginning.
  bool lead_is_first_gap = false;
};

// What a gap between two runs of a task is, when no wait of it explains the gap.
constexpr std::string_view kSuspended = "suspended between runs (no wait recorded)";

// Appends the steps of `task`'s own time [from, to] to `backwards` (latest first): split by its
// runs as the header says. The walk reads a task's runs in order of their beginning and, as a
// task runs on one thread at a time, takes them as not overlapping one another but the one just
// before `from`.
void add_own_time(std::vector<CriticalStep>& backwards, size_t process, const model::Task& task, uint64_t from,
                  uint64_t to, const OwnTime& own) {
  std::vector<CriticalStep> pieces;
  auto piece = [&](StepState state, std::string what, uint64_t begin, uint64_t end) {
    pieces.push_back({process, task.id, name_of(task), state, std::move(what), begin, end});
  };
  if (task.runs.empty()) {
    piece(StepState::ran, own.ran_what, from, to);  // nothing tells its states apart
    backwards.push_back(std::move(pieces.front()));
    return;
  }
  auto run = std::partition_point(task.runs.begin(), task.runs.end(),
                                  [from](const model::RunInterval& each) { return each.begin < from; });
  if (run != task.runs.begin() && std::prev(run)->end > from) --run;
  uint64_t cursor = from;
  bool lead_open = true;
  auto gap_until = [&](uint64_t until) {
    if (until <= cursor) return;
    if (lead_open)
      piece(own.lead_state, own.lead_what, cursor, until);
    else
      piece(StepState::waiting, std::string(kSuspended), cursor, until);
    lead_open = false;
    cursor = until;
  };
  for (; run != task.runs.end() && run->begin < to; ++run) {
    const uint64_t begin = std::max(run->begin, from), end = std::min(run->end, to);
    if (end <= begin || end <= cursor) continue;
    gap_until(begin);
    if (!own.lead_is_first_gap) lead_open = false;
    if (!pieces.empty() && pieces.back().state == StepState::ran && pieces.back().to >= begin)
      pieces.back().to = end;
    else
      piece(StepState::ran, own.ran_what, std::max(begin, cursor), end);
    cursor = end;
  }
  // The resolution recorded just after the last run ended belongs to that run.
  if (cursor < to && !pieces.empty() && pieces.back().state == StepState::ran && task.resolved == to)
    pieces.back().to = to;
  else
    gap_until(to);
  if (pieces.empty()) piece(own.lead_state, own.lead_what, from, to);  // a step of no length
  for (auto each = pieces.rbegin(); each != pieces.rend(); ++each) backwards.push_back(std::move(*each));
}

// How long a message was on its way, as the receiver's ticks: from the send (on the sender's
// clock, which a merge aligned) to the receive. Never negative.
uint64_t in_flight_ticks(const std::vector<ProcessGraph>& processes, size_t receiver,
                         const MessageArrivals::Arrival& arrival) {
  const reader::Trace* to = processes[receiver].trace;
  const reader::Trace* from = processes[arrival.sender].trace;
  const int64_t ns = to->to_unix_ns(arrival.receive_ticks) - from->to_unix_ns(arrival.send_ticks);
  if (ns <= 0) return 0;
  const long double ticks =
      static_cast<long double>(ns) * static_cast<long double>(to->description().clock.frequency_hz) / 1e9L;
  return std::min(static_cast<uint64_t>(ticks), arrival.receive_ticks);
}

// The walk over `sources`, one per process; `processes` gives their traces when `messages`
// has any (it is read only to time a message).
CriticalPath walk(const std::vector<const TaskSource*>& sources, const std::vector<ProcessGraph>& processes,
                  const MessageArrivals& messages, size_t process, model::TaskId target) {
  const model::Task* first = sources.at(process)->find(target);
  if (!first) throw std::invalid_argument(fmt::format("no task {} in the trace", model::task_id_text(target)));

  CriticalPath path;
  path.target = target;
  path.end = last_activity(*sources[process], *first);
  std::vector<CriticalStep> backwards;
  size_t p = process;
  model::TaskId current = target;
  uint64_t moment = path.end;
  bool at_resolution = first->resolved.has_value();
  // Each step moves to an earlier moment or to another task at the same moment, and a task is
  // entered at a given moment once: the walk ends on any graph, cycles included. A message leads
  // to an earlier moment of the sender (a receive never precedes its send).
  std::map<std::pair<size_t, model::TaskId>, uint64_t> entered;
  // Visits, not steps, are bounded: a task's own time is as many steps as it has runs there.
  size_t visit_limit = 16;
  for (const TaskSource* each : sources) visit_limit += 4 * each->size();
  visit_limit += 2 * messages.size();
  for (size_t visits = 0; visits < visit_limit; ++visits) {
    const TaskSource& graph = *sources[p];
    const model::Task* task = graph.find(current);
    if (!task) break;
    auto [seen, inserted] = entered.emplace(std::make_pair(p, current), moment);
    if (!inserted) {
      if (seen->second <= moment) break;
      seen->second = moment;
    }
    if (at_resolution && task->resolver != 0 && task->resolver != current && graph.find(task->resolver)) {
      backwards.push_back({p, current, name_of(*task), StepState::waiting,
                           fmt::format("resolved by {}", model::task_id_text(task->resolver)), moment, moment});
      current = task->resolver;
      at_resolution = false;
      continue;
    }
    at_resolution = false;
    if (const auto [wait, awaited] = deciding_wait(graph, *task, graph.waits(current), moment); wait) {
      if (awaited) {
        const std::string awaited_id = model::task_id_text(awaited->id);
        add_own_time(backwards, p, *task, *awaited->resolved, moment,
                     {StepState::queued, fmt::format("queued after {} finished", awaited_id),
                      fmt::format("ran after {} finished", awaited_id), false});
        current = awaited->id;
        moment = *awaited->resolved;
        at_resolution = true;
        continue;
      }
      // Something else released it (a timeout, a cancellation): the task's own time.
      add_own_time(
          backwards, p, *task, wait->ticks, moment,
          {StepState::waiting,
           fmt::format("waited on {}, released before it finished", model::task_id_text(wait->awaited)), "ran", true});
      moment = wait->ticks;
      continue;
    }
    const uint64_t began = std::min(beginning(graph, *task), moment);
    // A message read in the run that begins at the moment (an Asio handler is resolved as it is
    // invoked, and reads the message inside) explains that moment too.
    uint64_t run_end = moment;
    if (const model::RunInterval* run = last_run_begun_by(*task, moment)) run_end = std::max(run_end, run->end);
    if (const MessageArrivals::Arrival* arrival = messages.first_between(p, current, began, run_end)) {
      // It ran once a message came: the message, and before it its sender, decided when.
      const model::Task* sender = sources[arrival->sender]->find(arrival->sender_task);
      const std::string from = fmt::format("{}{}", arrival->sender != p ? "another process's " : "",
                                           sender ? name_of(*sender) : model::task_id_text(arrival->sender_task));
      const uint64_t arrived = std::min(arrival->receive_ticks, moment);
      add_own_time(backwards, p, *task, arrived, moment,
                   {StepState::queued, "queued after a message arrived", "ran after a message arrived", false});
      const uint64_t flight = std::min(in_flight_ticks(processes, p, *arrival), arrived);
      backwards.push_back({p, current, name_of(*task), StepState::waiting,
                           fmt::format("waited for a message from {}", from), arrived - flight, arrived});
      if (!sender) break;
      p = arrival->sender;
      current = arrival->sender_task;
      moment = arrival->send_ticks;
      continue;
    }
    // Before its first run, an operation (I/O, a timer) was in flight; any other task was ready
    // from its creation, so it waited for its turn.
    const bool operation = task->kind == format::TaskKind::io || task->kind == format::TaskKind::timer;
    const StepState lead = operation ? StepState::waiting : StepState::queued;
    const std::string lead_what =
        operation ? "waiting for its operation (I/O or a timer) since creation" : "queued since creation";
    if (operation && task->runs.empty())
      backwards.push_back({p, current, name_of(*task), lead, lead_what, began, moment});
    else
      add_own_time(backwards, p, *task, began, moment,
                   {lead, lead_what, task->runs.empty() ? "ran since creation" : "ran", false});
    moment = began;
    const model::Task* parent = task->parent ? graph.find(task->parent) : nullptr;
    if (!parent || beginning(graph, *parent) > moment) break;
    current = parent->id;
  }
  path.start = moment;
  path.start_process = p;
  // In place: a copy would hold the chain twice.
  std::reverse(backwards.begin(), backwards.end());
  path.steps = std::move(backwards);
  return path;
}

}  // namespace

CriticalPath critical_path(const TaskSource& tasks, model::TaskId target) {
  return walk({&tasks}, {}, MessageArrivals{}, 0, target);
}

CriticalPath critical_path(const model::TaskGraph& graph, model::TaskId target) {
  return critical_path(GraphTasks(graph), target);
}

CriticalPath critical_path(const std::vector<const TaskSource*>& sources, const std::vector<ProcessGraph>& processes,
                           const MessageArrivals& messages, size_t process, model::TaskId target) {
  return walk(sources, processes, messages, process, target);
}

CriticalPath critical_path(const std::vector<ProcessGraph>& processes, const MessageArrivals& messages, size_t process,
                           model::TaskId target) {
  std::vector<GraphTasks> graphs;
  graphs.reserve(processes.size());
  for (const ProcessGraph& each : processes) graphs.emplace_back(*each.graph);
  std::vector<const TaskSource*> sources;
  for (const GraphTasks& graph : graphs) sources.push_back(&graph);
  return walk(sources, processes, messages, process, target);
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
