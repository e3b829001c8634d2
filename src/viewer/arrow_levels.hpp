// Task arrows, and the same arrows merged ahead of time for windows that show many of them.
//
// A window draws arrows at pixel columns: those with the same columns, rows and kind are one
// arrow drawn, with a count (TimelineIndex::window_arrows). A whole-trace window over a screen of
// rows by time has nearly every arrow of the trace in it (rows by time are few: a row holds task
// after task), so finding them one by one reads all of them: 3.6 M at 100 M events (timeline_demo).
//
// ArrowLevels groups arrows that are alike ahead of time: same rows, same kind, and both ends in
// the same time bin of 2^shift ns, at a few bin widths (levels, coarsest first, each one's
// groups cut into the next's). A window takes a group whole when both its bins fall within one
// pixel column each, and looks into it otherwise (the next level's groups, then single arrows),
// so what it draws and counts is exactly what looking at every arrow gives; only how many it
// reads changes.
//
// The groups are runs of one order of the arrows: by rows and kind, then by the two times'
// bits interleaved, highest first (a Morton order), in which arrows whose times agree on their
// top bits are next to each other for any number of bits.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "viewer/column.hpp"

namespace chronicle::viewer {

// created: from the creating task to the created one, at the creation.
enum class ArrowKind : uint8_t { wait, resolve, created };

// A wait goes from the waiting task, when it waits, to the awaited task where it resolves (or
// the wait's time when it never does); a resolution from the resolver to the resolved task, at
// the time of the resolution.
struct Arrow {  // written to the index file as bytes: its padding is named, and zeroed
  ArrowKind kind = ArrowKind::wait;
  uint8_t unused[3] = {};
  uint32_t from_task = 0;  // task indexes
  uint32_t to_task = 0;
  uint32_t unused_too = 0;
  uint64_t from_time = 0;
  uint64_t to_time = 0;
};

// Where arrows come before others when they merge: the first, in this order, stands for those
// drawn alike (by length class, the bit width of the length in ns; then by time; then by index,
// the order arrows_by_length_ keeps them in).
using ArrowPlace = std::tuple<int, uint64_t, uint32_t>;
inline ArrowPlace arrow_place(uint64_t from_time, uint64_t to_time, uint32_t k) {
  return {static_cast<int>(std::bit_width(to_time - from_time)), from_time, k};
}
inline ArrowPlace arrow_place(const Arrow& arrow, uint32_t k) {
  return arrow_place(arrow.from_time, arrow.to_time, k);
}

struct ArrowLevel {
  uint32_t shift = 0;           // bins of 2^shift ns
  Column<uint32_t> first;       // group g is ArrowLevels::order[first[g], first[g + 1]); one more at the end
  Column<uint32_t> leader;      // group g's first arrow by arrow_place
  Column<uint64_t> from_times;  // the leader's, so that a window reads no arrow of a group it takes whole
  Column<uint64_t> to_times;
};

struct ArrowLevels {
  Column<uint32_t> order;          // the arrows that have rows, in the groups' order
  std::vector<ArrowLevel> levels;  // coarsest first; none when merging would not pay
  size_t top_groups() const { return levels.empty() ? 0 : levels.front().leader.size(); }
};

// An arrow's rows (from, to), or none: it has no row that way, or (as a window asks) its rows are
// not among those asked for. None leaves it out.
using ArrowRowsOf = std::function<std::optional<std::pair<uint32_t, uint32_t>>(const Arrow&)>;

ArrowLevels build_arrow_levels(std::span<const Arrow> arrows, const ArrowRowsOf& rows_of);

// A time's pixel column in a window of `width` pixels from `begin`: 1 to width, 0 before and
// width + 2 past it. It never goes down as time goes up.
struct PixelColumns {
  uint64_t begin = 0;
  double ns_per_pixel = 1;
  uint32_t width = 0;
  uint64_t operator()(uint64_t time) const {
    const double pixels = (static_cast<double>(time) - static_cast<double>(begin)) / ns_per_pixel;
    return static_cast<uint64_t>(std::clamp(pixels, -1.0, static_cast<double>(width) + 1) + 1);
  }
};

// `count` arrows drawn alike (the same pixel columns, rows and kind) as their leader, the first
// of them by arrow_place, is drawn.
struct ArrowUnit {
  uint32_t leader = 0;
  uint32_t count = 1;
  uint64_t from_time = 0;  // the leader's
  uint64_t to_time = 0;
  ArrowKind kind = ArrowKind::wait;
  std::pair<uint32_t, uint32_t> rows;  // as drawn, from and to
  ArrowPlace place() const { return arrow_place(from_time, to_time, leader); }
};

// Everything drawn in [begin, end], as units of arrows drawn alike; `shown_rows`: the rows they
// are drawn between (alike for a group's arrows).
void for_each_arrow_unit(const ArrowLevels& levels, std::span<const Arrow> arrows, uint64_t begin, uint64_t end,
                         const PixelColumns& column, const ArrowRowsOf& shown_rows,
                         const std::function<void(const ArrowUnit&)>& unit);

}  // namespace chronicle::viewer
