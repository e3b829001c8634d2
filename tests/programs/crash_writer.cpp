// Writes increasing sequence numbers as counter events from several threads; thread 0 kills the
// whole process with SIGKILL right after committing sequence number KILL_AT.
//   crash_writer KILL_AT [THREADS]
#include <signal.h>
#include <chronicle/chronicle.hpp>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const long kill_at = std::strtol(argv[1], nullptr, 10);
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  std::vector<std::thread> workers;
  // Every thread has written before the killer starts, however the threads are scheduled.
  std::atomic<int> started{0};
  for (int t = 1; t < threads; ++t)
    workers.emplace_back([&started] {
      for (long i = 0;; ++i) {
        CHRONICLE_COUNTER("crash", "sequence", i);
        if (i == 0) started.fetch_add(1);
        if (i % 64 == 0) std::this_thread::yield();
      }
    });
  while (started.load() < threads - 1) std::this_thread::yield();
  for (long i = 0;; ++i) {
    CHRONICLE_SPAN("crash", "step");
    CHRONICLE_COUNTER("crash", "sequence", i);
    if (i == kill_at) raise(SIGKILL);
  }
}
