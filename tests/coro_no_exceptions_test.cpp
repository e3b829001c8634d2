// coro.hpp in code built with -fno-exceptions: it compiles, and a traced task (and a combinator)
// runs to its end. Built without GoogleTest, which wants exceptions; exits 0 when all is well.
#include <chronicle/chronicle.hpp>
#include <chronicle/coro.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#error "this test must be built with -fno-exceptions"
#endif

namespace {

chronicle::task<int> doubled_on_pool(chronicle::thread_pool& pool, int value) {
  co_await pool.schedule();
  co_return value * 2;
}

chronicle::task<int> both(chronicle::thread_pool& pool) {
  auto [first, second] = co_await chronicle::when_all(doubled_on_pool(pool, 1), doubled_on_pool(pool, 2));
  co_return first + second;
}

}  // namespace

int main() {
  char directory[] = "/tmp/chronicle-no-exceptions-XXXXXX";
  if (!mkdtemp(directory)) return 1;
  chronicle::Config config;
  config.output = std::string(directory) + "/trace";
  config.shm_dir = directory;
  config.self_stats_interval = std::chrono::milliseconds(0);
  if (!chronicle::start(config)) {
    std::fprintf(stderr, "cannot start a session: %s\n", chronicle::last_error().c_str());
    return 1;
  }
  int total = 0;
  {
    chronicle::thread_pool pool(2);
    total = chronicle::sync_wait(both(pool));
  }
  chronicle::stop();
  std::error_code ignored;
  std::filesystem::remove_all(directory, ignored);
  if (total != 6) {
    std::fprintf(stderr, "expected 6, got %d\n", total);
    return 1;
  }
  return 0;
}
