// Boost.Asio handler tracking as chronicle tasks: the same as chronicle/asio_tracking.hpp (read
// it for what is recorded), for a program built with
//
//   -DBOOST_ASIO_CUSTOM_HANDLER_TRACKING='"chronicle/boost_asio_tracking.hpp"'
//
// Its coroutines too ("Asio's own coroutines" there), for the executors built on
// execution::any_executor (any_io_executor, the default): Boost 1.74's co_spawn wraps the
// awaitable in the same function object, specialised below. Boost 1.74 has no awaitable
// operators, parallel groups or cancellation slots; co_spawn(..., use_awaitable) is awaited as in
// Asio.
#pragma once

#include <utility>  // Boost 1.74's awaitable.hpp uses std::exchange without including it

#include "chronicle/detail/asio_hooks.hpp"

#define BOOST_ASIO_INHERIT_TRACKED_HANDLER : public ::chronicle::asio_tracking::TrackedHandler
#define BOOST_ASIO_ALSO_INHERIT_TRACKED_HANDLER , public ::chronicle::asio_tracking::TrackedHandler
#define BOOST_ASIO_HANDLER_TRACKING_INIT (void)0
#define BOOST_ASIO_HANDLER_LOCATION(args) ::chronicle::asio_tracking::Location chronicle_tracked_location args
#define BOOST_ASIO_HANDLER_CREATION(args) ::chronicle::asio_tracking::creation args
#define BOOST_ASIO_HANDLER_COMPLETION(args) ::chronicle::asio_tracking::Completion tracked_completion args
#define BOOST_ASIO_HANDLER_INVOCATION_BEGIN(args) tracked_completion.invocation_begin args
#define BOOST_ASIO_HANDLER_INVOCATION_END tracked_completion.invocation_end()
#define BOOST_ASIO_HANDLER_OPERATION(args) ::chronicle::asio_tracking::operation args
#define BOOST_ASIO_HANDLER_REACTOR_REGISTRATION(args) (void)0
#define BOOST_ASIO_HANDLER_REACTOR_DEREGISTRATION(args) (void)0
#define BOOST_ASIO_HANDLER_REACTOR_READ_EVENT 1
#define BOOST_ASIO_HANDLER_REACTOR_WRITE_EVENT 2
#define BOOST_ASIO_HANDLER_REACTOR_ERROR_EVENT 4
#define BOOST_ASIO_HANDLER_REACTOR_EVENTS(args) (void)0
#define BOOST_ASIO_HANDLER_REACTOR_OPERATION(args) (void)0

#if defined(BOOST_ASIO_HAS_CO_AWAIT) && !defined(BOOST_ASIO_USE_TS_EXECUTOR_AS_DEFAULT)
// co_spawn(executor or context, awaitable, token) wraps the awaitable in this function object
// (declared here, before Boost.Asio defines its primary template).
namespace boost {
namespace system {
class system_error;
}  // namespace system
namespace asio {
template <typename T, typename Executor>
class awaitable;
namespace execution {
template <typename... SupportableProperties>
class any_executor;
}  // namespace execution
namespace detail {
template <typename T, typename Executor>
class awaitable_as_function;

template <typename T, typename... Properties>
class awaitable_as_function<T, execution::any_executor<Properties...>> {
  using executor = execution::any_executor<Properties...>;

 public:
  explicit awaitable_as_function(awaitable<T, executor>&& coroutine) : coroutine_(std::move(coroutine)) {
    record_.spawn();
  }
  awaitable_as_function(awaitable_as_function&&) noexcept = default;

  awaitable<T, executor> operator()() {
    return ::chronicle::asio_tracking::traced_coroutine<boost::system::system_error>(std::move(coroutine_), record_);
  }

 private:
  awaitable<T, executor> coroutine_;
  ::chronicle::asio_tracking::CoroutineRecord record_;
};
}  // namespace detail
}  // namespace asio
}  // namespace boost
#endif
