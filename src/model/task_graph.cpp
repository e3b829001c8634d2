#include "model/task_graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace chronicle::model {

// A field added or moved where it leaves padding grows every graph by millions of bytes at 100 M
// events (task_graph.hpp orders the fields for that).
static_assert(sizeof(void*) != 8 || sizeof(Task) <= 240, "model::Task grew: keep its small fields together, last");

namespace {

// Garbage can name millions of unknown tasks; past this many, problems are only counted.
constexpr size_t kMaxProblems = 200;

}  // namespace

std::string task_id_text(TaskId id) {
  const uint64_t thread = task_id_maker(id);
  const uint64_t counter = task_id_counter(id);
  if (id == 0) return "-";
  return thread == 0 ? fmt::format("t?{}", id) : fmt::format("t{}.{}", thread, counter);
}

std::string_view edge_kind_name(EdgeKind kind) {
  switch (kind) {
    case EdgeKind::created_by:
      return "created-by";
    case EdgeKind::waits_on:
      return "waits-on";
    case EdgeKind::resolved_by:
      return "resolved-by";
  }
  return "?";
}

uint64_t Task::busy_ticks() const {
  uint64_t total = folded_run_ticks;
  for (const auto& run : runs) total += run.end - run.begin;
  return total;
}

TaskGraph TaskGraph::from_parts(std::vector<Task> tasks, std::vector<Edge> edges, std::vector<IdleInterval> idle,
                                std::map<uint32_t, uint64_t> idle_ticks, std::vector<std::string> problems,
                                uint64_t first_ticks, uint64_t last_ticks) {
  TaskGraph graph;
  graph.tasks_ = std::move(tasks);
  for (size_t k = 0; k < graph.tasks_.size(); ++k) graph.index_.try_add(graph.tasks_[k].id, k);
  graph.edges_ = std::move(edges);
  graph.idle_ = std::move(idle);
  graph.idle_ticks_ = std::move(idle_ticks);
  graph.problems_ = std::move(problems);
  graph.first_ticks_ = first_ticks;
  graph.last_ticks_ = last_ticks;
  return graph;
}

const Task* TaskGraph::find(TaskId id) const {
  const size_t place = index_.find(id);
  return place == TaskIdIndex::kNone ? nullptr : &tasks_[place];
}

uint64_t TaskGraph::idle_ticks(uint32_t thread_id) const {
  const auto found = idle_ticks_.find(thread_id);
  return found == idle_ticks_.end() ? 0 : found->second;
}

std::vector<const Task*> TaskGraph::children(TaskId id) const {
  std::vector<const Task*> out;
  for (const auto& task : tasks_)
    if (task.parent == id && task.seen_created) out.push_back(&task);
  return out;
}

TaskGraphBuilder::TaskGraphBuilder(SiteNames site_names, GraphDetail detail)
    : site_names_(std::move(site_names)), detail_(detail) {}

void TaskGraphBuilder::note_problem(std::string problem) {
  if (graph_.problems_.size() < kMaxProblems)
    graph_.problems_.push_back(std::move(problem));
  else
    ++problems_dropped_;
}

void TaskGraphBuilder::reserve(size_t tasks, size_t edges) {
  graph_.tasks_.reserve(tasks);
  graph_.edges_.reserve(edges);
}

size_t TaskGraphBuilder::task_index(TaskId id, uint64_t ticks, const char* role, bool* known) {
  const auto [place, inserted] = graph_.index_.try_add(id, graph_.tasks_.size());
  if (known) *known = !inserted;
  if (inserted) {
    Task fresh;
    fresh.id = id;
    graph_.tasks_.push_back(std::move(fresh));
    if (role) first_mention_[id] = {role, ticks};
  }
  return place;
}

std::vector<TaskGraphBuilder::Running>& TaskGraphBuilder::running_on(uint32_t thread_id) {
  if (!last_running_ || last_thread_ != thread_id) {
    last_running_ = &running_[thread_id];  // a map's elements stay where they are
    last_thread_ = thread_id;
  }
  return *last_running_;
}

Task& TaskGraphBuilder::task(TaskId id, uint64_t ticks, const char* role) {
  return graph_.tasks_[task_index(id, ticks, role)];
}

