// Asio's own coroutines as chronicle tasks: include this once, after the Asio headers and before
// any code that calls co_spawn, in a program built with
//
//   -DASIO_CUSTOM_HANDLER_TRACKING='"chronicle/asio_tracking.hpp"'
//
// and every coroutine started by co_spawn(executor or context, awaitable, token) is a task
// (kind coroutine, "co_spawn"), created by the task or handler that called co_spawn; each
// operation it co_awaits (use_awaitable) is a wait on that operation's task, whose completion
// resumes it; the coroutines the awaitable operators (&&, ||) and parallel groups launch while it
// suspends are waits on all of them; it resolves itself ok, failed (the exception's what()) or
// cancelled (operation_aborted: a loser of ||, a cancellation_signal). Awaitables it co_awaits
// directly are part of it, as they are of its thread of execution in Asio. The rules and limits:
// "How Asio's coroutines are traced" in chronicle/asio_tracking.hpp, and docs/tasks.md.
//
// How: co_spawn wraps the awaitable in asio::detail::awaitable_as_function<T, Executor>; this
// header specialises it for the default executor (any_io_executor), so that the function object
// also carries the coroutine's record (CoroutineRecord) and calls the awaitable inside one more
// asio::awaitable coroutine of Asio's own kind (traced_coroutine), which sees the coroutine's
// first run and its end. No promise type changes: Asio's frames stay Asio's. A specialisation
// must precede its first use, hence "before any code that calls co_spawn".
#pragma once

#if !defined(ASIO_CUSTOM_HANDLER_TRACKING)
#error "chronicle/asio_awaitable.hpp needs -DASIO_CUSTOM_HANDLER_TRACKING='\"chronicle/asio_tracking.hpp\"'"
#endif

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/system_error.hpp>
#include <utility>

#include "chronicle/detail/asio_hooks.hpp"

namespace asio::detail {

template <typename T>
class awaitable_as_function<T, any_io_executor> {
 public:
  explicit awaitable_as_function(awaitable<T, any_io_executor>&& coroutine) : coroutine_(std::move(coroutine)) {
    record_.spawn();
  }
  awaitable_as_function(awaitable_as_function&&) noexcept = default;

  awaitable<T, any_io_executor> operator()() {
    return ::chronicle::asio_tracking::traced_coroutine<system_error>(std::move(coroutine_), record_);
  }

 private:
  awaitable<T, any_io_executor> coroutine_;
  ::chronicle::asio_tracking::CoroutineRecord record_;
};

}  // namespace asio::detail
