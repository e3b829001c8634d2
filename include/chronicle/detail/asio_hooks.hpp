// What Asio's handler-tracking hooks do in chronicle (see chronicle/asio_tracking.hpp), shared by
// the standalone Asio and the Boost.Asio headers.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "chronicle/detail/context_state.hpp"
#include "chronicle/task.hpp"

namespace chronicle::asio_tracking {

class CoroutineRecord;

// The base of Asio's operation objects (ASIO_INHERIT_TRACKED_HANDLER): the task the
// operation's handler is. The member's name keeps clear of the operations' own.
class TrackedHandler {
 public:
  TaskId chronicle_task_id_ = 0;
  detail::ContextSlot chronicle_context_;  // the trace context the handler carries
  // The traced coroutine whose suspension this operation ends (see CoroutineRecord): invoking
  // the handler resumes it. Alive until then, as the handler owns the coroutine's frames.
  CoroutineRecord* chronicle_resumes_ = nullptr;

 protected:
  TrackedHandler() = default;
  ~TrackedHandler() = default;
};

// What this thread knows of the traced Asio coroutines (CoroutineRecord) on it. Trivial, so the
// thread_local needs no guard.
struct AwaitableThreadState {
  CoroutineRecord* running;     // the innermost traced coroutine on this thread's stack
  CoroutineRecord* suspending;  // a coroutine suspending on an operation it has not started yet
  CoroutineRecord* entry;       // a coroutine being launched by co_spawn, before its first run
  CoroutineRecord* launching;   // the record moved last: the one co_spawn is about to launch
  CoroutineRecord* launched;    // the coroutine whose launch by co_spawn is under way here
};
inline thread_local constinit AwaitableThreadState t_awaitables{};

// The composed operation (async_read, async_connect...) whose initiation is under way on this
// thread, if any: it qualifies the names of the operations it starts. Asio also marks two
// moments of its coroutines with a location: a coroutine suspending on an operation (the
// location of its use_awaitable token, or none) and co_spawn launching a coroutine
// ("co_spawn_entry_point"); those drive the coroutine tracking (CoroutineRecord).
class Location {
 public:
  Location(const char* /*file*/, int /*line*/, const char* function) noexcept
      : previous_(current_function()), function_(function) {
    current_function() = function_;
    if (t_awaitables.running || t_awaitables.launching) [[unlikely]]
      begin_coroutine_moment();
  }
  ~Location() {
    current_function() = previous_;
    if (moment_ != Moment::none) [[unlikely]]
      end_coroutine_moment();
  }
  Location(const Location&) = delete;
  Location& operator=(const Location&) = delete;

  static const char*& current_function() noexcept {
    static thread_local constinit const char* function = nullptr;
    return function;
  }

 private:
  enum class Moment : uint8_t { none, suspension, launch, untraced_launch };
  void begin_coroutine_moment() noexcept;
  void end_coroutine_moment() noexcept;