void TaskGraphBuilder::add(const reader::Event& event) {
  using format::EventId;
  last_ticks_ = std::max(last_ticks_, event.ticks);
  first_ticks_ = std::min(first_ticks_, event.ticks);
  const bool is_task_event = event.type >= EventId::task_create && event.type <= EventId::task_label;
  if (is_task_event && event.task == 0) {
    note_problem(
        fmt::format("a {} event at tick {} names task 0 (no task)", static_cast<uint32_t>(event.type), event.ticks));
    return;
  }
  auto& running = running_on(event.thread_id);
  switch (event.type) {
    case EventId::task_create: {
      bool known = false;
      Task& created = graph_.tasks_[task_index(event.task, event.ticks, nullptr, &known)];
      if (created.seen_created) {
        note_problem(fmt::format("task {} is created twice (again at tick {})", task_id_text(event.task), event.ticks));
        break;
      }
      if (known) {
        auto mention = first_mention_.find(event.task);
        note_problem(fmt::format("task {} is named by a {} before its creation at tick {}", task_id_text(event.task),
                                 mention != first_mention_.end() ? mention->second.first : "event", event.ticks));
      }
      created.seen_created = true;
      created.created = event.ticks;
      created.created_on_thread = event.thread_id;
      created.kind = event.task_kind;
      created.parent = event.related_task;
      created.name = site_names_ ? site_names_(event.name_id) : std::string();
      if (event.related_task != 0) {
        // Index, not reference: task() may grow the vector.
        task(event.related_task, event.ticks, event.related_task == event.task ? nullptr : "parent");
        if (event.related_task == event.task)
          note_problem(fmt::format("task {} names itself as its parent", task_id_text(event.task)));
        graph_.edges_.push_back(
            Edge{.kind = EdgeKind::created_by, .from = event.task, .to = event.related_task, .ticks = event.ticks});
      }
      break;
    }
    case EventId::task_run_begin: {
      const size_t started_index = task_index(event.task, event.ticks, "run begin");
      Task& started = graph_.tasks_[started_index];
      for (const auto& open : running)
        if (open.task == event.task)
          note_problem(fmt::format("task {} begins to run on thread {} at tick {} while it already runs there",
                                   task_id_text(event.task), event.thread_id, event.ticks));
      started.runs.push_back(
          RunInterval{.thread_id = event.thread_id, .begin = event.ticks, .end = event.ticks, .ended = false});
      running.push_back({event.task, started.runs.size() - 1, started_index});
      if (detail_ == GraphDetail::summary) ++open_runs_[event.task];
      break;
    }
    case EventId::task_run_end: {
      task(event.task, event.ticks, "run end");
      auto match =
          std::find_if(running.rbegin(), running.rend(), [&](const Running& open) { return open.task == event.task; });
      if (match == running.rend()) {
        if (windows_) {
          ++graph_.runs_before_window_;  // it began before the thread's window
          break;
        }
        note_problem(fmt::format("task {} ends a run on thread {} at tick {} that never began",
                                 task_id_text(event.task), event.thread_id, event.ticks));
        break;
      }
      // Runs opened inside this one and never ended end with it, marked unended.
      const size_t keep = static_cast<size_t>(running.rend() - match) - 1;
      for (size_t i = running.size(); i-- > keep;) {
        if (i != keep)
          note_problem(fmt::format("task {} has no run end on thread {}: cut at tick {} where {} ends its run",
                                   task_id_text(running[i].task), event.thread_id, event.ticks,
                                   task_id_text(event.task)));
        close_run(running[i], event.ticks, i == keep);
      }
      running.resize(keep);
      break;
    }
    case EventId::task_wait: {
      const size_t waiting = task_index(event.task, event.ticks, "wait");
      if (event.related_task == 0) {
        note_problem(fmt::format("task {} waits on task 0 at tick {}", task_id_text(event.task), event.ticks));
        break;
      }
      task(event.related_task, event.ticks, "wait");
      graph_.tasks_[waiting].waits_on.push_back(event.related_task);
      graph_.edges_.push_back(
          Edge{.kind = EdgeKind::waits_on, .from = event.task, .to = event.related_task, .ticks = event.ticks});
      break;
    }
    case EventId::task_resolve: {
      if (event.related_task != 0 && event.related_task != event.task)
        task(event.related_task, event.ticks, "resolve (as the resolver)");
      Task& resolved = task(event.task, event.ticks, "resolve");
      if (resolved.resolved) {
        note_problem(fmt::format("task {} is resolved again at tick {} (the first resolution is kept)",
                                 task_id_text(event.task), event.ticks));
        break;
      }
      resolved.resolved = event.ticks;
      resolved.outcome = event.outcome;
      resolved.outcome_text = std::string(event.text);
      resolved.resolver = event.related_task;
      if (event.related_task != 0 && event.related_task != event.task)
        graph_.edges_.push_back(
            Edge{.kind = EdgeKind::resolved_by, .from = event.task, .to = event.related_task, .ticks = event.ticks});
      break;
    }
    case EventId::task_label:
      task(event.task, event.ticks, "label").label = std::string(event.text);
      break;
    case EventId::loop_suspend:
      suspend_loop(event);
      break;
    case EventId::loop_resume:
      resume_loop(event);
      break;
    case EventId::context_send:
    case EventId::context_receive:
    case EventId::context_receive_end:
    case EventId::context_tracestate:
    case EventId::span_context:
    case EventId::task_context:
      break;  // links between processes: chronicle merge pairs them
    case EventId::task_invoke:
    case EventId::task_hand_over:
    case EventId::task_return:
      break;  // compound: never read back as itself, the reader hands out the events it stands for
    case EventId::cpu_sample:
    case EventId::cpu_switch:
      break;  // about other threads (the sampler's): the profile reads them
    case EventId::attribute_int:
    case EventId::attribute_uint:
    case EventId::attribute_float:
    case EventId::attribute_bool:
    case EventId::attribute_string:
    case EventId::span_status:
      break;  // of spans: the pairing keeps them with the span
    case EventId::span_end:
      // A task's span ends where the task runs now; its end is the task's too (the reader paired it).
      if (event.span && event.span->task != 0 && !running.empty()) {
        Task& owner = graph_.tasks_[running.back().index];
        if (owner.id == event.span->task) add_note(event, event.span->site_id, owner);
      }
      break;
    case EventId::span_begin:
    case EventId::instant:
    case EventId::note:
    case EventId::counter:
    case EventId::counter_float: {
      // What a thread records belongs to the task running on it (the innermost one): the run
      // intervals say which, so these events need no task field and cost nothing more.
      if (running.empty()) break;
      add_note(event, event.name_id, graph_.tasks_[running.back().index]);
      break;
    }
  }
}

