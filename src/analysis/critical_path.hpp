// The critical path of a task: the chain of runs, waits and resolutions that decided when it
// finished, walked back through the task graph, with the time each step contributed.
//
// From the moment the task finished, walk back: if another task resolved it, that task's
// progress decided the moment; otherwise the task's last wait before that moment tells what
// held it up. The task ran (or was ready) from when the awaited task finished; before that,
// the awaited task's own path is what mattered. With no wait left, the task ran since its
// creation, and its creator's path decided when that was. Each step's contribution is the time
// it covers, so they add up to the chain's length.
//
// Each step says in what state the task spent it (StepState): running, queued (ready but not
// running), waiting (suspended), or blocked. A step of a task's own time (after the task it
// awaited finished, since its creation, after a message arrived) is split by the task's runs:
// inside a run it ran; before its first run it was queued (it had been resumed or resolved, or,
// since creation, it is not an operation), or waiting (an I/O or timer task's operation was in
// flight); between runs it was waiting (suspended: no wait is recorded there, see
// docs/tasks.md). After a wait released before its task finished (a timeout, a cancellation), the
// first gap is that wait's. A gap after the task's last run in the step that ends at its own resolution is
// counted to that run: the resolution is the run's bookkeeping (recorded just after its end). A
// task with no runs in the trace keeps one step, `ran`: nothing tells its states apart (but an
// I/O or timer task, `waiting` for its operation).
//
// Across processes (a merged trace, a record run of several processes): a task whose run began
// by receiving a message (a ReceiveScope: chronicle/context.hpp) was waiting for that message, so
// the walk goes on in the process and task that sent it, from the moment of the send. Times of
// different processes are compared on their (merge-aligned) wall clocks.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/task_graph.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::analysis {

// What a task did during a step of its critical path.
enum class StepState : uint8_t {
  ran,      // on CPU, in one of its runs
  queued,   // resumed or resolved, not yet running (waiting for a pool thread, a loop's turn)
  waiting,  // suspended: on a task, a message, its operation, or between runs
  blocked,  // off CPU in a run (scheduler data: split_runs_by_cpu_state, critical_path_cpu.hpp)
};
// "ran", "queued", "waiting", "blocked": the word stats and the viewer print.
std::string_view step_state_name(StepState state);

struct CriticalStep {
  size_t process = 0;  // which of the processes given (0 with one graph)
  model::TaskId task = 0;
  std::string task_name;
  StepState state = StepState::ran;
  std::string what;   // why: "ran after t1.5 finished", "queued since creation", "resolved by t1.4", ...
  uint64_t from = 0;  // ticks
  uint64_t to = 0;
};

struct CriticalPath {
  model::TaskId target = 0;
  uint64_t start = 0;  // ticks (of start_process): where the chain begins
  size_t start_process = 0;
  uint64_t end = 0;                 // ticks: when the target finished (or its last activity)
  std::vector<CriticalStep> steps;  // in time order
};

// What the walk reads of one process's tasks. A TaskGraph holds them all (GraphTasks); another
// source may read a task only when the walk reaches it (the viewer's index cache does).
class TaskSource {
 public:
  struct Wait {
    uint64_t ticks = 0;
    model::TaskId awaited = 0;
  };
  virtual ~TaskSource() = default;
  // nullptr when there is no such task; what it points to lasts as long as the source.
  virtual const model::Task* find(model::TaskId id) const = 0;
  // The task's waits (its waits_on edges) in time order, at equal times in the edges' order;
  // they last as long as the source.
  virtual std::span<const Wait> waits(model::TaskId id) const = 0;
  virtual uint64_t first_ticks() const = 0;  // as TaskGraph::first_ticks
  // Tasks and edges: a walk takes at most a few steps per one of them.
  virtual size_t size() const = 0;
};

// A TaskGraph as a TaskSource: every task's waits are sorted once, when the walk first asks.
class GraphTasks final : public TaskSource {
 public:
  explicit GraphTasks(const model::TaskGraph& graph) : graph_(graph) {}
  const model::Task* find(model::TaskId id) const override { return graph_.find(id); }
  std::span<const Wait> waits(model::TaskId id) const override;
  uint64_t first_ticks() const override { return graph_.first_ticks(); }
  size_t size() const override { return graph_.tasks().size() + graph_.edges().size(); }

 private:
  const model::TaskGraph& graph_;
  mutable std::optional<std::unordered_map<model::TaskId, std::vector<Wait>>> waits_;
};

CriticalPath critical_path(const model::TaskGraph& graph, model::TaskId target);
CriticalPath critical_path(const TaskSource& tasks, model::TaskId target);

// One process of several: its trace (for times) and its task graph.
struct ProcessGraph {
  const reader::Trace* trace = nullptr;
  const model::TaskGraph* graph = nullptr;
};

// The messages between the processes, by the task that received them (reader/messages.hpp
// matches the ends).
class MessageArrivals {
 public:
  struct Arrival {
    uint64_t receive_ticks = 0;  // in the receiver's clock
    size_t sender = 0;           // process index
    model::TaskId sender_task = 0;
    uint64_t send_ticks = 0;  // in the sender's clock
  };
  static MessageArrivals find(const std::vector<ProcessGraph>& processes);
  // The first message `task` of `process` received in [from, to]; nullptr when none.
  const Arrival* first_between(size_t process, model::TaskId task, uint64_t from, uint64_t to) const;
  size_t size() const { return count_; }

 private:
  std::vector<std::unordered_map<model::TaskId, std::vector<Arrival>>> by_task_;  // by process
  size_t count_ = 0;
};

// The critical path of `target` in processes[process], crossing into the processes that sent
// the messages it (and its chain) waited for. Steps carry their process; CriticalPath's start and
// end are in the target process's ticks.
CriticalPath critical_path(const std::vector<ProcessGraph>& processes, const MessageArrivals& messages, size_t process,
                           model::TaskId target);
// The same over a TaskSource per process; `processes` gives only the traces (their graphs are
// not read).
CriticalPath critical_path(const std::vector<const TaskSource*>& sources, const std::vector<ProcessGraph>& processes,
                           const MessageArrivals& messages, size_t process, model::TaskId target);

// The tasks `id_or_label` names: the one with that id text ("t3.17"); else those with that
// label; else those with that name. Empty when none does.
std::vector<model::TaskId> find_tasks(const model::TaskGraph& graph, const std::string& id_or_label);

// The first of find_tasks. Throws std::invalid_argument naming what was not found.
model::TaskId find_task(const model::TaskGraph& graph, const std::string& id_or_label);

}  // namespace chronicle::analysis