  const char* previous_;
  const char* function_;
  Moment moment_ = Moment::none;
  AwaitableThreadState saved_{};
  CoroutineRecord* coroutine_ = nullptr;
};

inline TaskKind kind_of(std::string_view object) noexcept {
  if (object == "socket" || object == "descriptor" || object == "resolver" || object == "signal_set" ||
      object == "handle" || object == "object_handle" || object == "overlapped" || object == "channel")
    return TaskKind::io;
  if (object == "deadline_timer") return TaskKind::timer;
  return TaskKind::handler;  // io_context, thread_pool, strand, system_executor...
}

// Task events of one instant, written as one group (detail::TaskEventBatch); with
// CHRONICLE_DISABLE, the same calls and no events.
#ifndef CHRONICLE_DISABLE
using EventBatch = detail::TaskEventBatch;
#else
struct EventBatch {
  void task_event(format::EventId, TaskId) noexcept {}
  void wait(TaskId, TaskId) noexcept {}
  void resolve_quiet(TaskId, TaskId, TaskOutcome) noexcept {}
  void invoke(TaskId, TaskId, TaskOutcome) noexcept {}
  bool active() const noexcept { return false; }
};
#endif

// Asio's operation_aborted: ECANCELED in the system category (std's or Boost's).
template <typename ErrorCode>
bool is_operation_aborted(const ErrorCode& error) {
  const std::string_view category = error.category().name();
  return error.value() == ECANCELED && (category == "system" || category == "asio.system");
}

// A coroutine Asio runs as a thread of execution of its own (co_spawn), recorded as a task of
// kind coroutine named "co_spawn", created by the task running where co_spawn was called. The
// record lives in co_spawn's function object (asio_tracking.hpp specialises it), which Asio keeps in
// the coroutine's entry frame from its launch to its end; before its launch it may move (the
// last move is into that frame: it marks the record as the one co_spawn launches next).
//
// Its runs: from each resumption (its first run, or the completion of an operation it awaited)
// to its next suspension (it starts an operation, or launches coroutines it awaits) or its end.
// On a thread, a traced coroutine that runs inline above another (co_spawn runs a coroutine at
// once on its executor's thread) interrupts the other's run, which begins again when it is left.
// The record is touched only by the thread the coroutine runs on, and after it suspended only by
// what resumes it (its operation's completion, or the end of the last coroutine it waits on) and,
// through its atomics, by the ends of the coroutines it waits on.
// The coroutines it waits on at a suspension are those it spawned and had not launched (the
// operands of && and ||, a parallel group's, co_spawn(..., use_awaitable)'s): counted before any
// of them is launched, so the count reaches zero only at the end of the last one.
class CoroutineRecord {
 public:
  CoroutineRecord() noexcept = default;
  CoroutineRecord(CoroutineRecord&& other) noexcept
      : task_(std::exchange(other.task_, 0)), context_(other.context_), creator_(other.creator_) {
    t_awaitables.launching = this;
  }
  CoroutineRecord& operator=(CoroutineRecord&&) = delete;
  ~CoroutineRecord() {
    if (t_awaitables.launching == this) t_awaitables.launching = nullptr;
  }

  // co_spawn was called: the coroutine is created, by the current task.
  void spawn() {
    creator_ = t_awaitables.running;
    if (creator_) ++creator_->unlaunched_;
#ifndef CHRONICLE_DISABLE
    if (detail::ThreadWriter* writer = detail::task_writer()) [[unlikely]] {
      task_ = detail::record_new_task_with_context(*writer, TaskKind::coroutine,
                                                   detail::task_name_from_literal("co_spawn"), context_);
      return;
    }
#endif
    detail::carry_context(context_);
  }

  // co_spawn launches it inside the initiation of an operation `waiter` suspends on (the
  // awaitable operators, parallel groups, co_spawn with use_awaitable): `waiter` waits on it and
  // resumes at the end of the last coroutine it waits on.
  void launched_by(CoroutineRecord* waiter) noexcept {
    CoroutineRecord* running = t_awaitables.running;
    waiter_ = waiter;
    if (!waiter) {
      if (creator_ && creator_ == running) --creator_->unlaunched_;  // spawned and launched at once
      return;
    }
    task_waits_for(waiter->task_, task_);
    if (waiter == running) waiter->leave();  // its first launch ends its run
  }

  // Who ended it: itself, or, when it ends cancelled after a coroutine awaited with it ended (the
  // winner of ||, the failure that ends a && or a parallel group), the last such coroutine, as
  // Asio cancels the others of a group when one of them ends so. Its own end is noted for those
  // that end after it.
  TaskId resolver_of_end(TaskOutcome outcome) noexcept {
    if (!waiter_) return task_;
    const TaskId sibling = waiter_->last_child_ended_.exchange(task_, std::memory_order_relaxed);
    return outcome == TaskOutcome::cancelled && sibling != 0 ? sibling : task_;
  }

  // It suspends: the coroutines it spawned and has not launched yet are those it may wait on.
  void expect_children() noexcept {
    last_child_ended_.store(0, std::memory_order_relaxed);
    children_pending_.store(std::exchange(unlaunched_, 0), std::memory_order_relaxed);
    children_elsewhere_.store(false, std::memory_order_relaxed);
    children_ended_on_.store(nullptr, std::memory_order_relaxed);
  }

