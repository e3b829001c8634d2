// The loop each tracer runs in bench/side_by_side.sh: SPANS spans one after another on one thread,
// each around an empty statement the compiler must keep, timed by the program itself. The time
// inside the loop is the writing thread's own cost; what the script measures around the process
// (wall and the CPU of every process and thread) is what the user pays.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace side_by_side {

struct Arguments {
  uint64_t spans = 0;
  bool untraced = false;  // the same loop without the span: the baseline
};

inline Arguments arguments(int argc, char** argv, const char* program) {
  Arguments parsed;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--untraced") == 0)
      parsed.untraced = true;
    else
      parsed.spans = std::strtoull(argv[i], nullptr, 10);
  }
  if (parsed.spans == 0) {
    std::fprintf(stderr, "usage: %s SPANS [--untraced]\n", program);
    std::exit(2);
  }
  return parsed;
}

template <typename Span>
double timed_loop(uint64_t spans, Span&& span) {
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < spans; ++i) span();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline void empty_statement() {
  asm volatile("" ::: "memory");
}

inline void report(const char* tracer, uint64_t spans, double loop_seconds) {
  std::printf("side_by_side: tracer=%s spans=%llu loop_seconds=%.6f\n", tracer, static_cast<unsigned long long>(spans),
              loop_seconds);
  std::fflush(stdout);
}

}  // namespace side_by_side
