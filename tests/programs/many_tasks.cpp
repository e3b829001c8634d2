// Many short tasks one after another, for the viewer's tests of a task area taller than a browser
// element can be: N tasks, each created and resolved at once (two events), all roots, so that as
// a tree each has a row of its own (and by time they share one).
//   chronicle record -- many_tasks N
#include <chronicle/chronicle.hpp>
#include <chronicle/task.hpp>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
  const long count = argc > 1 ? std::atol(argv[1]) : 1000;
  for (long k = 0; k < count; ++k) {
    const chronicle::TaskId task = chronicle::create_task(chronicle::TaskKind::handler, "job", 0);
    chronicle::resolve_task(task, chronicle::TaskOutcome::ok);
    // Keep the writer a little slower than the collector, so nothing is dropped.
    if (k % 64 == 0) std::this_thread::yield();
  }
  return 0;
}