  // It suspends on `operation`, which it started: it waits on the operation's task, and the
  // operation's completion resumes it.
  void suspends_on(TrackedHandler& operation) noexcept {
    operation.chronicle_resumes_ = this;
    if (!on_this_thread()) return;
    leave_those_above();
    EventBatch batch;  // the wait and its run's end are one instant
    batch.wait(task_, operation.chronicle_task_id_);
    leave(batch);  // before the operation can complete on another thread
  }

  // Its code runs on this thread from now on. `run_begin_recorded`: the caller recorded the
  // run's beginning (in its own batch of events).
  void enter(bool run_begin_recorded = false) noexcept;
  // Its code no longer runs here (it suspended or ended); what ran inline above it is left first.
  void leave() noexcept;
  // Its code ended (`outcome`, with `text` for a failure or a cancellation): it resolves itself,
  // and resumes the coroutine that waits on it when it was the last of its waits.
  void end(TaskOutcome outcome, std::string_view text) noexcept;
  // Its frames are destroyed while it is suspended (its executor was shut down).
  void abandon() noexcept {
    resolve_task(task_, TaskOutcome::cancelled, "destroyed while suspended", task_);
  }

  TaskId task() const noexcept {
    return task_;
  }

 private:
  TaskId task_ = 0;
  detail::ContextSlot context_;
  CoroutineRecord* creator_ = nullptr;  // the traced coroutine that spawned it, if any
  CoroutineRecord* waiter_ = nullptr;
  uint32_t unlaunched_ = 0;  // coroutines it spawned, not launched yet
  std::atomic<uint32_t> children_pending_{0};
  // The thread where the coroutines it waits on (since its last suspension) ended, and whether
  // one ended on another, or inside its own launch: then where Asio resumes it is not known
  // (see end()).
  std::atomic<const AwaitableThreadState*> children_ended_on_{nullptr};
  std::atomic<bool> children_elsewhere_{false};
  std::atomic<TaskId> last_child_ended_{0};  // the coroutine it waits on that ended last
  // While on this thread's stack of traced coroutines (enter .. leave):
  CoroutineRecord* below_ = nullptr;
  TaskId previous_task_ = 0;
  detail::ContextSlot* previous_context_ = nullptr;
  bool run_open_ = false;
  bool interrupted_ = false;  // its run was ended for a coroutine that runs inline above it

