// chronicle tasks: the unit of an asynchronous program (a coroutine, a promise, an Asio handler).
//
//   TaskId fetch = chronicle::create_task(TaskKind::promise, "fetch");  // child of the current task
//   chronicle::label_task(fetch, "B.read");
//   { chronicle::TaskRunScope run(fetch); ... }                       // runs on this thread
//   chronicle::task_waits_for(current_task(), fetch);                    // an arrow in the viewer
//   chronicle::resolve_task(fetch, TaskOutcome::failed, "timeout");      // by the current task
//
// While a TaskRunScope (or CurrentTaskScope) is open, the thread's spans, notes and counters
// belong to that task. When no session runs, create_task() returns 0 and every other call with
// task 0 does nothing; each costs one load and one branch. With CHRONICLE_DISABLE, nothing at all.
//
// For coroutines see chronicle/coro.hpp (chronicle::task<T>); for Asio,
// chronicle/asio_tracking.hpp.
#pragma once

#include <cstdint>
#include <string_view>
#include "chronicle/detail/source_location.hpp"

#include "chronicle/config.hpp"
#include "chronicle/detail/layout.hpp"

#ifndef CHRONICLE_DISABLE
#include "chronicle/detail/context_state.hpp"
#include "chronicle/detail/task_writer.hpp"
#endif

namespace chronicle {

// Unique within the process; 0 means "no task".
using TaskId = std::uint64_t;
using TaskKind = format::TaskKind;
using TaskOutcome = format::TaskOutcome;

// How a task is named at its creation: by a string with static storage (a literal), or by the
// source location it is created at (the default).
struct TaskName {
  TaskName(const char* static_name) : literal(static_name) {}  // NOLINT: implicit on purpose
  TaskName(source_location where = source_location::current()) : location(where) {}
  const char* literal = nullptr;
  source_location location;
};

#ifndef CHRONICLE_DISABLE

inline TaskId current_task() noexcept {
  return detail::t_tasks.current;
}

// Makes `task` the thread's current task and returns the one it replaces (for executors and
// task types that switch tasks themselves; scoped code uses CurrentTaskScope).
inline TaskId exchange_current_task(TaskId task) noexcept {
  const TaskId previous = detail::t_tasks.current;
  detail::t_tasks.current = task;
  return previous;
}

namespace detail {

CHRONICLE_INLINE uint32_t task_name_id(const TaskName& name) {
  return name.literal
             ? task_name_from_literal(name.literal)
             : task_name_from_location(name.location.function_name(), name.location.file_name(), name.location.line());
}

// Records a new task made by `writer`'s thread (create_task() once it knows it is tracing).
CHRONICLE_INLINE TaskId record_new_task(ThreadWriter& writer, TaskKind kind, uint32_t name_id, TaskId parent) {
  const TaskId task = new_task_id();
  if (parent != 0 && parent == t_tasks.suspending) [[unlikely]]
    emit_work_of_suspending_task(writer, task, parent, kind, name_id);
  else
    emit_task_create(writer, task, parent, kind, name_id);
  if (!reader_derives_child_context(current_context_slot(), parent, writer.generation)) [[unlikely]]
    record_inherited_context(task);
  return task;
}

// Records a new task that carries its own trace context (a coroutine, an Asio handler) under the
// current task, and fills `slot` with that context (capture_created_task_context).
CHRONICLE_INLINE TaskId record_new_task_with_context(ThreadWriter& writer, TaskKind kind, uint32_t name_id,
                                                     ContextSlot& slot) {
  const TaskId parent = current_task();
  const TaskId task = record_new_task(writer, kind, name_id, parent);
  capture_created_task_context(writer, task, parent, slot);
  return task;
}

}  // namespace detail

// Records a new task and returns its id (0 when not tracing).
inline TaskId create_task(TaskKind kind, TaskName name = {}, TaskId parent = current_task()) {
  detail::ThreadWriter* writer = detail::task_writer();
  if (!writer) [[likely]]
    return 0;
  return detail::record_new_task(*writer, kind, detail::task_name_id(name), parent);
}

inline void begin_task_run(TaskId task) {
  if (task != 0) detail::emit_task_event(format::EventId::task_run_begin, task);
}

inline void end_task_run(TaskId task) {
  if (task != 0) detail::emit_task_event(format::EventId::task_run_end, task);
}

// `waiter` blocks until `awaited` is resolved.
inline void task_waits_for(TaskId waiter, TaskId awaited) {
  if (awaited != 0) detail::emit_task_pair(format::EventId::task_wait, waiter, awaited);
}

// `task` is resolved by `resolver` (by default the current task; 0: from outside any task).
// `text` says why it failed or was cancelled.
inline void resolve_task(TaskId task, TaskOutcome outcome, std::string_view text = {},
                         TaskId resolver = current_task()) {
  if (task == 0) return;
  if (detail::ThreadWriter* writer = detail::task_writer()) [[unlikely]] {
    if (text.empty()) [[likely]]
      detail::emit_task_resolve_quiet(*writer, task, resolver, outcome);
    else
      detail::emit_task_resolve(*writer, task, resolver, outcome, text.data(), text.size());
  }
}

// Names a task for people ("B.read"); the last label wins.
inline void label_task(TaskId task, std::string_view text) {
  if (task == 0) return;
  if (detail::ThreadWriter* writer = detail::task_writer()) [[unlikely]]
    detail::emit_task_label(*writer, task, text.data(), text.size());
}

// The event loop of this thread blocks for lack of work / has work again.
inline void loop_suspend() {
  detail::emit_loop_event(format::EventId::loop_suspend);
}
inline void loop_resume() {
  detail::emit_loop_event(format::EventId::loop_resume);
}

// Makes `task` the thread's current task for the scope, without recording anything: what the
// thread records meanwhile is attributed to it, and tasks it creates are its children.
class CurrentTaskScope {
 public:
  explicit CurrentTaskScope(TaskId task) noexcept : previous_(detail::t_tasks.current) {
    detail::t_tasks.current = task;
  }
  ~CurrentTaskScope() { detail::t_tasks.current = previous_; }
  CurrentTaskScope(const CurrentTaskScope&) = delete;
  CurrentTaskScope& operator=(const CurrentTaskScope&) = delete;

