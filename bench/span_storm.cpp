// Load for `chronicle record`: one thread emitting spans (begin + end) as fast as it can for
// SECONDS (default 2), or, with --idle, one span and then a sleep of SECONDS with tracing on.
//
//   chronicle record --quiet -o DIR -- span_storm [SECONDS]
//   chronicle record --quiet -o DIR -- span_storm --idle [SECONDS]
//
// Prints one line on stdout: spans made, elapsed time and this process's own CPU time, so a
// caller can tell the recorder's CPU time from the program's.
#include <chronicle/chronicle.hpp>

#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

double seconds_of(const timeval& time) {
  return static_cast<double>(time.tv_sec) + static_cast<double>(time.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  bool idle = false;
  double seconds = 2.0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--idle") == 0)
      idle = true;
    else
      seconds = std::atof(argv[i]);
  }
  if (!chronicle::active())
    std::fprintf(stderr, "span_storm: no session (run it under `chronicle record` or set CHRONICLE_OUTPUT)\n");

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  uint64_t spans = 0;
  if (idle) {
    { CHRONICLE_SPAN("storm", "idle"); }
    spans = 1;
    std::this_thread::sleep_until(deadline);
  } else {
    do {
      // Look at the clock once per 4096 spans: its cost stays out of the figures.
      for (int i = 0; i < 4096; ++i) {
        CHRONICLE_SPAN("storm", "span");
        asm volatile("" ::: "memory");
      }
      spans += 4096;
    } while (Clock::now() < deadline);
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("span_storm: spans=%llu events=%llu seconds=%.3f spans_per_s=%.0f cpu_user=%.3f cpu_sys=%.3f traced=%d\n",
              static_cast<unsigned long long>(spans), static_cast<unsigned long long>(2 * spans), elapsed,
              static_cast<double>(spans) / elapsed, seconds_of(usage.ru_utime), seconds_of(usage.ru_stime),
              chronicle::active() ? 1 : 0);
  std::fflush(stdout);
  return 0;
}