  void leave_those_above() noexcept;
  // Whether it is on this thread's stack of traced coroutines: only this thread reads that
  // stack, so a record entered on another thread is never taken for this one's.
  bool on_this_thread() const noexcept {
    for (const CoroutineRecord* each = t_awaitables.running; each; each = each->below_)
      if (each == this) return true;
    return false;
  }
  // Pops it from this thread's stack, its run's end (and the run of the coroutine below, if it
  // interrupted one) written into `batch`, which nothing else writes to meanwhile.
  void leave(EventBatch& batch) noexcept;
};

inline void CoroutineRecord::enter(bool run_begin_recorded) noexcept {
  AwaitableThreadState& state = t_awaitables;
  if (state.entry == this) state.entry = nullptr;  // launched inline: co_spawn's hop made no operation
  if (on_this_thread()) {                          // resumed inside the initiation it suspended in
    if (!run_open_ && !run_begin_recorded) begin_task_run(task_);
    run_open_ = true;
    return;
  }
  CoroutineRecord* below = state.running;
  {
    EventBatch batch;
    if (below && below->run_open_) {
      batch.task_event(format::EventId::task_run_end, below->task_);
      below->run_open_ = false;
      below->interrupted_ = true;
    }
    if (!run_begin_recorded) batch.task_event(format::EventId::task_run_begin, task_);
  }
  run_open_ = true;
  below_ = below;
  state.running = this;
  previous_task_ = exchange_current_task(task_);
  previous_context_ = detail::exchange_context_slot(&context_);
}

inline void CoroutineRecord::leave() noexcept {
  if (!on_this_thread()) return;
  leave_those_above();
  EventBatch batch;
  leave(batch);
}

inline void CoroutineRecord::leave_those_above() noexcept {
  AwaitableThreadState& state = t_awaitables;
  while (state.running && state.running != this) state.running->leave();
}

inline void CoroutineRecord::leave(EventBatch& batch) noexcept {
  AwaitableThreadState& state = t_awaitables;
  if (run_open_) batch.task_event(format::EventId::task_run_end, task_);
  if (below_ && below_->interrupted_) {
    below_->interrupted_ = false;
    below_->run_open_ = true;
    batch.task_event(format::EventId::task_run_begin, below_->task_);
  }
  run_open_ = false;
  state.running = below_;
  exchange_current_task(previous_task_);
  detail::exchange_context_slot(previous_context_);
}

inline void CoroutineRecord::end(TaskOutcome outcome, std::string_view text) noexcept {
  const TaskId resolver = resolver_of_end(outcome);
  if (on_this_thread()) {
    leave_those_above();
    if (!text.empty()) resolve_task(task_, outcome, text, resolver);
    EventBatch batch;  // its resolution and its run's end are one instant
    if (text.empty()) batch.resolve_quiet(task_, resolver, outcome);
    leave(batch);
  } else {
    resolve_task(task_, outcome, text, resolver);
  }
  // The coroutine waiting on this one resumes inline, here, when this is the last of its waits
  // to end, provided all of them ended on this thread, each after a suspension of its own: then
  // every step by which Asio counts their ends (a parallel group's, co_spawn's completion; a ||
  // winner cancels the others before it counts its own end) runs on this thread, in that order.
  // Otherwise Asio may resume it on another thread, and it is not entered here (its resumption
  // is not recorded).
  AwaitableThreadState& state = t_awaitables;
  if (CoroutineRecord* waiter = waiter_) {
    const AwaitableThreadState* first = nullptr;
    if ((!waiter->children_ended_on_.compare_exchange_strong(first, &state, std::memory_order_relaxed) &&
         first != &state) ||
        state.launched == this)
      waiter->children_elsewhere_.store(true, std::memory_order_relaxed);
    if (waiter->children_pending_.fetch_sub(1, std::memory_order_acq_rel) == 1 &&
        !waiter->children_elsewhere_.load(std::memory_order_relaxed)) {
      waiter->enter();
      return;
    }
  }
  // co_spawn's call of its completion handler is its work (not when a waiting coroutine may
  // resume inline next: that one's code is no other coroutine's).
  if (!state.running && !waiter_) exchange_current_task(task_);
}

#if defined(__cpp_impl_coroutine)
// The coroutine co_spawn runs, as traced: the awaitable `inner` (the coroutine the user spawned)
// awaited inside a coroutine of Asio's own kind, which sees its first run and its end, with the
// exception that ended it. An exception of type SystemError carrying operation_aborted (a
// cancellation) resolves it cancelled, any other failed; it is rethrown unchanged.
template <typename SystemError, typename Awaitable>
Awaitable traced_coroutine(Awaitable inner, CoroutineRecord& record) {
  record.enter();
  struct Ending {
    CoroutineRecord& record;
    bool ended = false;
    void operator()(TaskOutcome outcome, std::string_view text) noexcept {
      ended = true;
      record.end(outcome, text);
    }
    ~Ending() {
      if (!ended) record.abandon();
    }
  } ending{record};
  try {
    if constexpr (std::is_void_v<typename Awaitable::value_type>) {
      co_await std::move(inner);
      ending(TaskOutcome::ok, {});
    } else {
      auto value = co_await std::move(inner);
      ending(TaskOutcome::ok, {});
      co_return value;
    }
  } catch (const SystemError& error) {
    ending(is_operation_aborted(error.code()) ? TaskOutcome::cancelled : TaskOutcome::failed, error.what());
    throw;
  } catch (const std::exception& error) {
    ending(TaskOutcome::failed, error.what());
    throw;
  } catch (...) {
    ending(TaskOutcome::failed, "an exception not derived from std::exception");
    throw;
  }
}
#endif

// Asio's composed operations (async_read, async_connect...) name themselves with a bare
// identifier; a coroutine's suspension carries its use_awaitable token's source location (a
// function's signature), or none.
inline bool is_composed_operation(const char* function) noexcept {
  return function && std::strncmp(function, "async_", 6) == 0 && !std::strchr(function, '(');
}

// co_spawn launching a coroutine: Asio names the location "co_spawn_entry_point"; Boost 1.74
// does for coroutines of no value, and gives the source location of its entry point (a
// signature) for the others.
inline bool is_co_spawn_launch(const char* function) noexcept {
  return function && (std::strcmp(function, "co_spawn_entry_point") == 0 ||
                      (std::strchr(function, '(') && std::strstr(function, "::co_spawn_entry_point(")));
}

inline void Location::begin_coroutine_moment() noexcept {
  AwaitableThreadState& state = t_awaitables;
  if (is_co_spawn_launch(function_)) {
    saved_ = state;
    if (CoroutineRecord* coroutine = std::exchange(state.launching, nullptr)) {
      moment_ = Moment::launch;
      coroutine->launched_by(state.suspending);
      state.entry = coroutine;
      state.launched = coroutine;
    } else {
      // A coroutine co_spawn runs from a function (co_spawn(ex, f, token)) is not traced: hide
      // the traced ones below it from what it does.
      moment_ = Moment::untraced_launch;
      state.running = nullptr;
      state.entry = nullptr;
      state.launched = nullptr;
    }
    state.suspending = nullptr;
    return;
  }
  if (!state.running || is_composed_operation(function_)) return;
  moment_ = Moment::suspension;
  saved_.suspending = state.suspending;
  state.suspending = state.running;
  state.running->expect_children();
}

// The coroutine that suspended is not touched here: its operation may already have completed
// on another thread.
inline void Location::end_coroutine_moment() noexcept {
  AwaitableThreadState& state = t_awaitables;
  state.suspending = saved_.suspending;
  if (moment_ == Moment::suspension) return;
  state.entry = saved_.entry;
  state.launched = saved_.launched;
  if (moment_ == Moment::untraced_launch) state.running = saved_.running;
}

inline void record_operation(TrackedHandler& handler, const char* object_type, const char* op_name) {
#ifndef CHRONICLE_DISABLE
  if (detail::ThreadWriter* writer = detail::task_writer()) [[unlikely]] {
    const uint32_t name_id = detail::task_name_from_operation(object_type, op_name, Location::current_function());
    handler.chronicle_task_id_ =
        detail::record_new_task_with_context(*writer, kind_of(object_type), name_id, handler.chronicle_context_);
    return;
  }
#else
  (void)object_type, (void)op_name;
#endif
  detail::carry_context(handler.chronicle_context_);
}

template <typename Context>
inline void creation(Context& /*context*/, TrackedHandler& handler, const char* object_type, void* /*object*/,
                     std::uintmax_t /*native_handle*/, const char* op_name) {
  AwaitableThreadState& state = t_awaitables;
  if (state.entry) [[unlikely]] {
    // co_spawn's hop onto the coroutine's executor: the coroutine's queueing, not a task.
    handler.chronicle_resumes_ = std::exchange(state.entry, nullptr);
    return;
  }
  record_operation(handler, object_type, op_name);
  if (CoroutineRecord* coroutine = state.suspending) [[unlikely]] {
    state.suspending = nullptr;
    coroutine->suspends_on(handler);
  }
}

template <typename Context>
inline void operation(Context& /*context*/, const char* object_type, void* /*object*/, std::uintmax_t /*native_handle*/,
                      const char* op_name) {
#ifndef CHRONICLE_DISABLE
  detail::ThreadWriter* writer = detail::task_writer();
  if (!writer) [[likely]]
    return;
  const uint32_t name_id = detail::task_name_from_operation(object_type, op_name, nullptr);
  const format::NamePayload payload{name_id};
  detail::emit_fixed(*writer, format::EventId::instant, &payload, sizeof payload);
#else
  (void)object_type, (void)op_name;
#endif
}

// One handler's completion: constructed when Asio is about to invoke (or destroy) it. While the
// handler runs, its task is the thread's current one and its context the one in scope, whether
// or not a session records it (contexts propagate with none). A handler that resumes a traced
// coroutine (CoroutineRecord) runs for no time itself: the coroutine runs instead.
class Completion {
 public:
  explicit Completion(const TrackedHandler& handler) noexcept
      : task_(handler.chronicle_task_id_), context_(handler.chronicle_context_), resumes_(handler.chronicle_resumes_) {}
  ~Completion() {
    if (!invoked_) {
      if (task_ != 0) resolve_task(task_, TaskOutcome::cancelled, "destroyed without being invoked", 0);
    } else if (resumes_) {
      leave_coroutines();  // the handler threw
    } else if (running_) {
      end_run();  // the handler threw
    }
  }
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  void invocation_begin() { begin(TaskOutcome::ok, {}); }

