// chronicle::task<T>: a lazy C++20 coroutine that records itself as a task.
//
//   chronicle::task<int> read_block(int n) {       // created: named "read_block" (its function)
//     co_await pool.schedule();                     // runs on: the pool's threads from here on
//     co_return n * 2;                              // resolved: ok
//   }
//   chronicle::task<int> handle() {
//     int a = co_await read_block(1);               // waits on: read_block's task
//     int b = co_await read_block(2).named("second read");  // an explicit label
//     co_return a + b;                              // an escaping exception: resolved failed
//   }
//   int total = chronicle::sync_wait(handle());      // waits on: handle's task (see sync_wait)
//
// Every co_await in a task<T> ends the task's run on this thread and begins another where it
// resumes, so its run intervals show where and how long it really ran. The thread's current
// task is the coroutine while it runs: the spans, notes, counters and tasks it makes are its.
#pragma once

#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>
#include "chronicle/detail/source_location.hpp"

#include "chronicle/detail/context_state.hpp"
#include "chronicle/detail/timer_thread.hpp"
#include "chronicle/task.hpp"

// Whether this translation unit has exceptions (-fno-exceptions: see "Without exceptions" in
// docs/tasks.md).
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define CHRONICLE_CORO_EXCEPTIONS 1
#else
#define CHRONICLE_CORO_EXCEPTIONS 0
#endif

namespace chronicle {

template <typename T = void>
class task;

// What a cancelled wait throws in the task (a cancelled sleep_for, a task whose stop was
// requested); a task it escapes from resolves `cancelled`, not `failed`.
class operation_cancelled : public std::exception {
 public:
  const char* what() const noexcept override { return "cancelled"; }
};

// `co_await chronicle::current_stop_token()` in a task<T> gives the task's std::stop_token.
struct current_stop_token_tag {};
inline current_stop_token_tag current_stop_token() noexcept {
  return {};
}

namespace detail {

class TaskPromiseBase;
struct TaskAccess;

// Told when a task started by a combinator or a scope ends (instead of resuming an awaiting
// coroutine); returns the coroutine to resume next.
class TaskEndHook {
 public:
  virtual std::coroutine_handle<> task_ended(TaskPromiseBase& task, std::coroutine_handle<> frame) noexcept = 0;
  // The task that requested the cancellation of the hook's tasks (0: none yet).
  virtual TaskId canceller() const noexcept = 0;

 protected:
  ~TaskEndHook() = default;
};

// The awaiter an awaitable gives: its operator co_await, member or free, or itself.
template <typename Awaitable>
decltype(auto) awaiter_of(Awaitable&& awaitable) {
  if constexpr (requires { std::forward<Awaitable>(awaitable).operator co_await(); })
    return std::forward<Awaitable>(awaitable).operator co_await();
  else if constexpr (requires { operator co_await(std::forward<Awaitable>(awaitable)); })
    return operator co_await(std::forward<Awaitable>(awaitable));
  else
    return std::forward<Awaitable>(awaitable);
}

#if CHRONICLE_CORO_EXCEPTIONS
inline std::string exception_text(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& caught) {
    return caught.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

inline bool is_cancellation(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const operation_cancelled&) {
    return true;
  } catch (...) {
    return false;
  }
}
#endif

// Without exceptions a cancelled wait cannot unwind its task: the task is recorded cancelled, the
// reason goes to stderr, and the process terminates (docs/tasks.md, "Without exceptions").
[[noreturn]] inline void terminate_cancelled_without_exceptions(TaskId task) noexcept {
  resolve_task(task, TaskOutcome::cancelled, "cancelled; built without exceptions: terminating", task);
  std::fputs("chronicle: a task was cancelled in code built without exceptions: terminating\n", stderr);
  std::terminate();
}

class TaskPromiseBase {
 public:
  // The coroutine's own source location names it (GCC gives the coroutine function's).
  explicit TaskPromiseBase(source_location where) {
#ifndef CHRONICLE_DISABLE
    if (detail::ThreadWriter* writer = detail::task_writer()) [[unlikely]] {
      id_ = detail::record_new_task_with_context(*writer, TaskKind::coroutine, detail::task_name_id(TaskName(where)),
                                                 context_);
      return;
    }
#else
    (void)where;
#endif
    detail::carry_context(context_);
  }

