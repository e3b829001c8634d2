// Combinators of chronicle::task<T> (included by chronicle/coro.hpp): when_all, when_any,
// with_timeout and async_scope. Each is a task of its own that waits on the tasks it starts, so the
// trace shows the fan-out with no user call:
//
//   auto [user, orders] = co_await chronicle::when_all(load_user(id), load_orders(id));
//   auto [index, reply] = co_await chronicle::when_any(ask(primary), ask(replica));
//   int price = co_await chronicle::with_timeout(load_price(id), std::chrono::milliseconds(50));
//
// The semantics (failures, cancellation, who resolves what) are in docs/tasks.md, "Combinators,
// scopes and cancellation".
#pragma once

#include <array>
#include <atomic>
#include <cstdio>
#include <memory>
#include <span>
#include <stdexcept>
#include <tuple>
#include <variant>

#include "chronicle/coro.hpp"

namespace chronicle {

// What with_timeout throws when its deadline passed and the task ended cancelled.
class timeout_error : public std::runtime_error {
 public:
  timeout_error() : std::runtime_error("timed out") {}
};

namespace detail {

struct TaskAccess {
  template <typename T>
  static TaskPromise<T>& promise(task<T>& work) {
    return work.handle_.promise();
  }
  template <typename T>
  static std::coroutine_handle<TaskPromise<T>> release(task<T>& work) {
    return std::exchange(work.handle_, {});
  }
  template <typename T>
  static std::coroutine_handle<> frame(task<T>& work) {
    return work.handle_;
  }
};

// A combinator's result for a task<void>: nothing, but a value a tuple can hold.
template <typename T>
using result_of_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <typename T>
result_of_t<T> take_result(task<T>& work) {
  if constexpr (std::is_void_v<T>) {
    TaskAccess::promise(work).take();
    return {};
  } else {
    return TaskAccess::promise(work).take();
  }
}

// A task a combinator starts: its promise and its frame.
struct StartedTask {
  TaskPromiseBase* promise;
  std::coroutine_handle<> frame;
};

template <typename T>
StartedTask started_task(task<T>& work) {
  return {&TaskAccess::promise(work), TaskAccess::frame(work)};
}

// Passes a stop request of the awaiting task on to the tasks of a group or scope.
template <typename Group>
struct ForwardStop {
  Group* group;
  TaskId by;
  void operator()() noexcept { group->cancel(by); }
};

// The tasks one combinator started and waits for. Each starts on the combinator's thread and runs
// there until its first suspension, then wherever it schedules itself; the combinator resumes
// where the last one ends. `pending_` counts the running tasks plus the starter's own share, so the
// combinator cannot resume before every task was started.
class TaskGroup final : public TaskEndHook {
 public:
  enum class Policy : uint8_t {
    wait_for_all,              // with_timeout: its timer cancels, not the task's end
    cancel_rest_on_failure,    // when_all
    cancel_rest_on_first_end,  // when_any
  };
  explicit TaskGroup(Policy policy) : policy_(policy) {}
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  // The combinator's task waits on each task, and stopping it stops them.
  void bind_awaiting(TaskPromiseBase& combinator) {
    combinator_ = combinator.id();
    combinator_stop_ = combinator.stop_token();
  }
  TaskId combinator() const { return combinator_; }

  // False when every task ended already: the combinator goes on without suspending.
  bool start(std::span<const StartedTask> tasks, std::coroutine_handle<> combinator) {
    combinator_frame_ = combinator;
    pending_.store(tasks.size() + 1, std::memory_order_relaxed);
    if (combinator_stop_.stop_possible())
      forward_stop_.emplace(combinator_stop_, ForwardStop<TaskGroup>{this, combinator_});
    for (const StartedTask& started : tasks) {
      started.promise->start_under(*this, stop_source_.get_token());
#ifndef CHRONICLE_DISABLE
      {
        TaskEventBatch batch;  // the wait and the task's first run begin at one instant
        started.promise->start_awaited_by(combinator_, batch);
      }
#endif
      started.frame.resume();
    }
    return pending_.fetch_sub(1, std::memory_order_acq_rel) != 1;
  }

  // On the ending task's thread, its end recorded. Nothing of the group is touched after the
  // last decrement: the combinator may resume (and free the group) at once.
  std::coroutine_handle<> task_ended(TaskPromiseBase& ended, std::coroutine_handle<>) noexcept override {
    TaskPromiseBase* none = nullptr;
    const bool first_to_end = first_ended_.compare_exchange_strong(none, &ended, std::memory_order_acq_rel);
    if (ended.failed()) {
      none = nullptr;
      first_failed_.compare_exchange_strong(none, &ended, std::memory_order_acq_rel);
    }
    if ((policy_ == Policy::cancel_rest_on_first_end && first_to_end) ||
        (policy_ == Policy::cancel_rest_on_failure && ended.failed()))
      cancel(ended.id());
    const std::coroutine_handle<> combinator = combinator_frame_;
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) return combinator;
    return std::noop_coroutine();
  }