  // (ec), (ec, bytes_transferred), (ec, signal_number), (ec, const char*): only the error
  // matters here.
  template <typename ErrorCode, typename... Rest>
  void invocation_begin(const ErrorCode& error, const Rest&...) {
    if (!error || task_ == 0 || !active()) [[likely]] {
      begin(TaskOutcome::ok, {});  // with task 0 nothing is recorded: the outcome is not used
      return;
    }
    const std::string text = error.message();
    begin(is_operation_aborted(error) ? TaskOutcome::cancelled : TaskOutcome::failed, text);
  }

  void invocation_end() {
    if (resumes_)
      leave_coroutines();
    else if (running_)
      end_run();
  }

 private:
  void begin(TaskOutcome outcome, std::string_view text) {
    invoked_ = true;
    if (resumes_) [[unlikely]] {
      resume(outcome, text);
      return;
    }
    if (task_ != 0) record_begin(outcome, text);
    previous_task_ = exchange_current_task(task_);
    previous_context_ = detail::exchange_context_slot(&context_);
    running_ = true;
  }
  void record_begin([[maybe_unused]] TaskOutcome outcome, [[maybe_unused]] std::string_view text) {
#ifndef CHRONICLE_DISABLE
    if (text.empty()) {
      // The resolution and the run's beginning are one instant: one clock read.
      EventBatch batch;
      batch.invoke(task_, current_task(), outcome);
    } else {
      resolve_task(task_, outcome, text);
      begin_task_run(task_);
    }
#endif
  }
  // The operation resolves and its handler's run is empty; the coroutine's run begins, at the
  // same instant when no traced coroutine is on this thread's stack (the usual case).
  void resume(TaskOutcome outcome, std::string_view text) {
    below_ = t_awaitables.running;
    previous_task_ = current_task();
    bool run_begin_recorded = false;
#ifndef CHRONICLE_DISABLE
    if (!text.empty()) resolve_task(task_, outcome, text);
    EventBatch batch;
    if (text.empty())
      batch.invoke(task_, current_task(), outcome);
    else
      batch.task_event(format::EventId::task_run_begin, task_);
    batch.task_event(format::EventId::task_run_end, task_);
    if (!below_) {
      batch.task_event(format::EventId::task_run_begin, resumes_->task());
      run_begin_recorded = batch.active();
    }
#endif
    resumes_->enter(run_begin_recorded);
  }
  // The coroutine it resumed, and whatever it ran inline, have suspended or ended by now, or
  // are left here.
  void leave_coroutines() noexcept {
    while (t_awaitables.running && t_awaitables.running != below_) t_awaitables.running->leave();
    exchange_current_task(previous_task_);
    resumes_ = nullptr;
  }
  void end_run() {
    end_task_run(task_);
    exchange_current_task(previous_task_);
    detail::exchange_context_slot(previous_context_);
    running_ = false;
  }

  TaskId task_;
  detail::ContextSlot context_;
  CoroutineRecord* resumes_;
  CoroutineRecord* below_ = nullptr;
  detail::ContextSlot* previous_context_ = nullptr;
  TaskId previous_task_ = 0;
  bool invoked_ = false;
  bool running_ = false;
};

}  // namespace chronicle::asio_tracking
