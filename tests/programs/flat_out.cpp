// THREADS threads write EVENTS instants each as fast as they can, all alive at once (each
// writes its first event, then waits for the others), and then print how many they wrote in
// all. Traced through the environment (CHRONICLE_OUTPUT, or chronicle record).
#include <barrier>
#include <chronicle/chronicle.hpp>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 4;
  const long events = argc > 2 ? std::atol(argv[2]) : 1'000'000;
  std::barrier all_started(threads);
  std::vector<std::thread> writers;
  for (int t = 0; t < threads; ++t)
    writers.emplace_back([events, &all_started] {
      CHRONICLE_INSTANT("flat", "out");  // takes a channel, or finds none
      all_started.arrive_and_wait();
      for (long i = 1; i < events; ++i) CHRONICLE_INSTANT("flat", "out");
    });
  for (auto& writer : writers) writer.join();
  std::printf("%ld\n", threads * events);
  return 0;
}