  TaskId id() const {
    return id_;
  }

  // A run begins where the coroutine resumes and ends where it suspends. The thread's current
  // task is restored at the end, so runs nest correctly through symmetric transfer. When the
  // task that handed control over already recorded this run's beginning (at the same instant
  // as its own events), only the current task changes here.
  void begin_run() {
    previous_current_ = exchange_current_task(id_);
    previous_context_ = detail::exchange_context_slot(&context_);
    if (!std::exchange(run_begin_recorded_, false)) begin_task_run(id_);
  }
  void end_run() {
    end_task_run(id_);
    exchange_current_task(previous_current_);
    detail::exchange_context_slot(previous_context_);
  }

  // The task suspends through an awaiter that is not a task<T> (a pool's hop, a sleep, a
  // combinator, a bridge to Asio or any executor). For the awaiter's await_suspend the run has
  // ended, recorded before the hand-off (once the awaiter has the handle, another thread may
  // resume the coroutine, and free its frame, at any moment), but the task stays the thread's
  // current one with its trace context: work the awaiter starts is the task's, and the task waits
  // on it (detail::record_new_task). A stack object, so nothing of the frame is read after the
  // hand-off.
  class Suspension {
   public:
    explicit Suspension(TaskPromiseBase& task);
    ~Suspension() { close(); }
    Suspension(const Suspension&) = delete;
    Suspension& operator=(const Suspension&) = delete;
    // Gives the thread back its task and context from before the run (once).
    void close();

   private:
    TaskId previous_current_;
    detail::ContextSlot* previous_context_;
    detail::ContextSlot context_;  // a copy of the task's: its frame may be freed after the hand-off
    [[maybe_unused]] TaskId previous_suspending_ = 0;
    [[maybe_unused]] uint64_t previous_suspended_at_ = 0;
    bool open_ = true;
  };

  // Whether work started in an awaiter's await_suspend has anything to take from this task: its
  // id (traced) or its trace context (carried with or without a session).
  bool has_work_to_carry() const {
    return id_ != 0 || context_.set;
  }

  // This task awaits `child`, which starts now on this thread: the wait, this run's end and
  // the child's run's beginning are one instant.
  void hand_over_to(TaskPromiseBase& child) {
#ifndef CHRONICLE_DISABLE
    detail::TaskEventBatch batch;
    batch.hand_over(id_, child.id_);
    child.run_begin_recorded_ = batch.active() && child.id_ != 0;
#endif
    child.awaiting_ = this;
    exchange_current_task(previous_current_);
    detail::exchange_context_slot(previous_context_);
  }

#ifndef CHRONICLE_DISABLE
  // `waiter` blocks its thread until this task ends (sync_wait), and this task starts now on
  // that thread: the wait and this task's first run's beginning are one instant.
  void start_awaited_by(TaskId waiter, detail::TaskEventBatch& batch) {
    batch.wait(waiter, id_);
    batch.task_event(format::EventId::task_run_begin, id_);
    run_begin_recorded_ = batch.active() && id_ != 0;
  }
#endif

  // The coroutine is done: its success (a failure was recorded as it escaped), its run's end,
  // and the awaiting task's resumption are one instant.
  void finish() noexcept {
#ifndef CHRONICLE_DISABLE
    detail::TaskEventBatch batch;
    if (succeeded_ && awaiting_) {
      batch.return_to(id_, awaiting_->id_);
    } else {
      if (succeeded_) batch.resolve_quiet(id_, id_, TaskOutcome::ok);
      batch.task_event(format::EventId::task_run_end, id_);
      if (awaiting_) batch.task_event(format::EventId::task_run_begin, awaiting_->id_);
    }
    if (awaiting_) awaiting_->run_begin_recorded_ = batch.active() && awaiting_->id_ != 0;
#endif
    exchange_current_task(previous_current_);
    detail::exchange_context_slot(previous_context_);
  }

