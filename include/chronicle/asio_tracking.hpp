// Asio handler tracking as chronicle tasks. Build an unmodified Asio program with
//
//   -DASIO_CUSTOM_HANDLER_TRACKING='"chronicle/asio_tracking.hpp"'
//
// (Boost.Asio: BOOST_ASIO_CUSTOM_HANDLER_TRACKING='"chronicle/boost_asio_tracking.hpp"') and
// link chronicle: every asynchronous operation and posted handler becomes a task.
//
//   Asio hook              chronicle event
//   creation               task_create: parent = the handler running now, kind from the object
//                          (socket: io, deadline_timer: timer, io_context/strand/...: handler),
//                          name "object.operation" ("socket.async_receive"), plus " in
//                          async_read" when a composed operation started it
//   invocation begin       task_resolve (ok; cancelled on operation_aborted; failed with
//                          ec.message() otherwise), then task_run_begin; the handler is the
//                          thread's current task while it runs
//   invocation end         task_run_end
//   completion destroyed   task_resolve cancelled when the handler is destroyed uninvoked (the
//   without invocation     io_context shut down); task_run_end when the handler threw
//   operation              an instant "object.operation" (socket.close, timer.cancel) in the
//                          running handler
//   reactor hooks          nothing (see below)
//
// Idle time: Asio 1.22 has no hook around its blocking wait (epoll_wait in the scheduler), so
// loop_suspend/loop_resume cannot be recorded from here; the gaps between the runs of a loop
// thread's handlers show it instead. A program with its own loop calls chronicle::loop_suspend()
// and loop_resume() (or LoopIdleScope) around its wait.
//
// Asio's own coroutines (C++20, the default executor any_io_executor), with the same define:
//
//   co_spawn(ex, awaitable, token)  a task of kind coroutine named "co_spawn", created by the task
//                          running at the call (a handler, another coroutine, or none); its
//                          first run begins when its executor first runs it (co_spawn's hop
//                          onto the executor is its queueing, not a task)
//   co_await an operation  (use_awaitable) a wait on the operation's task, which the coroutine
//                          creates; the operation's completion resolves it and resumes the
//                          coroutine: the handler's run is empty, the coroutine's run begins
//   co_await a && b, a || b, a parallel group, co_spawn(..., use_awaitable)
//                          the coroutines launched while it suspends are its waits; the end of
//                          the last of them resumes it
//   co_await an awaitable  nothing of its own: a nested awaitable is part of the coroutine (a
//                          frame of its thread of execution, as in Asio)
//   its end                resolved by itself: ok; failed with the exception's what(); cancelled
//                          when the exception is operation_aborted (the loser of ||, a
//                          cancellation_signal, a cancelled timer); "destroyed while suspended"
//                          when its executor is destroyed first. A coroutine of a group (&&, ||,
//                          a parallel group) that ends cancelled after another of the group
//                          ended is resolved by the last that ended (the winner of ||, the
//                          failure that ended a &&): Asio cancels the others then
//   co_spawn's completion  a handler created by the coroutine, when Asio posts it (a coroutine
//                          that never suspended); otherwise run inline, at the coroutine's end
// Its runs go from each resumption to the next suspension; a coroutine co_spawn runs at once,
// inline above another one, interrupts that one's run. The thread's current task and trace
// context are the coroutine's while it runs: spans (CHRONICLE_SPAN at its top pairs across its
// suspensions), notes and the operations it starts are its.
//
// How, with no user code: co_spawn wraps the awaitable in asio::detail::awaitable_as_function;
// this header specialises that template for any_io_executor (below) so that it carries the
// coroutine's record (detail/asio_hooks.hpp, CoroutineRecord) and awaits the user's awaitable
// inside one more asio::awaitable coroutine of Asio's own kind, which sees the first run and the
// end with its exception. The promise type is Asio's: a derived promise is impossible without
// undefined behaviour (awaitable::await_suspend takes a coroutine_handle of Asio's frame type,
// and awaitable_frame::get_return_object makes one from the promise). The suspensions come from
// the hooks: Asio gives the location of the use_awaitable token when a coroutine suspends, so
// the next operation created on the thread is the one it awaits, and the location
// "co_spawn_entry_point" when co_spawn launches one.
//
// Limits: co_spawn(ex, function, token) (a function returning the awaitable) and awaitables of
// another executor type are not traced (their work shows as handlers, as without this);
// spawn the awaitable itself, co_spawn(ex, f(), token). Who emitted a cancellation_signal is not
// recorded (it has no hook): the coroutine resolves itself cancelled. An operation whose
// initiation starts no Asio operation (a handler kept by user code) is not seen as a wait. The
// end of the coroutines a coroutine awaits (&&, ||, a parallel group, co_spawn with
// use_awaitable) is seen, but not the step by which Asio then resumes it: it is recorded as
// resumed where the last of them ended only when all of them ended on one thread, after a
// suspension of their own (always, on an executor run by one thread); otherwise its code from
// there to its end is not recorded as its own: no run, no wait, no creations.
// Build every translation unit of a program with the same define (Asio's operations and this
// specialisation differ without it).
//
// This header is included by Asio's own detail/handler_tracking.hpp, at global scope.
#pragma once

