// A small program written with Asio's own coroutines and nothing of chronicle's but a span and
// the handler-tracking define: `serve` co_spawns N requests; each co_awaits a timer, a nested
// awaitable (its own timer), `a && b` of two timed coroutines, and `work || timeout` where the
// timeout wins (the work is cancelled); request 2 then throws. tests/asio_awaitable_test.cpp
// records it and asserts its task graph exactly.
//
//   awaitable_requests [requests]   (default 4)
//   awaitable_requests pool N       N requests on an io_context run by two threads
//   awaitable_requests group        a parallel group whose slow coroutine is cancelled when the
//                                   fast one ends, and a coroutine cancelled by a
//                                   cancellation_signal
#include <asio.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/experimental/parallel_group.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "chronicle/chronicle.hpp"

using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;

namespace {

constexpr int kFailingRequest = 2;

asio::awaitable<void> sleep(std::chrono::steady_clock::duration how_long) {
  asio::steady_timer timer(co_await asio::this_coro::executor, how_long);
  co_await timer.async_wait(asio::use_awaitable);
}

// Awaited directly: part of the request's coroutine, not a coroutine of its own.
asio::awaitable<int> look_up(int request) {
  co_await sleep(1ms);
  co_return request * 10;
}

asio::awaitable<void> request(int number) {
  CHRONICLE_SPAN("awaitable", "request");
  co_await sleep(1ms);
  const int record = co_await look_up(number);
  co_await (sleep(1ms) && sleep(2ms));
  co_await (sleep(std::chrono::hours(1)) || sleep(1ms));  // the hour-long work loses: cancelled
  if (number == kFailingRequest) throw std::runtime_error("backend refused record " + std::to_string(record));
}

asio::awaitable<void> serve(int requests) {
  const auto executor = co_await asio::this_coro::executor;
  for (int number = 0; number < requests; ++number) asio::co_spawn(executor, request(number), asio::detached);
}

// `signal` outlives the coroutine it cancels (its slot holds that coroutine's cancellation state).
asio::awaitable<void> gather(asio::cancellation_signal& signal) {
  const auto executor = co_await asio::this_coro::executor;
  using asio::experimental::deferred;
  co_await asio::experimental::make_parallel_group(asio::co_spawn(executor, sleep(1ms), deferred),
                                                   asio::co_spawn(executor, sleep(std::chrono::hours(1)), deferred))
      .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
  asio::co_spawn(executor, sleep(std::chrono::hours(1)), asio::bind_cancellation_slot(signal.slot(), asio::detached));
  co_await sleep(1ms);
  signal.emit(asio::cancellation_type::terminal);
}

}  // namespace

int main(int argc, char** argv) {
  asio::io_context io;
  if (argc > 1 && std::string_view(argv[1]) == "group") {
    asio::cancellation_signal signal;
    asio::co_spawn(io, gather(signal), asio::detached);
    io.run();
    std::printf("gathered\n");
    return 0;
  }
  const bool pool = argc > 2 && std::string_view(argv[1]) == "pool";
  const int requests = argc > 1 ? std::atoi(argv[pool ? 2 : 1]) : 4;
  asio::co_spawn(io, serve(requests), asio::detached);
  std::thread second;
  if (pool) second = std::thread([&io] { io.run(); });
  io.run();
  if (second.joinable()) second.join();
  std::printf("%d requests served\n", requests);
}