  struct InitialAwaiter {
    TaskPromiseBase& promise;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<>) const noexcept {}
    void await_resume() const noexcept { promise.begin_run(); }
  };
  InitialAwaiter initial_suspend() noexcept {
    return {*this};
  }

  struct FinalAwaiter {
    bool await_ready() const noexcept { return false; }
    template <typename Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> handle) const noexcept {
      TaskPromiseBase& promise = handle.promise();
      promise.finish();
      return promise.next_after_end(handle);
    }
    void await_resume() const noexcept {}
  };
  FinalAwaiter final_suspend() noexcept {
    return {};
  }

  // An escaping operation_cancelled resolves the task `cancelled`, by the task that asked for the
  // cancellation when a combinator or scope knows it; any other exception, `failed`.
  void unhandled_exception() noexcept {
#if CHRONICLE_CORO_EXCEPTIONS
    error_ = std::current_exception();
    cancelled_ = is_cancellation(error_);  // untraced too: combinators and scopes read it
    if (id_ == 0) return;
    if (cancelled_) {
      const TaskId canceller = end_hook_ ? end_hook_->canceller() : 0;
      resolve_task(id_, TaskOutcome::cancelled, "cancelled", canceller != 0 ? canceller : id_);
    } else {
      resolve_task(id_, TaskOutcome::failed, exception_text(error_), id_);
    }
#else
    std::terminate();  // nothing can throw without exceptions
#endif
  }

  // Wraps every co_await in the coroutine so that suspending ends the run and resuming begins
  // one, and awaiting another task<T> records the wait.
  template <typename Awaitable>
  auto await_transform(Awaitable&& awaitable);

  struct StopTokenAwaiter {
    std::stop_token token;
    bool await_ready() const noexcept { return true; }
    void await_suspend(std::coroutine_handle<>) const noexcept {}
    std::stop_token await_resume() const noexcept { return token; }
  };
  // `co_await current_stop_token()`: no suspension, so no run ends.
  StopTokenAwaiter await_transform(current_stop_token_tag) noexcept {
    return {stop_token_};
  }

  void set_continuation(std::coroutine_handle<> continuation) {
    continuation_ = continuation;
  }
  void rethrow_if_failed() const {
#if CHRONICLE_CORO_EXCEPTIONS
    if (error_) std::rethrow_exception(error_);
#endif
  }
  bool failed() const {
    return error_ != nullptr;
  }
  bool cancelled() const {
    return cancelled_;
  }
  const std::exception_ptr& error() const {
    return error_;
  }

  const std::stop_token& stop_token() const {
    return stop_token_;
  }
  // A task awaited by a task inherits the awaiting task's token (cancelling a parent cancels its
  // children), unless a combinator gave it one already.
  void inherit_stop_token(const std::stop_token& token) {
    if (!stop_token_.stop_possible()) stop_token_ = token;
  }
  // The task is started by a combinator or scope, which `hook` tells of its end.
  void start_under(TaskEndHook& hook, std::stop_token token) {
    end_hook_ = &hook;
    stop_token_ = std::move(token);
  }
  // After the task's end was recorded: what runs next on this thread.
  std::coroutine_handle<> next_after_end(std::coroutine_handle<> frame) noexcept {
    if (end_hook_) return end_hook_->task_ended(*this, frame);
    return continuation_ ? continuation_ : std::noop_coroutine();
  }

 protected:
  // Recorded when the coroutine finishes (finish()), with its run's end.
  void resolved_ok() {
    succeeded_ = true;
  }

 private:
  TaskId id_ = 0;
  TaskId previous_current_ = 0;
  detail::ContextSlot context_;  // the trace context the task carries (chronicle/context.hpp)
  detail::ContextSlot* previous_context_ = nullptr;
  std::coroutine_handle<> continuation_;
  std::exception_ptr error_;
  TaskPromiseBase* awaiting_ = nullptr;  // the task<T> that awaits this one, if a task<T> does
  TaskEndHook* end_hook_ = nullptr;      // the combinator or scope that started this task, if one did
  std::stop_token stop_token_;
  bool run_begin_recorded_ = false;
  bool succeeded_ = false;
  bool cancelled_ = false;
};

