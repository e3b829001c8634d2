// THREADS threads each write ROUNDS rounds of: a span "counted/round" around a counter
// "counted/sequence" = 0, 1, 2, ... and a note every 64 rounds (a string field), yielding every
// 256 rounds so that a collector keeps up. Traced through the environment (CHRONICLE_OUTPUT, or
// chronicle record).
//   counted_spans [THREADS] [ROUNDS]
#include <chronicle/chronicle.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const long rounds = argc > 2 ? std::atol(argv[2]) : 100'000;
  std::vector<std::thread> writers;
  for (int t = 0; t < threads; ++t)
    writers.emplace_back([rounds] {
      for (long i = 0; i < rounds; ++i) {
        CHRONICLE_SPAN("counted", "round");
        CHRONICLE_COUNTER("counted", "sequence", i);
        if (i % 64 == 0) CHRONICLE_NOTE("counted", "round {}", i);
        if (i % 256 == 0) std::this_thread::yield();
      }
    });
  for (auto& writer : writers) writer.join();
  std::printf("%ld\n", threads * rounds);
  return 0;
}
