// The index's tick-to-ns rounding: the same integers std::llround gives, so that an index built
// with it has the same bytes as one built before it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "viewer/rounded_ns.hpp"

namespace chronicle::viewer {
namespace {

uint64_t as_llround(double ns) {
  return static_cast<uint64_t>(std::llround(ns));
}

TEST(RoundedNs, HalvesRoundUpAsLlroundRoundsThem) {
  for (double ns : {0.0, 0.5, 1.5, 2.5, 3.5, 1e9 + 0.5, 0x1p52 - 0.5, 0x1p51 + 0.5})
    EXPECT_EQ(rounded_ns(ns), as_llround(ns)) << ns;
  EXPECT_EQ(rounded_ns(2.5), 3u);
}

// Where adding 0.5 and truncating goes wrong: the sum itself rounds.
TEST(RoundedNs, JustBelowAHalfAndAboveTwoToThe52StayTheirOwn) {
  const double below_half = std::nextafter(0.5, 0.0);
  EXPECT_EQ(rounded_ns(below_half), 0u);
  for (double ns : {0x1p52 + 1, 0x1p52 + 3, 0x1p53 + 2, 0x1p62, std::nextafter(0x1p63, 0.0)})
    EXPECT_EQ(rounded_ns(ns), as_llround(ns)) << ns;
}

TEST(RoundedNs, OutOfItsRangeIsLlroundsAnswer) {
  for (double ns : {-0.0, -0.4, -2.5, 0x1p63, 0x1p70, std::nan("")}) EXPECT_EQ(rounded_ns(ns), as_llround(ns)) << ns;
}

// Times as the index makes them: ticks since the origin times a clock's ns per tick.
TEST(RoundedNs, TicksScaledByRealClocksRoundAsLlroundRoundsThem) {
  std::mt19937_64 random(45);
  const std::vector<double> ns_per_tick = {1.0,      1e9 / 2'995'200'000.0, 1e9 / 2'100'000'000.0, 1e9 / 3.0, 0.5,
                                           1e9 / 7.0};
  for (double scale : ns_per_tick) {
    for (int k = 0; k < 200'000; ++k) {
      const uint64_t ticks = random() >> (random() % 64);
      const double ns = static_cast<double>(ticks) * scale;
      ASSERT_EQ(rounded_ns(ns), as_llround(ns)) << ticks << " ticks at " << scale << " ns each";
    }
  }
}

}  // namespace
}  // namespace chronicle::viewer