void TaskGraphBuilder::add_note(const reader::Event& event, uint32_t site_id, Task& owner) {
  if (detail_ != GraphDetail::full) return;
  using format::EventId;
  // A note's text is its own; every other event is named by its site.
  std::string text = event.type == EventId::note ? std::string(event.text)
                     : site_names_               ? site_names_(site_id)
                                                 : std::string();
  if (event.type == EventId::counter)
    text += fmt::format(" = {}", event.value);
  else if (event.type == EventId::counter_float)
    text += fmt::format(" = {}", event.value_float);
  owner.notes.push_back({event.ticks, event.thread_id, event.type, std::move(text)});
}

void TaskGraphBuilder::close_run(Running open, uint64_t ticks, bool ended) {
  Task& owner = graph_.tasks_[open.index];
  RunInterval& run = owner.runs[open.run];
  run.end = ticks;
  run.ended = ended;
  if (detail_ != GraphDetail::summary) return;
  // Fold only when no run of the task is open: the open ones are known by their index.
  auto count = open_runs_.find(open.task);
  if (count == open_runs_.end() || --count->second > 0) return;
  open_runs_.erase(count);
  for (const RunInterval& done : owner.runs) owner.folded_run_ticks += done.end - done.begin;
  std::vector<RunInterval>().swap(owner.runs);  // its memory too: a task may never run again
}

void TaskGraphBuilder::suspend_loop(const reader::Event& event) {
  if (idle_open_.count(event.thread_id)) {
    note_problem(fmt::format("the loop of thread {} suspends twice (tick {})", event.thread_id, event.ticks));
    return;
  }
  loop_threads_.insert(event.thread_id);
  const IdleInterval interval{.thread_id = event.thread_id, .begin = event.ticks, .end = event.ticks, .ended = false};
  if (detail_ == GraphDetail::summary) {
    auto [slot, inserted] = idle_slot_.try_emplace(event.thread_id, graph_.idle_.size());
    if (!inserted) {
      graph_.idle_[slot->second] = interval;
      idle_open_[event.thread_id] = slot->second;
      return;
    }
  }
  idle_open_[event.thread_id] = graph_.idle_.size();
  graph_.idle_.push_back(interval);
}

