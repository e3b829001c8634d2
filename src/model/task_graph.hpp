// The task graph of a trace: every task (kind, name, label, creation and resolution, the
// intervals it ran on each thread, its notes, its outcome) and the edges between tasks
// (created-by, waits-on, resolved-by). Built from the reader's events; the CLI, the tests and
// later tools (stats, viewer, critical path) share it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "reader/task_id_index.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::model {

using TaskId = uint64_t;
using reader::task_id_counter;
using reader::task_id_maker;
using reader::TaskIdIndex;

// "t3.17": the 17th task made by the 3rd thread that made tasks (ids are index << 40 | counter);
// "-" for 0 (no task); "t?N" for an id no thread makes.
std::string task_id_text(TaskId id);

// RunInterval, Edge and IdleInterval are written to the viewer's index as bytes: their padding is
// named and zeroed so that no stray byte goes with them (initialise them by designators).
struct RunInterval {
  uint32_t thread_id = 0;
  uint32_t unused = 0;
  uint64_t begin = 0;  // ticks
  uint64_t end = 0;    // ticks; the trace's last time when the run never ended
  bool ended = true;   // false: no run_end (the program crashed or the trace was cut)
  uint8_t unused_end[7] = {};
};

// Something recorded on a thread while the task ran there: a note's text, or an instant's or
// a span's name.
struct TaskNote {
  uint64_t ticks = 0;
  uint32_t thread_id = 0;
  format::EventId type = format::EventId::note;
  std::string text;
};

// Its one-byte and four-byte fields come last, together, so that no padding follows each: 240
// bytes, not 264 (a viewer's first open of 100 M events holds 2.4 M of them in one array).
struct Task {
  TaskId id = 0;
  std::string name;                  // from creation: a coroutine's function, an Asio operation
  std::string label;                 // the last task_label; empty if none
  TaskId parent = 0;                 // the creating task; 0: created outside any task
  std::optional<uint64_t> created;   // ticks; none when the trace has no creation (before it began)
  std::optional<uint64_t> resolved;  // ticks; none when never resolved in the trace
  std::string outcome_text;          // error text of a failure or cancellation
  TaskId resolver = 0;
  std::vector<RunInterval> runs;  // in order of their beginning (GraphDetail::summary: see there)
  std::vector<TaskId> waits_on;   // in order of the waits
  std::vector<TaskNote> notes;
  // GraphDetail::summary: ticks of the runs folded away from `runs`; 0 otherwise.
  uint64_t folded_run_ticks = 0;
  uint32_t created_on_thread = 0;
  format::TaskKind kind = format::TaskKind::unknown;
  format::TaskOutcome outcome = format::TaskOutcome::ok;  // meaningful when resolved
  // The trace shows this task's creation. False: it is known only from other events (events
  // were lost, or it was made before the trace began).
  bool seen_created = false;

  // The label, or else the name: what to call the task.
  const std::string& display_name() const { return label.empty() ? name : label; }
  uint64_t busy_ticks() const;
};

enum class EdgeKind : uint8_t { created_by, waits_on, resolved_by };
std::string_view edge_kind_name(EdgeKind kind);

// `from` created-by/waits-on/resolved-by `to`, at `ticks`.
struct Edge {
  EdgeKind kind = EdgeKind::created_by;
  uint8_t unused[7] = {};
  TaskId from = 0;
  TaskId to = 0;
  uint64_t ticks = 0;
};

// What a graph keeps. Its size grows with the tasks and the waits between them in every case;
// `full` also with the notes and the runs (what a viewer shows), `no_notes` with the runs (what
// a critical path needs). `summary` keeps nothing that grows with the events: a task's runs are
// folded into Task::folded_run_ticks whenever none of them is open (`runs` then lists only runs
// still open or in the same burst), and idle() holds each thread's last interval only
// (idle_ticks() has the totals).
enum class GraphDetail : uint8_t { full, no_notes, summary };

// A stretch of time in which a thread's event loop had no work.
struct IdleInterval {
  uint32_t thread_id = 0;
  uint32_t unused = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  bool ended = true;
  uint8_t unused_end[7] = {};
};

class TaskGraph {
 public:
  // Tasks in order of first appearance (creation, normally).
  const std::vector<Task>& tasks() const { return tasks_; }
  const std::vector<Edge>& edges() const { return edges_; }
  const std::vector<IdleInterval>& idle() const { return idle_; }
  // Total time the loop of `thread_id` had no work, whatever the detail kept.
  uint64_t idle_ticks(uint32_t thread_id) const;
  // Ticks of the first and last events seen (task or not); 0 when there were none.
  uint64_t first_ticks() const { return first_ticks_; }
  uint64_t last_ticks() const { return last_ticks_; }
  // Inconsistencies found in the events (unknown tasks, unmatched run ends, wait cycles...),
  // one sentence each. The graph is still whole: the builder never gives up.
  const std::vector<std::string>& problems() const { return problems_; }
  // A flight recording's (TaskGraphBuilder::expect_windows): run ends whose beginning is before
  // their thread's window, counted here rather than as problems.
  uint64_t runs_before_window() const { return runs_before_window_; }