#include "chronicle/detail/asio_hooks.hpp"

#define ASIO_INHERIT_TRACKED_HANDLER : public ::chronicle::asio_tracking::TrackedHandler
#define ASIO_ALSO_INHERIT_TRACKED_HANDLER , public ::chronicle::asio_tracking::TrackedHandler
#define ASIO_HANDLER_TRACKING_INIT (void)0
#define ASIO_HANDLER_LOCATION(args) ::chronicle::asio_tracking::Location chronicle_tracked_location args
#define ASIO_HANDLER_CREATION(args) ::chronicle::asio_tracking::creation args
#define ASIO_HANDLER_COMPLETION(args) ::chronicle::asio_tracking::Completion tracked_completion args
#define ASIO_HANDLER_INVOCATION_BEGIN(args) tracked_completion.invocation_begin args
#define ASIO_HANDLER_INVOCATION_END tracked_completion.invocation_end()
#define ASIO_HANDLER_OPERATION(args) ::chronicle::asio_tracking::operation args
#define ASIO_HANDLER_REACTOR_REGISTRATION(args) (void)0
#define ASIO_HANDLER_REACTOR_DEREGISTRATION(args) (void)0
#define ASIO_HANDLER_REACTOR_READ_EVENT 1
#define ASIO_HANDLER_REACTOR_WRITE_EVENT 2
#define ASIO_HANDLER_REACTOR_ERROR_EVENT 4
#define ASIO_HANDLER_REACTOR_EVENTS(args) (void)0
#define ASIO_HANDLER_REACTOR_OPERATION(args) (void)0

#if defined(ASIO_HAS_CO_AWAIT) && !defined(ASIO_USE_TS_EXECUTOR_AS_DEFAULT)
#include <system_error>

// co_spawn(executor or context, awaitable, token) wraps the awaitable in this function object
// (declared here, before Asio defines its primary template; see "Asio's own coroutines" above).
namespace asio {
class any_io_executor;
template <typename T, typename Executor>
class awaitable;
namespace detail {
template <typename T, typename Executor>
class awaitable_as_function;

template <typename T>
class awaitable_as_function<T, any_io_executor> {
 public:
  explicit awaitable_as_function(awaitable<T, any_io_executor>&& coroutine) : coroutine_(std::move(coroutine)) {
    record_.spawn();
  }
  awaitable_as_function(awaitable_as_function&&) noexcept = default;

  awaitable<T, any_io_executor> operator()() {
    // asio::system_error is std::system_error.
    return ::chronicle::asio_tracking::traced_coroutine<std::system_error>(std::move(coroutine_), record_);
  }

 private:
  awaitable<T, any_io_executor> coroutine_;
  ::chronicle::asio_tracking::CoroutineRecord record_;
};
}  // namespace detail
}  // namespace asio
#endif
