// chronicle::async_scope (included by chronicle/coro.hpp): a nursery for tasks started without
// being awaited.
//
//   chronicle::async_scope scope;
//   for (auto& connection : connections) scope.spawn(serve(connection));   // start now
//   co_await scope.join();      // waits on each spawned task; rethrows the first failure
//
// A scope destroyed while tasks it spawned still run reports it (a task "async_scope outlived"
// waiting on each of them, resolved failed, and one line on stderr per process) and cancels them.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "chronicle/combinators.hpp"

namespace chronicle {

namespace detail {

// Shared by the scope and its running tasks, so that a task outliving its scope ends safely: the
// state keeps itself alive (keep_alive_) while any task runs.
class ScopeState final : public TaskEndHook, public std::enable_shared_from_this<ScopeState> {
 public:
  template <typename T>
  void spawn(std::coroutine_handle<TaskPromise<T>> frame) {
    TaskPromiseBase& promise = frame.promise();
    {
      std::lock_guard lock(mutex_);
      if (running_.empty()) keep_alive_ = shared_from_this();
      running_.push_back(&promise);
      unjoined_.push_back(promise.id());
    }
    promise.start_under(*this, stop_source_.get_token());
    frame.resume();
  }

  // The scope owns the frames of its tasks: each is destroyed here, at its end.
  std::coroutine_handle<> task_ended(TaskPromiseBase& ended, std::coroutine_handle<> frame) noexcept override {
    std::coroutine_handle<> next = std::noop_coroutine();
    std::shared_ptr<ScopeState> last_reference;  // released last, after every use of `this`
    bool first_failure = false;
    {
      std::lock_guard lock(mutex_);
      running_.erase(std::find(running_.begin(), running_.end(), &ended));
      // A cancelled task is not a failure of the scope: its cancellation came from outside.
      if (ended.failed() && !ended.cancelled() && !first_failure_) {
        first_failure_ = ended.error();
        first_failure = true;
      }
      if (running_.empty()) {
        if (joiner_) next = std::exchange(joiner_, {});
        last_reference = std::move(keep_alive_);
      }
    }
    if (first_failure) cancel(ended.id());
    frame.destroy();
    return next;
  }

  TaskId canceller() const noexcept override { return canceller_.load(std::memory_order_acquire); }
  void cancel(TaskId by) noexcept {
    TaskId none = 0;
    canceller_.compare_exchange_strong(none, by, std::memory_order_acq_rel);
    stop_source_.request_stop();
  }

  // The joining task waits on each task spawned since the last join; false when none runs.
  bool begin_join(std::coroutine_handle<> joiner, TaskId joiner_id, const std::stop_token& joiner_stop) {
    if (joiner_stop.stop_possible()) forward_stop_.emplace(joiner_stop, ForwardStop<ScopeState>{this, joiner_id});
    std::lock_guard lock(mutex_);
    // A joiner that is no traced task (a session started since, another coroutine type) has no
    // wait to record.
    if (joiner_id != 0)
      for (const TaskId spawned : unjoined_) task_waits_for(joiner_id, spawned);
    unjoined_.clear();
    if (running_.empty()) return false;
    joiner_ = joiner;
    return true;
  }
  void end_join() {
    forward_stop_.reset();
#if CHRONICLE_CORO_EXCEPTIONS
    std::exception_ptr failure;
    {
      std::lock_guard lock(mutex_);
      failure = std::exchange(first_failure_, nullptr);
    }
    if (failure) std::rethrow_exception(failure);
#endif
  }

  // The scope is destroyed: tasks still running are reported and cancelled.
  void close() {
    std::vector<TaskId> outliving;
    {
      std::lock_guard lock(mutex_);
      for (const TaskPromiseBase* running : running_) outliving.push_back(running->id());
    }
    if (outliving.empty()) return;
    const TaskId report = create_task(TaskKind::handler, "async_scope outlived");
    for (const TaskId task : outliving) task_waits_for(report, task);
    const std::string text = std::to_string(outliving.size()) + " task(s) outlived their async_scope";
    resolve_task(report, TaskOutcome::failed, text, report);
    static std::atomic<bool> reported{false};
    if (!reported.exchange(true))
      std::fprintf(stderr, "chronicle: warning: %s (join a scope before destroying it); they are cancelled\n",
                   text.c_str());
    cancel(report);
  }

 private:
  std::mutex mutex_;
  std::vector<TaskPromiseBase*> running_;
  std::vector<TaskId> unjoined_;
  std::coroutine_handle<> joiner_;
  std::exception_ptr first_failure_;
  std::shared_ptr<ScopeState> keep_alive_;
  std::atomic<TaskId> canceller_{0};
  std::stop_source stop_source_;
  std::optional<std::stop_callback<ForwardStop<ScopeState>>> forward_stop_;
};

class ScopeJoin {
 public:
  explicit ScopeJoin(ScopeState& state) : state_(state) {}
  bool await_ready() const noexcept { return false; }
  void bind_awaiting(TaskPromiseBase& joiner) {
    joiner_ = joiner.id();
    joiner_stop_ = joiner.stop_token();
  }
  bool await_suspend(std::coroutine_handle<> joiner) { return state_.begin_join(joiner, joiner_, joiner_stop_); }
  void await_resume() { state_.end_join(); }

 private:
  ScopeState& state_;
  TaskId joiner_ = 0;
  std::stop_token joiner_stop_;
};

}  // namespace detail

class async_scope {
 public:
  async_scope() : state_(std::make_shared<detail::ScopeState>()) {}
  ~async_scope() { state_->close(); }
  async_scope(const async_scope&) = delete;
  async_scope& operator=(const async_scope&) = delete;

  // Starts `work` now, on this thread until its first suspension; the scope owns it from here.
  template <typename T>
  void spawn(task<T> work) {
    state_->spawn(detail::TaskAccess::release(work));
  }
  // `co_await scope.join()` in a task<T>: waits until every spawned task has ended, then rethrows
  // the first failure (a failure also cancels the other tasks). Stopping the joining task stops
  // the scope's tasks.
  detail::ScopeJoin join() { return detail::ScopeJoin(*state_); }
  // Cancels every running task of the scope, recorded as cancelled by the current task.
  void request_stop() { state_->cancel(current_task()); }

 private:
  std::shared_ptr<detail::ScopeState> state_;
};

}  // namespace chronicle
