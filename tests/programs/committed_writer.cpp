// Writes the counter "sequence" = 0, 1, 2, ... on two threads (each its own numbers: thread t
// writes t, t + 2, t + 4, ...) until it is killed, and publishes in the file COMMITTED the
// number of values every thread has committed: every value below it is in the rings. The
// session comes from the environment (CHRONICLE_OUTPUT, or `chronicle record`).
//   committed_writer COMMITTED
#include <fcntl.h>
#include <unistd.h>
#include <chronicle/chronicle.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace {

constexpr int kThreads = 2;
constexpr long kPublishEvery = 4096;
std::atomic<long> g_committed[kThreads];

void write_values(int thread) {
  for (long i = thread;; i += kThreads) {
    CHRONICLE_COUNTER("test", "sequence", i);
    g_committed[thread].store(i + 1, std::memory_order_release);
    // Paced, so that the collector keeps up and nothing is discarded: every loss the test sees
    // is one of the kill.
    if (i % 1024 < kThreads) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const int fd = ::open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return 3;
  for (int t = 0; t < kThreads; ++t) std::thread(write_values, t).detach();
  for (long published = -1;;) {
    long below = g_committed[0].load(std::memory_order_acquire);
    for (int t = 1; t < kThreads; ++t) below = std::min(below, g_committed[t].load(std::memory_order_acquire));
    // Every value below the slowest thread's next one is committed.
    if (below - published >= kPublishEvery) {
      const std::string text = std::to_string(below) + "\n";
      if (::pwrite(fd, text.c_str(), text.size(), 0) != static_cast<ssize_t>(text.size())) return 4;
      published = below;
    }
    std::this_thread::yield();
  }
}
