// A program whose threads are mostly quiet: the main thread writes one short span every PERIOD_MS
// milliseconds, COUNT times, and nothing else; each of IDLE threads writes one span when it starts
// and then waits for the end. Its packets stay open (a span is a few bytes of a 64 KiB packet), so
// what the live push sends of it is what the collector cuts of its open packets
// (bench/live_push_latency.sh measures how long a span takes to reach the receiver).
//   quiet_spans [COUNT = 50] [PERIOD_MS = 100] [IDLE = 0]
#include <chronicle/chronicle.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const long count = argc > 1 ? std::atol(argv[1]) : 50;
  const long period_ms = argc > 2 ? std::atol(argv[2]) : 100;
  const long idle = argc > 3 ? std::atol(argv[3]) : 0;
  std::mutex mutex;
  std::condition_variable ended;
  bool done = false;
  std::vector<std::thread> idle_threads;
  for (long i = 0; i < idle; ++i)
    idle_threads.emplace_back([&] {
      { CHRONICLE_SPAN("quiet", "idle"); }
      std::unique_lock lock(mutex);
      ended.wait(lock, [&] { return done; });
    });
  for (long i = 0; i < count; ++i) {
    { CHRONICLE_SPAN("quiet", "tick"); }
    std::this_thread::sleep_for(std::chrono::milliseconds(period_ms));
  }
  {
    std::lock_guard lock(mutex);
    done = true;
  }
  ended.notify_all();
  for (auto& thread : idle_threads) thread.join();
}
