// A row of intervals, and what of it a window shows (timeline_index.hpp: IntervalRow,
// visible_in_row).
#include <algorithm>
#include <array>
#include <cmath>

#include "viewer/timeline_index.hpp"

namespace chronicle::viewer {
namespace {

constexpr size_t kFanOut = IntervalRow::kFanOut;
constexpr size_t kMostLevels = 16;  // 16^16 = 2^64: more intervals than a row can hold

uint32_t saturated(uint64_t nanoseconds) {
  return nanoseconds >= IntervalRow::kSaturated ? IntervalRow::kSaturated : static_cast<uint32_t>(nanoseconds);
}

// The levels above level 0 (`count` values) of a summary: level k + 1 has one value per kFanOut
// values of level k, until a level of one value. Their offsets in the summary's column and sizes.
struct Levels {
  std::array<size_t, kMostLevels> offset{};
  std::array<size_t, kMostLevels> size{};
  size_t count = 0;  // levels above level 0
  size_t total = 0;  // values in all of them

  explicit Levels(size_t values) {
    for (size_t below = values; below > 1 && count < kMostLevels; ++count) {
      below = (below + kFanOut - 1) / kFanOut;
      offset[count] = total;
      size[count] = below;
      total += below;
    }
  }
};

// The summary of `count` values, level 0 being value_at(k).
template <class ValueAt>
Column<uint32_t>::Built summarise_values(size_t count, ValueAt value_at) {
  const Levels levels(count);
  Column<uint32_t>::Built out(levels.total);
  for (size_t level = 0; level < levels.count; ++level)
    for (size_t node = 0; node < levels.size[level]; ++node) {
      const size_t below_size = level == 0 ? count : levels.size[level - 1];
      uint32_t most = 0;
      for (size_t k = node * kFanOut; k < std::min(below_size, node * kFanOut + kFanOut); ++k)
        most = std::max(most, level == 0 ? saturated(value_at(k)) : out[levels.offset[level - 1] + k]);
      out[levels.offset[level] + node] = most;
    }
  return out;
}

// Calls visit(k), in increasing order, for every k in [first, last) under blocks whose maxima
// `may_hold` accepts at every level: the only places where a value it accepts can be. (The
// caller checks each k itself.) A summary that does not fit `count` (a damaged index file)
// filters nothing: every k is visited.
template <class MayHold, class Visit>
void for_each_candidate(const Column<uint32_t>& summary, size_t count, size_t first, size_t last, MayHold may_hold,
                        Visit visit) {
  const Levels levels(count);
  if (levels.count == 0 || summary.size() != levels.total) {
    for (size_t k = first; k < last; ++k) visit(k);
    return;
  }
  // span[level]: how many values of level 0 a node of level `level` (0: a value) covers.
  std::array<size_t, kMostLevels + 1> span{};
  span[0] = 1;
  for (size_t level = 1; level <= levels.count; ++level) span[level] = span[level - 1] * kFanOut;
  auto descend = [&](auto& self, size_t level, size_t node) -> void {  // level >= 1
    const size_t below_size = level == 1 ? count : levels.size[level - 2];
    for (size_t child = node * kFanOut; child < std::min(below_size, node * kFanOut + kFanOut); ++child) {
      const size_t child_first = child * span[level - 1];
      if (child_first >= last) return;
      if (child_first + span[level - 1] <= first) continue;
      if (level == 1)
        visit(child);
      else if (may_hold(summary[levels.offset[level - 2] + child]))
        self(self, level - 1, child);
    }
  };
  if (may_hold(summary[levels.offset[levels.count - 1]])) descend(descend, levels.count, 0);
}

}  // namespace

void IntervalRow::add(uint64_t begin, uint64_t end, uint32_t item) {
  begins.push_back(begin);
  ends.push_back(std::max(begin, end));
  items.push_back(item);
}

void IntervalRow::shrink_to_fit() {
  begins.shrink_to_fit();
  ends.shrink_to_fit();
  items.shrink_to_fit();
}

void IntervalRow::summarise() {
  const size_t count = size();
  gap_maxima = summarise_values(count, [this, count](size_t k) -> uint64_t {
    return k + 1 < count && begins[k + 1] > ends[k] ? begins[k + 1] - ends[k] : 0;
  });
  length_maxima = summarise_values(count, [this](size_t k) -> uint64_t { return ends[k] - begins[k]; });
}

void visible_in_row(const IntervalRow& row, uint32_t row_number, uint64_t begin, uint64_t end, double ns_per_pixel,
                    double min_pixels, std::vector<VisibleInterval>& wide, std::vector<BusyBlock>& blocks) {
  const auto& begins = row.begins;
  const auto& ends = row.ends;
  const size_t count = row.size();
  const double min_ns = min_pixels * ns_per_pixel;
  auto is_wide = [&](size_t k) { return static_cast<double>(ends[k] - begins[k]) >= min_ns; };
  // The end of the pixel column after the one holding `time` (or `begin`, when earlier).
  auto reach_after = [&](uint64_t time) {
    time = std::max(time, begin);
    const double column = std::floor(static_cast<double>(time - begin) / ns_per_pixel);
    const double reach = static_cast<double>(begin) + (column + 2) * ns_per_pixel;
    return reach >= static_cast<double>(end) ? end : static_cast<uint64_t>(reach);
  };
  const size_t first = static_cast<size_t>(std::lower_bound(ends.begin(), ends.end(), begin) - ends.begin());
  const size_t last = static_cast<size_t>(std::upper_bound(begins.begin() + first, begins.end(), end) - begins.begin());
  if (first >= last) return;

  // The intervals shown alone, and the intervals after which a block stops: the next begins past
  // the reach of this one's end. That gap is more than a pixel column (the reach is more than a
  // column past the end), so only blocks whose largest gap is half a column or more are visited.
  auto saturated_or = [](uint32_t most, double at_least) {
    return most == IntervalRow::kSaturated || static_cast<double>(most) >= at_least;
  };
  std::vector<uint32_t> alone;
  for_each_candidate(
      row.length_maxima, count, first, last, [&](uint32_t most) { return saturated_or(most, min_ns); },
      [&](size_t k) {
        if (is_wide(k)) alone.push_back(static_cast<uint32_t>(k));
      });
  std::vector<uint32_t> stops;
  for_each_candidate(
      row.gap_maxima, count, first, last - 1, [&](uint32_t most) { return saturated_or(most, ns_per_pixel / 2); },
      [&](size_t k) {
        if (begins[k + 1] > reach_after(ends[k])) stops.push_back(static_cast<uint32_t>(k));
      });

  size_t next_alone = 0;
  size_t next_stop = 0;
  for (size_t i = first; i < last;) {
    while (next_alone < alone.size() && alone[next_alone] < i) ++next_alone;
    if (next_alone < alone.size() && alone[next_alone] == i) {
      wide.push_back({row_number, static_cast<uint32_t>(i)});
      ++i;
      continue;
    }
    size_t block_last = last - 1;
    if (next_alone < alone.size()) block_last = std::min<size_t>(block_last, alone[next_alone] - 1);
    while (next_stop < stops.size() && stops[next_stop] < i) ++next_stop;
    if (next_stop < stops.size()) block_last = std::min<size_t>(block_last, stops[next_stop]);
    blocks.push_back(
        {row_number, begins[i], ends[block_last], static_cast<uint32_t>(i), static_cast<uint32_t>(block_last - i + 1)});
    i = block_last + 1;
  }
}

}  // namespace chronicle::viewer