  TaskId canceller() const noexcept override {
    return canceller_.load(std::memory_order_acquire);
  }

  // Requests the stop of every task of the group; `by` is recorded as the resolver of those that
  // end cancelled (the first request wins).
  void cancel(TaskId by) noexcept {
    TaskId none = 0;
    canceller_.compare_exchange_strong(none, by, std::memory_order_acq_rel);
    stop_source_.request_stop();
  }

  // The combinator resumed: its stop no longer concerns the group (waits for a forwarding that
  // runs on another thread now).
  void end_forwarding() {
    forward_stop_.reset();
  }

  TaskPromiseBase* first_ended() const {
    return first_ended_.load(std::memory_order_acquire);
  }
  void rethrow_first_failure() const {
    if (TaskPromiseBase* failed = first_failed_.load(std::memory_order_acquire)) failed->rethrow_if_failed();
  }

 private:
  Policy policy_;
  TaskId combinator_ = 0;
  std::stop_token combinator_stop_;
  std::coroutine_handle<> combinator_frame_;
  std::atomic<size_t> pending_{0};
  std::atomic<TaskPromiseBase*> first_ended_{nullptr};
  std::atomic<TaskPromiseBase*> first_failed_{nullptr};
  std::atomic<TaskId> canceller_{0};
  std::stop_source stop_source_;
  // After stop_source_: destroyed first, so a forwarding in progress ends before the source goes.
  std::optional<std::stop_callback<ForwardStop<TaskGroup>>> forward_stop_;
};

template <typename... Ts>
class AllOf {
 public:
  explicit AllOf(task<Ts>... tasks) : tasks_(std::move(tasks)...) {}
  bool await_ready() const noexcept { return false; }
  void bind_awaiting(TaskPromiseBase& combinator) { group_.bind_awaiting(combinator); }
  bool await_suspend(std::coroutine_handle<> combinator) {
    const auto started =
        std::apply([](auto&... work) { return std::array<StartedTask, sizeof...(Ts)>{started_task(work)...}; }, tasks_);
    return group_.start(started, combinator);
  }
  std::tuple<result_of_t<Ts>...> await_resume() {
    group_.end_forwarding();
    group_.rethrow_first_failure();
    return std::apply([](auto&... work) { return std::tuple<result_of_t<Ts>...>{take_result(work)...}; }, tasks_);
  }

 private:
  std::tuple<task<Ts>...> tasks_;
  TaskGroup group_{TaskGroup::Policy::cancel_rest_on_failure};
};

// when_all and when_any of a vector: the policy says which.
template <typename T>
class EachOf {
 public:
  EachOf(std::vector<task<T>> tasks, TaskGroup::Policy policy) : tasks_(std::move(tasks)), group_(policy) {}
  bool await_ready() const noexcept { return tasks_.empty(); }
  void bind_awaiting(TaskPromiseBase& combinator) { group_.bind_awaiting(combinator); }
  bool await_suspend(std::coroutine_handle<> combinator) {
    std::vector<StartedTask> started;
    started.reserve(tasks_.size());
    for (task<T>& work : tasks_) started.push_back(started_task(work));
    return group_.start(started, combinator);
  }
  // when_all: every result, in the order of the tasks.
  auto all_results() {
    group_.end_forwarding();
    group_.rethrow_first_failure();
    if constexpr (std::is_void_v<T>) {
      for (task<T>& work : tasks_) take_result(work);
    } else {
      std::vector<T> results;
      results.reserve(tasks_.size());
      for (task<T>& work : tasks_) results.push_back(take_result(work));
      return results;
    }
  }
  // when_any: the index and result of the first task to end (or its failure).
  std::pair<size_t, result_of_t<T>> first_result() {
    group_.end_forwarding();
    TaskPromiseBase* winner = group_.first_ended();
    size_t index = 0;
    while (&TaskAccess::promise(tasks_[index]) != winner) ++index;
    return {index, take_result(tasks_[index])};
  }

