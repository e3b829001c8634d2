#include "profile_library.hpp"

namespace profile_library {

// Not inlined, and with a body of some length, so that addresses a few bytes into it are still
// in it. Unsigned: the profiler's tests run it for millions of rounds, where the sum wraps (a
// signed sum would overflow: undefined behaviour, which UBSan stops the program for).
__attribute__((noinline)) int library_function(int rounds) {
  volatile unsigned sum = 0;
  for (int k = 0; k < rounds; ++k) sum = sum + static_cast<unsigned>(k) * 3u;
  return static_cast<int>(sum);
}

}  // namespace profile_library