template <typename Inner>
class TracedAwaiter {
 public:
  TracedAwaiter(TaskPromiseBase& promise, Inner&& inner) : promise_(promise), inner_(std::forward<Inner>(inner)) {}

  bool await_ready() { return inner_.await_ready(); }

  template <typename Promise>
  auto await_suspend(std::coroutine_handle<Promise> handle) {
    // Ended before the hand-off: once inner_ has the handle, another thread may resume the
    // coroutine (and destroy this awaiter with its frame) at any moment.
    // An awaiter that needs to know its task (a combinator: its id and stop token; a sleep: the
    // stop token that cancels it) takes it here.
    if constexpr (requires { inner_.bind_awaiting(promise_); }) inner_.bind_awaiting(promise_);
    if constexpr (requires { inner_.awaited_promise(); }) {
      inner_.awaited_promise().inherit_stop_token(promise_.stop_token());
      promise_.hand_over_to(inner_.awaited_promise());
#if CHRONICLE_CORO_EXCEPTIONS
      try {
        return inner_.await_suspend(handle);
      } catch (...) {
        promise_.begin_run();  // still running here: the exception goes on in the coroutine
        throw;
      }
#else
      return inner_.await_suspend(handle);
#endif
    } else if (promise_.has_work_to_carry()) {
      TaskPromiseBase::Suspension suspension(promise_);
#if CHRONICLE_CORO_EXCEPTIONS
      try {
        return inner_.await_suspend(handle);
      } catch (...) {
        suspension.close();
        promise_.begin_run();
        throw;
      }
#else
      return inner_.await_suspend(handle);
#endif
    } else {
      promise_.end_run();  // nothing to record or carry: the cost of an untraced co_await as it was
#if CHRONICLE_CORO_EXCEPTIONS
      try {
        return inner_.await_suspend(handle);
      } catch (...) {
        promise_.begin_run();  // still running here: the exception goes on in the coroutine
        throw;
      }
#else
      return inner_.await_suspend(handle);
#endif
    }
  }

  decltype(auto) await_resume() {
    promise_.begin_run();
    return inner_.await_resume();
  }

 private:
  TaskPromiseBase& promise_;
  Inner inner_;  // a reference when the awaitable is an lvalue awaiter, a value otherwise
};

template <typename Awaitable>
auto TaskPromiseBase::await_transform(Awaitable&& awaitable) {
  using Inner = decltype(awaiter_of(std::forward<Awaitable>(awaitable)));
  return TracedAwaiter<Inner>(*this, awaiter_of(std::forward<Awaitable>(awaitable)));
}

inline TaskPromiseBase::Suspension::Suspension(TaskPromiseBase& task)
    : previous_current_(task.previous_current_), previous_context_(task.previous_context_), context_(task.context_) {
  detail::exchange_context_slot(&context_);
#ifndef CHRONICLE_DISABLE
  previous_suspending_ = std::exchange(t_tasks.suspending, task.id_);
  previous_suspended_at_ = std::exchange(t_tasks.suspended_at, task.id_ != 0 ? emit_task_run_end_timed(task.id_) : 0);
#endif
}

inline void TaskPromiseBase::Suspension::close() {
  if (!std::exchange(open_, false)) return;
  exchange_current_task(previous_current_);
  detail::exchange_context_slot(previous_context_);
#ifndef CHRONICLE_DISABLE
  t_tasks.suspending = previous_suspending_;
  t_tasks.suspended_at = previous_suspended_at_;
#endif
}

template <typename T>
class TaskPromise : public TaskPromiseBase {
 public:
  explicit TaskPromise(source_location where = source_location::current()) : TaskPromiseBase(where) {}
  task<T> get_return_object() noexcept;
  template <typename Value>
  void return_value(Value&& value) {
    value_.emplace(std::forward<Value>(value));
    resolved_ok();
  }
  T take() {
    rethrow_if_failed();
    return std::move(*value_);
  }