void TaskGraphBuilder::resume_loop(const reader::Event& event) {
  auto open = idle_open_.find(event.thread_id);
  if (open == idle_open_.end()) {
    // A loop's first event may be a resume: it went idle before the trace began.
    if (!loop_threads_.insert(event.thread_id).second)
      note_problem(
          fmt::format("the loop of thread {} resumes without suspending (tick {})", event.thread_id, event.ticks));
    return;
  }
  IdleInterval& interval = graph_.idle_[open->second];
  interval.end = event.ticks;
  interval.ended = true;
  graph_.idle_ticks_[event.thread_id] += interval.end - interval.begin;
  idle_open_.erase(open);
}

void TaskGraphBuilder::check_wait_cycles() {
  // Iterative depth-first search over waits-on edges: a wait that reaches back to a task on the
  // current path is a cycle (a deadlock, or corrupt data). Iterative so a long chain cannot
  // overflow the stack; each task is finished once, so it ends on any input.
  enum class Mark : uint8_t { unseen, on_path, done };
  std::vector<Mark> marks(graph_.tasks_.size(), Mark::unseen);
  struct Frame {
    size_t task;
    size_t next_wait;
  };
  std::vector<Frame> path;
  for (size_t root = 0; root < graph_.tasks_.size(); ++root) {
    if (marks[root] != Mark::unseen) continue;
    path.assign(1, Frame{root, 0});
    marks[root] = Mark::on_path;
    while (!path.empty()) {
      Frame& frame = path.back();
      const auto& waits = graph_.tasks_[frame.task].waits_on;
      if (frame.next_wait == waits.size()) {
        marks[frame.task] = Mark::done;
        path.pop_back();
        continue;
      }
      const size_t next = graph_.index_.find(waits[frame.next_wait++]);
      if (next == TaskIdIndex::kNone) continue;  // never: add() gives every awaited task a place
      if (marks[next] == Mark::unseen) {
        marks[next] = Mark::on_path;
        path.push_back({next, 0});
      } else if (marks[next] == Mark::on_path) {
        std::string cycle;
        auto from = std::find_if(path.begin(), path.end(), [&](const Frame& f) { return f.task == next; });
        for (; from != path.end(); ++from) cycle += task_id_text(graph_.tasks_[from->task].id) + " -> ";
        cycle += task_id_text(graph_.tasks_[next].id);
        note_problem("tasks wait on each other in a cycle: " + cycle);
      }
    }
  }
}

void TaskGraphBuilder::add_times(uint64_t first, uint64_t last) {
  first_ticks_ = std::min(first_ticks_, first);
  last_ticks_ = std::max(last_ticks_, last);
}

TaskGraph TaskGraphBuilder::finish() {
  for (auto& [thread, running] : running_) {
    for (const Running& open : running) {
      note_problem(fmt::format("task {} was still running on thread {} when the trace ended (no run end)",
                               task_id_text(open.task), thread));
      close_run(open, last_ticks_, false);
    }
    running.clear();
  }
  for (const auto& [id, mention] : first_mention_)
    if (!graph_.find(id)->seen_created && !windows_)
      note_problem(fmt::format("task {} is never created in the trace (first named by a {} at tick {})",
                               task_id_text(id), mention.first, mention.second));
  first_mention_.clear();
  for (auto& [thread, index] : idle_open_) {
    graph_.idle_[index].end = last_ticks_;
    graph_.idle_ticks_[thread] += last_ticks_ - graph_.idle_[index].begin;
  }
  idle_open_.clear();
  check_wait_cycles();
  graph_.first_ticks_ = first_ticks_ == ~uint64_t{0} ? 0 : first_ticks_;
  graph_.last_ticks_ = last_ticks_;
  if (problems_dropped_ > 0) graph_.problems_.push_back(fmt::format("... and {} more problems", problems_dropped_));
  problems_dropped_ = 0;
  return std::move(graph_);
}

TaskGraph build_task_graph(const reader::Trace& trace) {
  return build_task_graph(trace, GraphDetail::full);
}

TaskGraph build_task_graph(const reader::Trace& trace, GraphDetail detail) {
  TaskGraphBuilder builder(
      [&trace](uint32_t site_id) {
        const reader::Site* site = trace.site(site_id);
        return site ? site->name : std::string();
      },
      detail);
  trace.for_each_event([&](const reader::Event& event) {
    builder.add(event);
    return true;
  });
  return builder.finish();
}

}  // namespace chronicle::model
