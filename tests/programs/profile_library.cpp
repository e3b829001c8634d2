#include "profile_library.hpp"

namespace profile_library {

// Not inlined, and with a body of some length, so that addresses a few bytes into it are still
// in it.
__attribute__((noinline)) int library_function(int rounds) {
  volatile int sum = 0;
  for (int k = 0; k < rounds; ++k) sum = sum + k * 3;
  return sum;
}

}  // namespace profile_library
