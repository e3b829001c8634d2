// A small multi-threaded program with spans, instants, notes and counters.
#include <chronicle/chronicle.hpp>

#include <thread>
#include <vector>

namespace {

int work(int depth) {
  CHRONICLE_SPAN("compute", "work");
  int sum = 0;
  for (int i = 0; i < 1000; ++i) sum += i * depth;
  if (depth > 0) sum += work(depth - 1);
  return sum;
}

}  // namespace

int main() {
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([t] {
      chronicle::set_thread_name("worker-" + std::to_string(t));
      for (int round = 0; round < 100; ++round) {
        CHRONICLE_SPAN("app", "round");
        CHRONICLE_COUNTER("app", "round", round);
        work(3);
        if (round % 25 == 0) CHRONICLE_NOTE("app", "thread {} reached round {}", t, round);
      }
      CHRONICLE_INSTANT("app", "done");
    });
  }
  for (auto& thread : threads) thread.join();
  return 0;
}