 private:
  std::optional<T> value_;
};

template <>
class TaskPromise<void> : public TaskPromiseBase {
 public:
  explicit TaskPromise(source_location where = source_location::current()) : TaskPromiseBase(where) {}
  task<void> get_return_object() noexcept;
  void return_void() { resolved_ok(); }
  void take() { rethrow_if_failed(); }
};

}  // namespace detail

// Lazy: the coroutine starts when awaited (or given to sync_wait), and runs until its first
// suspension on the awaiting thread.
template <typename T>
class [[nodiscard]] task {
 public:
  using promise_type = detail::TaskPromise<T>;

  task(task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  task& operator=(task&& other) noexcept {
    if (this != &other) {
      if (handle_) handle_.destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  ~task() {
    if (handle_) handle_.destroy();
  }

  // The task's id in the trace (0 when not tracing).
  TaskId id() const { return handle_ ? handle_.promise().id() : 0; }

  // Gives the task a label ("B.read") in place of its function's name.
  task&& named(std::string_view label) && {
    label_task(id(), label);
    return std::move(*this);
  }

  class Awaiter {
   public:
    explicit Awaiter(std::coroutine_handle<promise_type> handle) : handle_(handle) {}
    bool await_ready() const noexcept { return !handle_; }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
      handle_.promise().set_continuation(awaiting);
      return handle_;  // start it: symmetric transfer, no stack growth
    }
    T await_resume() { return handle_.promise().take(); }
    detail::TaskPromiseBase& awaited_promise() const { return handle_.promise(); }

   private:
    std::coroutine_handle<promise_type> handle_;
  };
  // The task is consumed by being awaited: its result is taken from it.
  Awaiter operator co_await() && noexcept { return Awaiter(handle_); }

 private:
  friend promise_type;
  explicit task(std::coroutine_handle<promise_type> handle) : handle_(handle) {}
  std::coroutine_handle<promise_type> handle_;

  template <typename U>
  friend U sync_wait(task<U> work);  // records the wait on the task it starts
  friend struct detail::TaskAccess;  // combinators and scopes start tasks and take their results
};

template <typename T>
task<T> detail::TaskPromise<T>::get_return_object() noexcept {
  return task<T>(std::coroutine_handle<TaskPromise<T>>::from_promise(*this));
}

inline task<void> detail::TaskPromise<void>::get_return_object() noexcept {
  return task<void>(std::coroutine_handle<TaskPromise<void>>::from_promise(*this));
}

// The resumption of a suspended coroutine as a task of its own (kind `handler`), for an awaitable
// that hands the coroutine to an executor chronicle does not know (a queue, a thread, a library's
// callback): made in the awaitable's await_suspend, it is created by the awaiting task, which
// waits on it; called where the coroutine resumes, it is resolved there (by the task running
// there, if any) and resumes the coroutine. Named by where it is made, or by `name`.
//
//   void await_suspend(std::coroutine_handle<> coroutine) {
//     loop.push(chronicle::resumption(coroutine));   // rather than [coroutine] { coroutine.resume(); }
//   }
//
// Copyable, so that it fits a std::function; call one copy once.
class resumption {
 public:
  explicit resumption(std::coroutine_handle<> coroutine, TaskName name = {})
      : coroutine_(coroutine), task_(create_task(TaskKind::handler, name)) {}

  void operator()() const {
#ifndef CHRONICLE_DISABLE
    if (task_ != 0) [[unlikely]]
      record_run();
#endif
    coroutine_.resume();
  }

  // The task in the trace (0 when not tracing).
  TaskId id() const noexcept {
    return task_;
  }

 private:
  friend class thread_pool;
  resumption(std::coroutine_handle<> coroutine, TaskId task) noexcept : coroutine_(coroutine), task_(task) {}

  // Resolved, with a run of no length, at the instant the coroutine resumes: the time since its
  // creation reads as queued (before its first run), and the resumed coroutine's run is its own.
  void record_run() const {
#ifndef CHRONICLE_DISABLE
    detail::TaskEventBatch batch;
    batch.invoke(task_, current_task(), TaskOutcome::ok);
    batch.task_event(format::EventId::task_run_end, task_);
#endif
  }

  std::coroutine_handle<> coroutine_;
  TaskId task_;
};

// A fixed set of threads that resume coroutines: `co_await pool.schedule()` moves the awaiting
// coroutine onto one of them. Its threads mark their idle time as loop suspend/resume.
class thread_pool {
 public:
  explicit thread_pool(unsigned threads, std::string name = "pool") : timer_(name + " timer") {
    workers_.reserve(threads);
    for (unsigned i = 0; i < threads; ++i)
      workers_.emplace_back([this, thread_name = name + "-" + std::to_string(i)] { work(thread_name); });
  }
  // Resumes the tasks still sleeping (they throw operation_cancelled), runs what is queued, then
  // joins the threads.
  ~thread_pool() {
    timer_.stop();
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  // Resumes `handle` on one of the threads: a task "thread_pool.post" (a chronicle::resumption).
  void post(std::coroutine_handle<> handle) { post(resumption(handle, "thread_pool.post")); }
  void post(resumption next) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(next);
    }
    wake_.notify_one();
  }

  // The hop is a task "thread_pool.schedule" made by the awaiting task, which waits on it until a
  // thread takes it from the queue: the critical path calls that time queued.
  struct ScheduleAwaiter {
    thread_pool& pool;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> handle) const { pool.post(resumption(handle, "thread_pool.schedule")); }
    void await_resume() const noexcept {}
  };
  ScheduleAwaiter schedule() { return {*this}; }

