// A time scaled from ticks to ns, rounded as the index has always rounded it (std::llround: to
// the nearest, halves away from zero), without a call into libm for each of the index's times.
#pragma once

#include <cmath>
#include <cstdint>

namespace chronicle::viewer {

// `ns` rounded to the nearest integer, halves up: std::llround(ns) for every ns in [0, 2^63).
// In that range the cast truncates exactly, and `ns - whole` is exact (a double's fraction below
// 2^52; no fraction at all from 2^52 on), so the comparison with 0.5 decides as llround does.
// Anything else (negative, NaN, too large for the cast) is llround's to answer.
inline uint64_t rounded_ns(double ns) {
  if (!(ns >= 0 && ns < 0x1p63)) return static_cast<uint64_t>(std::llround(ns));
  const auto whole = static_cast<uint64_t>(ns);
  return whole + (ns - static_cast<double>(whole) >= 0.5 ? 1 : 0);
}

}  // namespace chronicle::viewer
