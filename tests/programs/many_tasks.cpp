// Many short tasks one after another, for the viewer's tests of a task area taller than a browser
// element can be: N tasks, each created and resolved at once (two events), all roots, so that as
// a tree each has a row of its own (and by time they share one).
//   chronicle record -- many_tasks N
#include <chronicle/chronicle.hpp>
#include <chronicle/task.hpp>
#include <chrono>
#include <cstdlib>
#include <thread>

namespace {

// Tasks on a row never meet (task_time_rows.hpp), and where a clock read takes ~10 ns (an AMD
// EPYC VM) a resolution and the next creation were often in the same ns: one after another, as
// this program means them, is a few ns apart on the clock the trace uses.
void wait_a_few_ns() {
  const auto from = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - from < std::chrono::nanoseconds(4)) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  const long count = argc > 1 ? std::atol(argv[1]) : 1000;
  for (long k = 0; k < count; ++k) {
    const chronicle::TaskId task = chronicle::create_task(chronicle::TaskKind::handler, "job", 0);
    chronicle::resolve_task(task, chronicle::TaskOutcome::ok);
    wait_a_few_ns();
    // Keep the writer a little slower than the collector, so nothing is dropped.
    if (k % 64 == 0) std::this_thread::yield();
  }
  return 0;
}