  // Per thread, what idle_ticks() answers.
  const std::map<uint32_t, uint64_t>& idle_ticks_by_thread() const { return idle_ticks_; }
  // A graph put back together from what the accessors above gave (the viewer's index cache
  // keeps graphs on disk).
  static TaskGraph from_parts(std::vector<Task> tasks, std::vector<Edge> edges, std::vector<IdleInterval> idle,
                              std::map<uint32_t, uint64_t> idle_ticks, std::vector<std::string> problems,
                              uint64_t first_ticks, uint64_t last_ticks);

  const Task* find(TaskId id) const;
  // Tasks created by `id`, in creation order.
  std::vector<const Task*> children(TaskId id) const;

 private:
  friend class TaskGraphBuilder;
  std::vector<Task> tasks_;
  TaskIdIndex index_;
  std::vector<Edge> edges_;
  std::vector<IdleInterval> idle_;
  std::map<uint32_t, uint64_t> idle_ticks_;
  std::vector<std::string> problems_;
  uint64_t runs_before_window_ = 0;
  uint64_t first_ticks_ = 0;
  uint64_t last_ticks_ = 0;
};

// Feeds events in time order (as Trace::for_each_event gives them); finish() closes what was
// left open and checks the waits for cycles. Robust against any event sequence.
class TaskGraphBuilder {
 public:
  // Names a site id (the task names of task_create, note and span names); may be empty.
  using SiteNames = std::function<std::string(uint32_t site_id)>;
  explicit TaskGraphBuilder(SiteNames site_names, GraphDetail detail = GraphDetail::full);

  void add(const reader::Event& event);
  // Room for `tasks` tasks and `edges` edges (hints, from the events counted beforehand): the
  // graph's task array, index and edges are not grown step by step. `edges` may be a bound: room
  // never written is never made present.
  void reserve(size_t tasks, size_t edges);
  // Events not given to add() that happened between `first` and `last` ticks: of those the graph
  // keeps only its first and last times.
  void add_times(uint64_t first, uint64_t last);
  // A flight recording: each thread's ring holds its own window, so tasks created before their
  // creator's window are expected; finish() notes no problem for each (Task::seen_created says).
  void expect_windows() { windows_ = true; }
  TaskGraph finish();

 private:
  struct Running {
    TaskId task;
    size_t run;    // into Task::runs
    size_t index;  // the task's, into the graph's tasks
  };

  // The task's index in the graph, which adds it when it is new; `known` says whether it was not.
  size_t task_index(TaskId id, uint64_t ticks, const char* role, bool* known = nullptr);
  Task& task(TaskId id, uint64_t ticks, const char* role);
  // The tasks running on `thread_id`: events come in runs of one thread, so the last is kept.
  std::vector<Running>& running_on(uint32_t thread_id);
  void note_problem(std::string problem);
  void check_wait_cycles();
  void add_note(const reader::Event& event, uint32_t site_id, Task& owner);
  void close_run(Running open, uint64_t ticks, bool ended);
  void suspend_loop(const reader::Event& event);
  void resume_loop(const reader::Event& event);

  SiteNames site_names_;
  GraphDetail detail_;
  TaskGraph graph_;
  // Per thread: the tasks running there, innermost last (a handler may run inside another's
  // run, as Asio's dispatch does), with their index into Task::runs.
  std::map<uint32_t, std::vector<Running>> running_;
  uint32_t last_thread_ = 0;
  std::vector<Running>* last_running_ = nullptr;    // running_[last_thread_]
  std::map<uint32_t, size_t> idle_open_;            // thread -> index in idle_
  std::map<uint32_t, size_t> idle_slot_;            // summary: thread -> its one interval in idle_
  std::unordered_map<TaskId, uint32_t> open_runs_;  // summary: by task, runs not yet ended
  std::set<uint32_t> loop_threads_;                 // threads with a loop event so far
  std::map<uint32_t, std::vector<std::string>> open_spans_;
  // Tasks known only from other events so far: the first such event's role and time.
  std::map<TaskId, std::pair<const char*, uint64_t>> first_mention_;
  uint64_t first_ticks_ = ~uint64_t{0};
  uint64_t last_ticks_ = 0;
  size_t problems_dropped_ = 0;
  bool windows_ = false;
};

TaskGraph build_task_graph(const reader::Trace& trace);
TaskGraph build_task_graph(const reader::Trace& trace, GraphDetail detail);

}  // namespace chronicle::model