 private:
  TaskId previous_;
};

// `task` runs on this thread for the scope: run begin and end, and it is the current task.
class TaskRunScope {
 public:
  explicit TaskRunScope(TaskId task) : task_(task), current_(task) { begin_task_run(task); }
  ~TaskRunScope() { end_task_run(task_); }
  TaskRunScope(const TaskRunScope&) = delete;
  TaskRunScope& operator=(const TaskRunScope&) = delete;

 private:
  TaskId task_;
  CurrentTaskScope current_;
};

#else  // CHRONICLE_DISABLE

inline TaskId current_task() noexcept {
  return 0;
}
inline TaskId exchange_current_task(TaskId) noexcept {
  return 0;
}
inline TaskId create_task(TaskKind, TaskName = {}, TaskId = 0) {
  return 0;
}
inline void begin_task_run(TaskId) {}
inline void end_task_run(TaskId) {}
inline void task_waits_for(TaskId, TaskId) {}
inline void resolve_task(TaskId, TaskOutcome, std::string_view = {}, TaskId = 0) {}
inline void label_task(TaskId, std::string_view) {}
inline void loop_suspend() {}
inline void loop_resume() {}
class CurrentTaskScope {
 public:
  explicit CurrentTaskScope(TaskId) noexcept {}
};
class TaskRunScope {
 public:
  explicit TaskRunScope(TaskId) {}
};

#endif  // CHRONICLE_DISABLE

// The event loop of this thread is idle for the scope (loop_suspend ... loop_resume).
class LoopIdleScope {
 public:
  LoopIdleScope() { loop_suspend(); }
  ~LoopIdleScope() { loop_resume(); }
  LoopIdleScope(const LoopIdleScope&) = delete;
  LoopIdleScope& operator=(const LoopIdleScope&) = delete;
};

}  // namespace chronicle