  class SleepAwaiter;
  // `co_await pool.schedule_after(d)`: the task resumes on one of the pool's threads once `d` has
  // passed (the pool's timer thread, started on first use, posts it). If the task's stop is
  // requested meanwhile, it resumes at once and the co_await throws operation_cancelled.
  SleepAwaiter schedule_after(std::chrono::nanoseconds delay);
  SleepAwaiter sleep_for(std::chrono::nanoseconds delay);

 private:
  class SleepEntry;
  static resumption untraced(std::coroutine_handle<> handle) noexcept { return resumption(handle, TaskId{0}); }
  void work(const std::string& thread_name) {
    set_thread_name(thread_name);
    std::unique_lock lock(mutex_);
    while (true) {
      if (queue_.empty()) {
        if (stopping_) return;
        LoopIdleScope idle;
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        continue;
      }
      const resumption next = queue_.front();
      queue_.pop_front();
      lock.unlock();
      next();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<resumption> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
  detail::TimerThread timer_;
};

// A sleeping task's timer entry. Exactly one of the deadline, a cancellation or the timer's
// shutdown settles it; while the sleeper is still being armed (`arming`) settling only marks the
// entry, and await_suspend then does not suspend; once it waits, the one that settles it posts it.
//
// The sleep is a task of kind `timer` made by the sleeping task, which waits on it: resolved ok by
// itself when the deadline passes, cancelled (by no task) otherwise. The sleeper's resumption
// needs no task of its own: the time from the timer's end to the sleeper's next run is queued.
class thread_pool::SleepEntry final : public detail::TimerEntry {
 public:
  SleepEntry(Clock::time_point deadline, thread_pool& pool, std::coroutine_handle<> sleeper, TaskId timer)
      : TimerEntry(deadline), pool_(pool), sleeper_(sleeper), timer_(timer) {}
  void fire() noexcept override { settle(State::fired); }
  void abandon() noexcept override { settle(State::cancelled); }
  void cancel() noexcept { settle(State::cancelled); }
  // True when the sleeper must suspend: nothing settled the entry while it was armed.
  bool finish_arming() {
    std::lock_guard lock(mutex_);
    if (state_ != State::arming) return false;
    state_ = State::waiting;
    return true;
  }
  bool cancelled() {
    std::lock_guard lock(mutex_);
    return state_ == State::cancelled;
  }

 private:
  enum class State : uint8_t { arming, waiting, fired, cancelled };
  // The timer's end is recorded under the lock, before the state changes: a sleeper still being
  // armed goes on as soon as finish_arming() sees the entry settled, and the trace must not show
  // it going on before its timer ended (the critical path would call the sleep "released before
  // it finished").
  void settle(State outcome) noexcept {
    bool post_sleeper = false;
    {
      std::lock_guard lock(mutex_);
      if (state_ != State::arming && state_ != State::waiting) return;
      post_sleeper = state_ == State::waiting;
      if (outcome == State::fired)
        resolve_task(timer_, TaskOutcome::ok, {}, timer_);
      else
        resolve_task(timer_, TaskOutcome::cancelled, {}, 0);
      state_ = outcome;
    }
    if (post_sleeper) pool_.post(untraced(sleeper_));
  }

  std::mutex mutex_;
  State state_ = State::arming;
  thread_pool& pool_;
  std::coroutine_handle<> sleeper_;
  TaskId timer_;
};

class thread_pool::SleepAwaiter {
 public:
  SleepAwaiter(thread_pool& pool, std::chrono::nanoseconds delay, const char* name)
      : pool_(pool), deadline_(detail::TimerEntry::Clock::now() + delay), name_(name) {}
  void bind_awaiting(detail::TaskPromiseBase& task) {
    stop_token_ = task.stop_token();
    task_ = task.id();
  }
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> sleeper) {
    entry_ = std::make_shared<SleepEntry>(deadline_, pool_, sleeper, create_task(TaskKind::timer, name_));
    // Registered before the entry is armed: a stop requested already runs the callback here,
    // and that only marks the entry.
    if (stop_token_.stop_possible()) on_stop_.emplace(stop_token_, CancelSleep{entry_, &pool_.timer_});
    if (!pool_.timer_.arm(entry_)) entry_->cancel();  // the pool is shutting down
    if (entry_->finish_arming()) return true;
    pool_.timer_.disarm(entry_);  // settled while arming: nobody else resumes the sleeper
    return false;
  }
  void await_resume() {
    on_stop_.reset();  // waits for a cancellation running on another thread
    if (!entry_->cancelled()) return;
#if CHRONICLE_CORO_EXCEPTIONS
    throw operation_cancelled();
#else
    detail::terminate_cancelled_without_exceptions(task_);
#endif
  }

 private:
  struct CancelSleep {
    std::shared_ptr<SleepEntry> entry;
    detail::TimerThread* timer;
    void operator()() noexcept {
      timer->disarm(entry);
      entry->cancel();
    }
  };
  thread_pool& pool_;
  detail::TimerEntry::Clock::time_point deadline_;
  const char* name_;
  std::stop_token stop_token_;
  [[maybe_unused]] TaskId task_ = 0;
  std::shared_ptr<SleepEntry> entry_;
  std::optional<std::stop_callback<CancelSleep>> on_stop_;
};

inline thread_pool::SleepAwaiter thread_pool::schedule_after(std::chrono::nanoseconds delay) {
  return SleepAwaiter(*this, delay, "thread_pool.schedule_after");
}
inline thread_pool::SleepAwaiter thread_pool::sleep_for(std::chrono::nanoseconds delay) {
  return SleepAwaiter(*this, delay, "thread_pool.sleep_for");
}

namespace detail {

// Shared between sync_wait and the coroutine that drives the task to its end.
template <typename T>
struct SyncWaitState {
  std::mutex mutex;
  std::condition_variable done_signal;
  bool done = false;
  std::exception_ptr error;
  std::optional<std::conditional_t<std::is_void_v<T>, bool, T>> value;
};

// An untraced coroutine: it only carries the task's end back to the waiting thread.
struct SyncWaitDriver {
  struct promise_type {
    std::mutex* mutex = nullptr;
    std::condition_variable* done_signal = nullptr;
    bool* done = nullptr;
    SyncWaitDriver get_return_object() noexcept {
      return SyncWaitDriver{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct Signal {
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<promise_type> handle) const noexcept {
        promise_type& promise = handle.promise();
        std::condition_variable* done_signal = promise.done_signal;
        std::lock_guard lock(*promise.mutex);
        *promise.done = true;
        // Notified under the lock: the waiter cannot return and free the state before.
        done_signal->notify_one();
      }
      void await_resume() const noexcept {}
    };
    Signal final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }  // the driver catches everything
  };
  std::coroutine_handle<promise_type> handle;
};

template <typename T>
SyncWaitDriver drive(task<T> work, SyncWaitState<T>& state) {
#if CHRONICLE_CORO_EXCEPTIONS
  try {
#endif
    if constexpr (std::is_void_v<T>) {
      co_await std::move(work);
      state.value.emplace(true);
    } else {
      state.value.emplace(co_await std::move(work));
    }
#if CHRONICLE_CORO_EXCEPTIONS
  } catch (...) {
    state.error = std::current_exception();
  }
#endif
}

// The waiter of a sync_wait call. A thread blocked in sync_wait is held by the wait as by a
// blocking read: the task running on it (if any) keeps its run and records that it waits on the
// awaited task, so its critical path goes through that task instead of "running" meanwhile. A
// thread outside any task has no task to wait with, so the call gets one of its own, "sync_wait",
// that runs (holds the thread) for the call and is resolved as the awaited task ends.
class SyncWaitCall {
 public:
  explicit SyncWaitCall([[maybe_unused]] TaskPromiseBase* awaited) {
#ifndef CHRONICLE_DISABLE
    if (!awaited || awaited->id() == 0) return;  // not tracing when it was made: nothing to say
    TaskEventBatch batch;                        // one clock read, the awaited task's run's
    if (!batch.active()) return;
    TaskId waiter = current_task();
    if (waiter == 0) {
      own_ = new_task_id();
      batch.create(own_, 0, TaskKind::handler, task_name_from_literal("sync_wait"));
      batch.task_event(format::EventId::task_run_begin, own_);
      // Current for the call, so the events of the thread while it waits are the call's.
      exchange_current_task(own_);
      waiter = own_;
    }
    awaited->start_awaited_by(waiter, batch);
#endif
  }
  SyncWaitCall(const SyncWaitCall&) = delete;
  SyncWaitCall& operator=(const SyncWaitCall&) = delete;

