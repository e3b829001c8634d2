// coro.hpp in code built with -fno-exceptions: it compiles, and a traced task (and a combinator)
// runs to its end. Built without GoogleTest, which wants exceptions; exits 0 when all is well.
#include <sys/wait.h>
#include <unistd.h>

#include <chronicle/chronicle.hpp>
#include <chronicle/coro.hpp>
#include <csignal>
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

chronicle::task<int> sleep_forever(chronicle::thread_pool& pool) {
  co_await pool.sleep_for(std::chrono::hours(24));
  co_return -1;
}

// when_any must cancel a sleeping task, which cannot unwind without exceptions: the documented
// end is std::terminate (SIGABRT) after the task is recorded cancelled and a line on stderr.
bool cancellation_terminates() {
  const pid_t child = fork();
  if (child == 0) {
    chronicle::thread_pool pool(1);  // the parent's threads are not in the child
    chronicle::sync_wait(chronicle::when_any(sleep_forever(pool), doubled_on_pool(pool, 1)));
    _exit(0);  // not reached
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
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
  if (!cancellation_terminates()) {
    std::fprintf(stderr, "a cancellation without exceptions did not terminate the process\n");
    return 1;
  }
  return 0;
}
