#include "format/clock.hpp"

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace chronicle::recorder {

uint64_t read_clock_ns(clockid_t id) {
  timespec now{};
  clock_gettime(id, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(now.tv_nsec);
}

namespace {

uint64_t read_tsc() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return 0;
#endif
}

// A (ticks, monotonic) pair taken in the narrowest window of a few tries.
struct Reference {
  uint64_t ticks;
  uint64_t monotonic_ns;
};

Reference reference_point() {
  Reference best{};
  uint64_t best_window = ~uint64_t{0};
  for (int attempt = 0; attempt < 16; ++attempt) {
    const uint64_t before = read_clock_ns(CLOCK_MONOTONIC);
    const uint64_t ticks = read_tsc();
    const uint64_t after = read_clock_ns(CLOCK_MONOTONIC);
    if (after - before < best_window) {
      best_window = after - before;
      best = {ticks, before + (after - before) / 2};
    }
  }
  return best;
}

}  // namespace

uint64_t read_ticks_now(const format::ClockCalibration& clock) {
  return clock.is_tsc ? read_tsc() : read_clock_ns(CLOCK_MONOTONIC);
}

bool tsc_is_usable() {
#if defined(__x86_64__) || defined(__i386__)
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0)
      return line.find(" constant_tsc") != std::string::npos && line.find(" nonstop_tsc") != std::string::npos;
  }
#endif
  return false;
}

uint64_t read_realtime_ns() {
  return read_clock_ns(CLOCK_REALTIME);
}

uint64_t read_monotonic_ns() {
  return read_clock_ns(CLOCK_MONOTONIC);
}

namespace {

// For tests of clock alignment across hosts: CHRONICLE_TEST_WALL_CLOCK_OFFSET_NS (signed) moves
// the wall-clock reference the trace records, as a host whose clock is off by that much would.
int64_t test_wall_clock_offset_ns() {
  const char* text = std::getenv("CHRONICLE_TEST_WALL_CLOCK_OFFSET_NS");
  return text && *text ? std::strtoll(text, nullptr, 10) : 0;
}

format::ClockCalibration measure_clock(bool use_tsc) {
  format::ClockCalibration clock{};
  if (!use_tsc) {
    clock.is_tsc = 0;
    clock.frequency_hz = 1'000'000'000ULL;
    clock.monotonic_ns_at_start = read_clock_ns(CLOCK_MONOTONIC);
    clock.realtime_ns_at_start = read_clock_ns(CLOCK_REALTIME);
    clock.ticks_at_start = clock.monotonic_ns_at_start;
    return clock;
  }
  clock.is_tsc = 1;
  const Reference first = reference_point();
  clock.realtime_ns_at_start = read_clock_ns(CLOCK_REALTIME) - (read_clock_ns(CLOCK_MONOTONIC) - first.monotonic_ns);
  timespec pause{0, 5'000'000};
  nanosleep(&pause, nullptr);
  const Reference second = reference_point();
  clock.ticks_at_start = first.ticks;
  clock.monotonic_ns_at_start = first.monotonic_ns;
  clock.frequency_hz =
      static_cast<uint64_t>(std::llround(static_cast<long double>(second.ticks - first.ticks) * 1e9L /
                                         static_cast<long double>(second.monotonic_ns - first.monotonic_ns)));
  return clock;
}

}  // namespace

format::ClockCalibration calibrate_clock(bool use_tsc) {
  format::ClockCalibration clock = measure_clock(use_tsc);
  clock.realtime_ns_at_start += static_cast<uint64_t>(test_wall_clock_offset_ns());
  return clock;
}

uint64_t refined_frequency(const format::ClockCalibration& clock) {
  if (!clock.is_tsc) return clock.frequency_hz;
  const Reference now = reference_point();
  if (now.monotonic_ns <= clock.monotonic_ns_at_start + 200'000'000ULL || now.ticks <= clock.ticks_at_start)
    return clock.frequency_hz;
  const long double refined = static_cast<long double>(now.ticks - clock.ticks_at_start) * 1e9L /
                              static_cast<long double>(now.monotonic_ns - clock.monotonic_ns_at_start);
  // A reboot since the session began (or another machine) gives nonsense: keep the estimate.
  if (std::fabs(refined / static_cast<long double>(clock.frequency_hz) - 1.0L) > 0.01L) return clock.frequency_hz;
  return static_cast<uint64_t>(std::llround(refined));
}

}  // namespace chronicle::recorder
