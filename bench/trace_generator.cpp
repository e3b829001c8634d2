// Writes a trace of about N events for the reader and viewer benchmarks: T threads, nested
// spans, counters and notes, as fast as the recorder takes them.
//   CHRONICLE_OUTPUT=DIR CHRONICLE_BUFFER_SIZE=64M trace_generator N [THREADS]
#include <chronicle/chronicle.hpp>

#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const long events = argc > 1 ? std::atol(argv[1]) : 10'000'000;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 4;
  // Each round writes 11 events (5 spans, a counter) and every 16th round a note.
  const long rounds = events / threads / 11;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([rounds, t] {
      for (long round = 0; round < rounds; ++round) {
        CHRONICLE_SPAN("gen", "request");
        CHRONICLE_COUNTER("gen", "queue", round % 100);
        for (int i = 0; i < 2; ++i) {
          CHRONICLE_SPAN("gen", "parse");
          CHRONICLE_SPAN("gen", "lookup");
        }
        if (round % 16 == 0) CHRONICLE_NOTE("gen", "thread {} round {}", t, round);
        // Keep the writers a little slower than the collector, so nothing is dropped.
        if (round % 64 == 0) std::this_thread::yield();
      }
    });
  for (auto& worker : workers) worker.join();
  return 0;
}