 protected:
  std::vector<task<T>> tasks_;
  TaskGroup group_;
};

template <typename T>
struct AllOfVector : EachOf<T> {
  explicit AllOfVector(std::vector<task<T>> tasks)
      : EachOf<T>(std::move(tasks), TaskGroup::Policy::cancel_rest_on_failure) {}
  auto await_resume() { return this->all_results(); }
};

template <typename T>
struct FirstOf : EachOf<T> {
  explicit FirstOf(std::vector<task<T>> tasks)
      : EachOf<T>(std::move(tasks), TaskGroup::Policy::cancel_rest_on_first_end) {}
  std::pair<size_t, result_of_t<T>> await_resume() { return this->first_result(); }
};

// The process's timer for with_timeout deadlines (a pool's timer serves its sleeps).
inline TimerThread& deadline_timer() {
  static TimerThread timer("chronicle-timer");
  return timer;
}

// with_timeout's timer: a task of kind `timer`, "timeout", resolved exactly once, under mutex_:
// `ok` by itself when the deadline passes first (it then cancels the group, as its canceller), or
// `cancelled` by with_timeout's task when the task ended first.
class DeadlineEntry final : public TimerEntry {
 public:
  DeadlineEntry(Clock::time_point deadline, TaskGroup& group, TaskId timer)
      : TimerEntry(deadline), group_(group), timer_(timer) {}
  void fire() noexcept override {
    std::lock_guard lock(mutex_);
    if (state_ != State::armed) return;
    state_ = State::fired;
    resolve_task(timer_, TaskOutcome::ok, {}, timer_);
    group_.cancel(timer_);
  }
  void abandon() noexcept override {}  // the process exits
  // The task ended; true when the deadline had passed first. After this the entry no longer
  // touches the group.
  bool stop(TaskId by) {
    std::lock_guard lock(mutex_);
    if (state_ == State::fired) return true;
    state_ = State::stopped;
    resolve_task(timer_, TaskOutcome::cancelled, {}, by);
    return false;
  }

 private:
  enum class State : uint8_t { armed, fired, stopped };
  std::mutex mutex_;
  State state_ = State::armed;
  TaskGroup& group_;
  TaskId timer_;
};

template <typename T>
class WithinDeadline {
 public:
  WithinDeadline(task<T> work, std::chrono::nanoseconds limit)
      : work_(std::move(work)), deadline_(TimerEntry::Clock::now() + limit) {}
  bool await_ready() const noexcept { return false; }
  void bind_awaiting(TaskPromiseBase& combinator) { group_.bind_awaiting(combinator); }
  bool await_suspend(std::coroutine_handle<> combinator) {
    // Made in the with_timeout task's await_suspend: that task waits on it (record_new_task).
    const TaskId timer = create_task(TaskKind::timer, "timeout", group_.combinator());
    entry_ = std::make_shared<DeadlineEntry>(deadline_, group_, timer);
    deadline_timer().arm(entry_);  // before the start: the deadline counts from the call
    const StartedTask started[] = {started_task(work_)};
    return group_.start(started, combinator);
  }
  T await_resume() {
    const bool timed_out = entry_->stop(group_.combinator());
    deadline_timer().disarm(entry_);
    group_.end_forwarding();
#if CHRONICLE_CORO_EXCEPTIONS
    if (timed_out && TaskAccess::promise(work_).cancelled()) throw timeout_error();
#else
    (void)timed_out;
#endif
    return TaskAccess::promise(work_).take();
  }

 private:
  task<T> work_;
  TimerEntry::Clock::time_point deadline_;
  TaskGroup group_{TaskGroup::Policy::wait_for_all};
  std::shared_ptr<DeadlineEntry> entry_;
};

}  // namespace detail

// Runs the tasks concurrently and gives their results (std::monostate for a task<void>). On the
// first failure the others are cancelled; once all have ended the first failure is rethrown.
template <typename... Ts>
requires(sizeof...(Ts) > 0) task<std::tuple<detail::result_of_t<Ts>...>> when_all(task<Ts>... tasks) {
  co_return co_await detail::AllOf<Ts...>(std::move(tasks)...);
}

// The same for a vector: a std::vector<T> of the results in order (nothing for task<void>).
template <typename T>
task<std::conditional_t<std::is_void_v<T>, void, std::vector<T>>> when_all(std::vector<task<T>> tasks) {
  co_return co_await detail::AllOfVector<T>(std::move(tasks));
}

// Runs the tasks concurrently; the first to end wins and the others are cancelled. Once all have
// ended, gives the winner's index and result, or rethrows the winner's failure.
template <typename T>
task<std::pair<size_t, detail::result_of_t<T>>> when_any(std::vector<task<T>> tasks) {
  // No task, no winner: a failure of the when_any.
#if CHRONICLE_CORO_EXCEPTIONS
  if (tasks.empty()) throw std::invalid_argument("when_any of no task");
#else
  if (tasks.empty()) std::terminate();
#endif
  co_return co_await detail::FirstOf<T>(std::move(tasks));
}

template <typename T, typename... Rest>
requires(std::same_as<T, Rest>&&...) task<std::pair<size_t, detail::result_of_t<T>>> when_any(task<T> first,
                                                                                              task<Rest>... rest) {
  std::vector<task<T>> tasks;
  tasks.reserve(1 + sizeof...(Rest));
  tasks.push_back(std::move(first));
  (tasks.push_back(std::move(rest)), ...);
  co_return co_await detail::FirstOf<T>(std::move(tasks));
}

// Runs `work`; if `limit` passes first, cancels it and, once it has ended, throws timeout_error
// (if it ended cancelled; a result or failure it still produced wins).
template <typename T>
task<T> with_timeout(task<T> work, std::chrono::nanoseconds limit) {
  co_return co_await detail::WithinDeadline<T>(std::move(work), limit);
}

}  // namespace chronicle

#include "chronicle/async_scope.hpp"
