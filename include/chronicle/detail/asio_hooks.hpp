// What Asio's handler-tracking hooks do in chronicle (see chronicle/asio_tracking.hpp), shared by
// the standalone Asio and the Boost.Asio headers.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "chronicle/detail/context_state.hpp"
#include "chronicle/task.hpp"

namespace chronicle::asio_tracking {

// The base of Asio's operation objects (ASIO_INHERIT_TRACKED_HANDLER): the task the
// operation's handler is. The member's name keeps clear of the operations' own.
class TrackedHandler {
 public:
  TaskId chronicle_task_id_ = 0;
  detail::ContextSlot chronicle_context_;  // the trace context the handler carries

 protected:
  TrackedHandler() = default;
  ~TrackedHandler() = default;
};

// The composed operation (async_read, async_connect...) whose initiation is under way on this
// thread, if any: it qualifies the names of the operations it starts.
class Location {
 public:
  Location(const char* /*file*/, int /*line*/, const char* function) noexcept
      : previous_(current_function()), function_(function) {
    current_function() = function_;
  }
  ~Location() { current_function() = previous_; }
  Location(const Location&) = delete;
  Location& operator=(const Location&) = delete;

  static const char*& current_function() noexcept {
    static thread_local constinit const char* function = nullptr;
    return function;
  }

 private:
  const char* previous_;
  const char* function_;
};

inline TaskKind kind_of(std::string_view object) noexcept {
  if (object == "socket" || object == "descriptor" || object == "resolver" || object == "signal_set" ||
      object == "handle" || object == "object_handle" || object == "overlapped" || object == "channel")
    return TaskKind::io;
  if (object == "deadline_timer") return TaskKind::timer;
  return TaskKind::handler;  // io_context, thread_pool, strand, system_executor...
}

template <typename Context>
inline void creation(Context& /*context*/, TrackedHandler& handler, const char* object_type, void* /*object*/,
                     std::uintmax_t /*native_handle*/, const char* op_name) {
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
// or not a session records it (contexts propagate with none).
class Completion {
 public:
  explicit Completion(const TrackedHandler& handler) noexcept
      : task_(handler.chronicle_task_id_), context_(handler.chronicle_context_) {}
  ~Completion() {
    if (!invoked_) {
      if (task_ != 0) resolve_task(task_, TaskOutcome::cancelled, "destroyed without being invoked", 0);
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
    // operation_aborted is ECANCELED in the system category (std's or Boost's).
    const std::string_view category = error.category().name();
    const bool aborted = error.value() == ECANCELED && (category == "system" || category == "asio.system");
    const std::string text = error.message();
    begin(aborted ? TaskOutcome::cancelled : TaskOutcome::failed, text);
  }

  void invocation_end() {
    if (running_) end_run();
  }

 private:
  void begin(TaskOutcome outcome, std::string_view text) {
    invoked_ = true;
    if (task_ != 0) record_begin(outcome, text);
    previous_task_ = exchange_current_task(task_);
    previous_context_ = detail::exchange_context_slot(&context_);
    running_ = true;
  }
  void record_begin([[maybe_unused]] TaskOutcome outcome, [[maybe_unused]] std::string_view text) {
#ifndef CHRONICLE_DISABLE
    if (text.empty()) {
      // The resolution and the run's beginning are one instant: one clock read.
      detail::TaskEventBatch batch;
      batch.resolve_quiet(task_, current_task(), outcome);
      batch.task_event(format::EventId::task_run_begin, task_);
    } else {
      resolve_task(task_, outcome, text);
      begin_task_run(task_);
    }
#endif
  }
  void end_run() {
    end_task_run(task_);
    exchange_current_task(previous_task_);
    detail::exchange_context_slot(previous_context_);
    running_ = false;
  }

  TaskId task_;
  detail::ContextSlot context_;
  detail::ContextSlot* previous_context_ = nullptr;
  TaskId previous_task_ = 0;
  bool invoked_ = false;
  bool running_ = false;
};

}  // namespace chronicle::asio_tracking
