// Binary searches in long sorted arrays of times that begin with a guess. A window over a long
// row searches it once per pixel column, each search over what is left of the row: a plain binary
// search then takes some 20 probes far apart, each a cache miss (and, in a mapped index, maybe a
// page fault) at 100 M events. Times in a row are spread fairly evenly, so the place a time
// would have if they were even is usually a few entries from where it is: searching outward from
// there in doubling steps, then by halves in the last step, takes a few probes close together,
// and never more than about twice a binary search's when the guess is far off.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace chronicle::viewer {

// The first k in [first, last) where !before(times[k]), `before` true for a prefix of the range
// (as std::partition_point): before(t) = t < value is std::lower_bound, t <= value upper_bound.
template <class Before>
size_t partition_point_near(std::span<const uint64_t> times, size_t first, size_t last, uint64_t value, Before before) {
  if (first >= last || !before(times[first])) return first;
  if (before(times[last - 1])) return last;
  // times[first] is before, times[last - 1] is not: the point is in (first, last - 1].
  const uint64_t low = times[first];
  const uint64_t high = times[last - 1];
  const double fraction =
      value <= low ? 0.0 : std::min(1.0, static_cast<double>(value - low) / static_cast<double>(high - low));
  size_t guess = first + static_cast<size_t>(fraction * static_cast<double>(last - 1 - first));
  guess = std::clamp(guess, first, last - 1);
  // Widen [below, above] around the guess until times[below] is before and times[above] is not.
  size_t below = guess;
  size_t above = guess;
  if (before(times[guess])) {
    for (size_t step = 1;; step *= 2) {
      above = std::min(below + step, last - 1);
      if (!before(times[above])) break;
      below = above;
    }
  } else {
    for (size_t step = 1;; step *= 2) {
      below = above - std::min(step, above - first);
      if (before(times[below])) break;
      above = below;
    }
  }
  const auto* begin = times.data();
  return static_cast<size_t>(
      std::partition_point(begin + below + 1, begin + above, [&](uint64_t time) { return before(time); }) - begin);
}

// std::upper_bound and std::lower_bound over times[first, last), by partition_point_near.
inline size_t upper_bound_near(std::span<const uint64_t> times, size_t first, size_t last, uint64_t value) {
  return partition_point_near(times, first, last, value, [value](uint64_t time) { return time <= value; });
}
inline size_t lower_bound_near(std::span<const uint64_t> times, size_t first, size_t last, uint64_t value) {
  return partition_point_near(times, first, last, value, [value](uint64_t time) { return time < value; });
}

// std::lower_bound over places[first, last), for a value expected a few places after `first`:
// steps of 1, 2, 4, ... from there, then by halves in the last step.
inline size_t lower_bound_after(std::span<const uint32_t> places, size_t first, size_t last, uint32_t value) {
  if (first >= last || places[first] >= value) return first;
  size_t below = first;  // places[below] < value
  size_t above = last;   // places[above] >= value, or the end
  for (size_t step = 1; below + step < last; step *= 2) {
    if (places[below + step] >= value) {
      above = below + step;
      break;
    }
    below += step;
  }
  return static_cast<size_t>(std::lower_bound(places.begin() + static_cast<std::ptrdiff_t>(below) + 1,
                                              places.begin() + static_cast<std::ptrdiff_t>(above), value) -
                             places.begin());
}

}  // namespace chronicle::viewer
