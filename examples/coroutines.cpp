// A request made of two steps that run on a thread pool, the second of which fails once and is
// retried: a small trace whose critical path is worth reading
// (`chronicle stats --critical-path request TRACE`).
#include <chronicle/chronicle.hpp>
#include <chronicle/coro.hpp>

#include <stdexcept>
#include <thread>

using namespace std::chrono_literals;

chronicle::task<int> fetch(chronicle::thread_pool& pool, std::chrono::milliseconds latency, bool fail) {
  co_await pool.schedule();
  CHRONICLE_SPAN("example", "fetch");
  std::this_thread::sleep_for(latency);
  if (fail) throw std::runtime_error("connection reset");
  co_return static_cast<int>(latency.count());
}

chronicle::task<int> request(chronicle::thread_pool& pool) {
  // Begins on the thread that starts the request and ends on a pool thread: a span of this
  // task, shown in each of its runs (docs/tasks.md, "Spans inside tasks").
  CHRONICLE_SPAN("example", "handle request");
  int total = co_await fetch(pool, 30ms, false).named("load profile");
  {
    CHRONICLE_SPAN("example", "prepare");
    std::this_thread::sleep_for(2ms);
  }
  bool failed = false;
  try {
    total += co_await fetch(pool, 10ms, true).named("load orders");
  } catch (const std::exception& error) {
    CHRONICLE_NOTE("example", "retrying after: {}", error.what());
    failed = true;
  }
  if (failed) total += co_await fetch(pool, 50ms, false).named("load orders (retry)");
  co_return total;
}

int main() {
  chronicle::thread_pool pool(2, "pool");
  CHRONICLE_SPAN("example", "main");
  return chronicle::sync_wait(request(pool).named("request")) == 80 ? 0 : 1;
}
