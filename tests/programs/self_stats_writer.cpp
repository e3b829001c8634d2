// Three threads write known numbers of events in categories "a" (instants), "b" (counters) and
// "c" (spans), then end; the session comes from the environment and stops at exit, after every
// writer was joined: its last sample of the monitor's own figures counts all of them.
//   self_stats_writer
#include <chronicle/chronicle.hpp>

#include <thread>
#include <vector>

int main() {
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 1000 * (t + 1); ++i) CHRONICLE_INSTANT("a", "tick");
      for (int i = 0; i < 500; ++i) CHRONICLE_COUNTER("b", "depth", i);
      for (int i = 0; i < 300; ++i) {
        CHRONICLE_SPAN("c", "work");
      }
    });
  for (std::thread& thread : threads) thread.join();
}
