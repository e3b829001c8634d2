// THREADS threads write EVENTS instants each as fast as they can, then print how many they
// wrote in all. Traced through the environment (chronicle record).
#include <chronicle/chronicle.hpp>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 4;
  const long events = argc > 2 ? std::atol(argv[2]) : 1'000'000;
  std::vector<std::thread> writers;
  for (int t = 0; t < threads; ++t)
    writers.emplace_back([events] {
      for (long i = 0; i < events; ++i) CHRONICLE_INSTANT("flat", "out");
    });
  for (auto& writer : writers) writer.join();
  std::printf("%ld\n", threads * events);
  return 0;
}
