// The awaitable program of tests/programs/awaitable_requests.cpp for Boost.Asio (Debian's Boost
// 1.74, which has no awaitable operators): `serve` co_spawns N requests; each co_awaits a timer,
// a nested awaitable (its own timer) and a coroutine it co_spawns with use_awaitable (a timer,
// then a value); request 2 then throws. Built with the Boost handler-tracking define only.
//
//   boost_awaitable_requests [requests]   (default 4)
#include <boost/asio.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "chronicle/chronicle.hpp"

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr int kFailingRequest = 2;

asio::awaitable<void> sleep(std::chrono::steady_clock::duration how_long) {
  asio::steady_timer timer(co_await asio::this_coro::executor, how_long);
  co_await timer.async_wait(asio::use_awaitable);
}

asio::awaitable<int> look_up(int request) {
  co_await sleep(1ms);
  co_return request * 10;
}

asio::awaitable<int> fetch(int record) {
  co_await sleep(2ms);
  co_return record + 1;
}

asio::awaitable<void> request(int number) {
  CHRONICLE_SPAN("awaitable", "request");
  co_await sleep(1ms);
  const int record = co_await look_up(number);
  const int fetched = co_await asio::co_spawn(co_await asio::this_coro::executor, fetch(record), asio::use_awaitable);
  if (number == kFailingRequest) throw std::runtime_error("backend refused record " + std::to_string(fetched));
}

asio::awaitable<void> serve(int requests) {
  const auto executor = co_await asio::this_coro::executor;
  for (int number = 0; number < requests; ++number) asio::co_spawn(executor, request(number), asio::detached);
}

}  // namespace

int main(int argc, char** argv) {
  const int requests = argc > 1 ? std::atoi(argv[1]) : 4;
  asio::io_context io;
  asio::co_spawn(io, serve(requests), asio::detached);
  io.run();
  std::printf("%d requests served\n", requests);
}
