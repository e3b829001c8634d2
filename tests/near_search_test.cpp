// The searches that begin with a guess (viewer/near_search.hpp) give what std::lower_bound and
// std::upper_bound give, on times spread evenly, in bursts, with long runs of one time, and at
// every range's ends.
#include "viewer/near_search.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace chronicle::viewer {
namespace {

std::vector<uint64_t> sorted_times(std::mt19937_64& random, size_t count, int shape) {
  std::vector<uint64_t> times(count);
  uint64_t time = random() % 1000;
  for (uint64_t& t : times) {
    if (shape == 0) time += random() % 100;                                  // fairly even
    if (shape == 1) time += random() % 50 == 0 ? random() % 10'000'000 : 1;  // bursts far apart
    if (shape == 2) time += random() % 5 == 0 ? 1 : 0;                       // runs of one time
    if (shape == 3) time += uint64_t{1} << (random() % 40);                  // every scale
    t = time;
  }
  return times;
}

TEST(NearSearch, FindsWhatABinarySearchFinds) {
  std::mt19937_64 random(77);
  size_t checked = 0;
  for (int shape = 0; shape < 4; ++shape)
    for (const size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{100}, size_t{50'000}}) {
      const std::vector<uint64_t> times = sorted_times(random, count, shape);
      for (int query = 0; query < 2'000; ++query) {
        const size_t first = count == 0 ? 0 : random() % (count + 1);
        const size_t last = first + (count == first ? 0 : random() % (count - first + 1));
        uint64_t value = random() % 4 == 0 || count == 0 ? random() : times[random() % count] + random() % 3 - 1;
        if (query % 50 == 0) value = 0;
        if (query % 50 == 1) value = UINT64_MAX;
        SCOPED_TRACE(::testing::Message() << "shape " << shape << ", " << count << " times, [" << first << ", " << last
                                          << "), value " << value);
        const auto begin = times.begin();
        ASSERT_EQ(lower_bound_near(times, first, last, value),
                  static_cast<size_t>(std::lower_bound(begin + first, begin + last, value) - begin));
        ASSERT_EQ(upper_bound_near(times, first, last, value),
                  static_cast<size_t>(std::upper_bound(begin + first, begin + last, value) - begin));
        ++checked;
      }
    }
  EXPECT_EQ(checked, 4u * 6u * 2'000u);
}

// lower_bound_after steps out from the range's first place: the value near it, far from it, before
// it and past the end all give std::lower_bound's answer.
TEST(NearSearch, LowerBoundAfterFindsWhatABinarySearchFinds) {
  std::mt19937_64 random(78);
  for (const size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{1'000}, size_t{70'000}}) {
    std::vector<uint32_t> places(count);
    uint32_t place = 0;
    for (uint32_t& p : places) p = place += static_cast<uint32_t>(random() % 4 == 0 ? random() % 1'000 : 1);
    for (int query = 0; query < 3'000; ++query) {
      const size_t first = count == 0 ? 0 : random() % (count + 1);
      const size_t last = first + (count == first ? 0 : random() % (count - first + 1));
      const size_t near = std::min(count, first + static_cast<size_t>(random() % (query % 3 == 0 ? 40 : count + 1)));
      uint32_t value = near < count ? places[near] + static_cast<uint32_t>(random() % 3) - 1 : place + 1;
      if (query % 100 == 0) value = 0;
      SCOPED_TRACE(::testing::Message() << count << " places, [" << first << ", " << last << "), value " << value);
      const auto begin = places.begin();
      ASSERT_EQ(lower_bound_after(places, first, last, value),
                static_cast<size_t>(std::lower_bound(begin + first, begin + last, value) - begin));
    }
  }
}

}  // namespace
}  // namespace chronicle::viewer
