// How good is the monitor's overhead estimate (docs/control.md, "The overhead estimate")? A
// workload runs on one thread with no session, then with a flight-recorder session, alternately;
// the thread's CPU time with tracing minus without is the measured cost of its trace points, and
// the session's estimate is its events x the per-event cost it measured at start. Prints both and
// their ratio per round, then the median, for a few sizes of work between two trace points.
//   overhead_estimate [ROUNDS]
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>
#include <chronicle/chronicle.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "collector/collector.hpp"

namespace {

uint64_t thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
}

volatile uint64_t g_sink = 0;

// `spans` spans (two events each), with `work` steps of arithmetic inside each.
uint64_t workload(unsigned spans, unsigned work) {
  const uint64_t begin = thread_cpu_ns();
  uint64_t x = 88172645463325252ULL;
  for (unsigned i = 0; i < spans; ++i) {
    CHRONICLE_SPAN("bench", "step");
    for (unsigned k = 0; k < work; ++k) x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  }
  g_sink = x;
  return thread_cpu_ns() - begin;
}

struct Round {
  double without_ns, measured_ns, estimated_ns;
};

Round one_round(unsigned spans, unsigned work) {
  const uint64_t without = workload(spans, work);
  chronicle::Config config;
  config.mode = chronicle::Mode::flight;
  config.self_stats_interval = std::chrono::milliseconds(0);
  if (!chronicle::start(config)) {
    fmt::print(stderr, "overhead_estimate: {}\n", chronicle::last_error());
    std::exit(1);
  }
  const uint64_t with = workload(spans, work);
  chronicle::collector::SessionMapping mapping(chronicle::shm_path());
  uint64_t events = 0;
  for (const auto& category : mapping.categories())
    if (category.name == "bench") events = category.events;
  const double estimate = static_cast<double>(events) * static_cast<double>(mapping.event_cost_ps()) / 1000.0;
  const std::string path = chronicle::shm_path();
  chronicle::stop();
  ::unlink(path.c_str());  // no collector: the session's mapping would stay in /dev/shm
  return {static_cast<double>(without), static_cast<double>(with) - static_cast<double>(without), estimate};
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  // Enough events that the first pass through a new session's ring (its page faults) is a small
  // part of the measured difference.
  constexpr unsigned kSpans = 10'000'000;
  fmt::print("{:>5} {:>12} {:>12} {:>12} {:>11} {:>11} {:>7} {:>12}\n", "work", "ns/span off", "measured/ev",
             "estimate/ev", "measured %", "estimate %", "ratio", "min..max");
  for (unsigned work : {0u, 5u, 20u, 200u}) {
    std::vector<double> without, measured, estimated, ratios;
    for (int round = 0; round < rounds; ++round) {
      const Round r = one_round(kSpans, work);
      without.push_back(r.without_ns);
      measured.push_back(r.measured_ns);
      estimated.push_back(r.estimated_ns);
      ratios.push_back(r.estimated_ns / r.measured_ns);
    }
    const double base = median(without);
    fmt::print("{:>5} {:>12.2f} {:>12.2f} {:>12.2f} {:>10.1f}% {:>10.1f}% {:>7.2f} {:>5.2f}..{:.2f}\n", work,
               base / kSpans, median(measured) / (2.0 * kSpans), median(estimated) / (2.0 * kSpans),
               100 * median(measured) / base, 100 * median(estimated) / base, median(ratios),
               *std::min_element(ratios.begin(), ratios.end()), *std::max_element(ratios.begin(), ratios.end()));
  }
}
