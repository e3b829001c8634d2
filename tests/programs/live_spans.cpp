// Spans while a test watches them arrive: for each of PHASES phases, SPANS short spans (children
// of a span "phase" that stays open across the wait, so they end before their parent), then a
// wait until DIR/go-N exists (the test makes it once it has seen what it waits for), then the
// end of "phase". A task is created and resolved in each phase, and a worker thread writes spans
// at the same time. Each of IDLE threads writes one span before the first phase and then waits,
// writing nothing, until the last phase has ended (a pool's idle worker). Exits 0, or 3 when a go
// file never came within 90 seconds (the test fails then).
//   live_spans DIR [PHASES = 1] [SPANS = 2000] [IDLE = 0]
#include <chronicle/chronicle.hpp>
#include <chronicle/task.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

void write_spans(long count) {
  for (long i = 0; i < count; ++i) {
    CHRONICLE_SPAN("live", "step");
    if (i % 100 == 0) CHRONICLE_NOTE("live", "step {}", i);
  }
}

bool wait_for_file(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string directory = argv[1];
  const int phases = argc > 2 ? std::atoi(argv[2]) : 1;
  const long spans = argc > 3 ? std::atol(argv[3]) : 2000;
  const long idle = argc > 4 ? std::atol(argv[4]) : 0;
  std::mutex mutex;
  std::condition_variable changed;
  long idle_ready = 0;
  bool phases_done = false;
  std::vector<std::thread> idle_threads;
  for (long i = 0; i < idle; ++i)
    idle_threads.emplace_back([&] {
      { CHRONICLE_SPAN("live", "idle"); }
      std::unique_lock lock(mutex);
      ++idle_ready;
      changed.notify_all();
      changed.wait(lock, [&] { return phases_done; });
    });
  {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return idle_ready == idle; });
  }
  bool all_came = true;
  for (int phase = 1; phase <= phases; ++phase) {
    CHRONICLE_SPAN_BEGIN("live", "phase");
    const chronicle::TaskId task = chronicle::create_task(chronicle::TaskKind::promise, "phase task");
    // At the same time as the main thread's: the two threads' events interleave in time.
    std::thread worker([spans] { write_spans(spans / 2); });
    {
      chronicle::TaskRunScope run(task);
      write_spans(spans / 2);
    }
    worker.join();
    chronicle::resolve_task(task, chronicle::TaskOutcome::ok);
    all_came = wait_for_file(directory + "/go-" + std::to_string(phase)) && all_came;
    CHRONICLE_SPAN_END("live", "phase");
  }
  {
    std::lock_guard lock(mutex);
    phases_done = true;
  }
  changed.notify_all();
  for (auto& thread : idle_threads) thread.join();
  return all_came ? 0 : 3;
}