  // The awaited task ended (with `error`, if it failed): so does the call's own task.
  void finish([[maybe_unused]] const std::exception_ptr& error) {
#ifndef CHRONICLE_DISABLE
    if (own_ == 0) return;
    exchange_current_task(0);
#if CHRONICLE_CORO_EXCEPTIONS
    if (error) {
      resolve_task(own_, TaskOutcome::failed, exception_text(error), own_);
      end_task_run(own_);
      return;
    }
#endif
    TaskEventBatch batch;
    batch.resolve_quiet(own_, own_, TaskOutcome::ok);
    batch.task_event(format::EventId::task_run_end, own_);
#endif
  }

 private:
  [[maybe_unused]] TaskId own_ = 0;  // the call's own task, when the thread ran none (unused when compiled out)
};

}  // namespace detail

// Runs `work` to its end, starting it on this thread, and returns its result (or rethrows).
// The blocked caller waits on `work` in the trace: its current task, or else a task "sync_wait"
// made for the call (detail::SyncWaitCall).
template <typename T>
T sync_wait(task<T> work) {
  detail::SyncWaitState<T> state;
  detail::SyncWaitCall call(work.handle_ ? &work.handle_.promise() : nullptr);
  detail::SyncWaitDriver driver = detail::drive(std::move(work), state);
  auto& promise = driver.handle.promise();
  promise.mutex = &state.mutex;
  promise.done_signal = &state.done_signal;
  promise.done = &state.done;
  driver.handle.resume();
  {
    std::unique_lock lock(state.mutex);
    state.done_signal.wait(lock, [&] { return state.done; });
  }
  driver.handle.destroy();
  call.finish(state.error);
#if CHRONICLE_CORO_EXCEPTIONS
  if (state.error) std::rethrow_exception(state.error);
#endif
  if constexpr (!std::is_void_v<T>) return std::move(*state.value);
}

}  // namespace chronicle

// when_all, when_any, with_timeout, async_scope.
#include "chronicle/combinators.hpp"
