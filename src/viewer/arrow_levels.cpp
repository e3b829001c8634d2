#include "viewer/arrow_levels.hpp"

#include "viewer/near_search.hpp"

#include <algorithm>
#include <array>
#include <limits>

namespace chronicle::viewer {
namespace {

constexpr uint32_t kLevelStep = 2;      // bits between levels: a group holds up to 4 x 4 bins of the next
constexpr size_t kFewestArrows = 4096;  // below this, windows read every arrow soon enough
constexpr size_t kMergedEnough = 4;     // a level is kept while it has at most a quarter as many groups as arrows

// x's 32 bits at the even places of a 64-bit word.
uint64_t spread(uint32_t x) {
  uint64_t v = x;
  v = (v | v << 16) & 0x0000FFFF0000FFFFULL;
  v = (v | v << 8) & 0x00FF00FF00FF00FFULL;
  v = (v | v << 4) & 0x0F0F0F0F0F0F0F0FULL;
  v = (v | v << 2) & 0x3333333333333333ULL;
  v = (v | v << 1) & 0x5555555555555555ULL;
  return v;
}

struct Entry {
  uint32_t from_row = 0;
  uint32_t to_row = 0;
  uint32_t kind = 0;
  uint32_t arrow = 0;
  uint64_t high = 0;  // the Morton code of (from time, to time): the top 32 bits of each, interleaved
  uint64_t low = 0;   // and the bottom 32
  auto key() const { return std::tie(from_row, to_row, kind, high, low, arrow); }
};

Entry entry_of(const Arrow& arrow, uint32_t k, std::pair<uint32_t, uint32_t> rows) {
  const auto interleave = [](uint32_t from, uint32_t to) { return spread(from) << 1 | spread(to); };
  return {rows.first,
          rows.second,
          static_cast<uint32_t>(arrow.kind),
          k,
          interleave(static_cast<uint32_t>(arrow.from_time >> 32), static_cast<uint32_t>(arrow.to_time >> 32)),
          interleave(static_cast<uint32_t>(arrow.from_time), static_cast<uint32_t>(arrow.to_time))};
}

// How many of the Morton code's top bits two neighbours share (128 when equal), or -1 when their
// rows or kind differ: they are in one group at shift s when this is at least 2 x (64 - s).
int shared_bits(const Entry& a, const Entry& b) {
  if (a.from_row != b.from_row || a.to_row != b.to_row || a.kind != b.kind) return -1;
  if (a.high != b.high) return std::countl_zero(a.high ^ b.high);
  if (a.low != b.low) return 64 + std::countl_zero(a.low ^ b.low);
  return 128;
}

bool same_group(int shared, uint32_t shift) {
  return shared >= 2 * (64 - static_cast<int>(shift));
}

// The shifts worth a level, coarsest first: from the one whose one bin holds every time, down by
// kLevelStep while a level merges enough; a level that merges no more than the next finer one is
// left for it.
std::vector<uint32_t> level_shifts(const std::vector<int>& shared, uint64_t latest, size_t arrows) {
  std::array<size_t, 130> at_least{};  // at_least[b + 1]: neighbours sharing b bits or more
  for (const int bits : shared) ++at_least[static_cast<size_t>(bits + 1)];
  for (size_t b = at_least.size() - 1; b > 0; --b) at_least[b - 1] += at_least[b];
  const auto groups = [&](uint32_t shift) {
    return arrows - at_least[static_cast<size_t>(2 * (64 - static_cast<int>(shift)) + 1)];
  };
  std::vector<uint32_t> shifts;
  for (int shift = std::bit_width(latest); shift >= 0; shift -= kLevelStep) {
    const auto s = static_cast<uint32_t>(shift);
    if (groups(s) * kMergedEnough > arrows) break;
    if (!shifts.empty() && groups(shifts.back()) == groups(s)) shifts.pop_back();
    shifts.push_back(s);
  }
  return shifts;
}

}  // namespace

ArrowLevels build_arrow_levels(std::span<const Arrow> arrows, const ArrowRowsOf& rows_of) {
  ArrowLevels out;
  if (arrows.size() < kFewestArrows) return out;
  std::vector<Entry> entries;
  entries.reserve(arrows.size());
  uint64_t latest = 0;
  for (uint32_t k = 0; k < arrows.size(); ++k)
    if (const auto rows = rows_of(arrows[k])) {
      entries.push_back(entry_of(arrows[k], k, *rows));
      latest = std::max(latest, arrows[k].to_time);
    }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.key() < b.key(); });
  std::vector<int> shared(entries.size(), -1);  // with the one before
  for (size_t i = 1; i < entries.size(); ++i) shared[i] = shared_bits(entries[i - 1], entries[i]);
  const std::vector<uint32_t> shifts = level_shifts(shared, latest, entries.size());
  if (shifts.empty()) return out;
  out.order.reserve(entries.size());
  for (const Entry& entry : entries) out.order.push_back(entry.arrow);
  const auto before = [&](uint32_t a, uint32_t b) { return arrow_place(arrows[a], a) < arrow_place(arrows[b], b); };
  out.levels.resize(shifts.size());
  // The finest level from the arrows, each coarser one from the level under it.
  for (size_t l = shifts.size(); l-- > 0;) {
    ArrowLevel& level = out.levels[l];
    level.shift = shifts[l];
    for (uint32_t i = 0; i < entries.size(); ++i)
      if (i == 0 || !same_group(shared[i], level.shift)) level.first.push_back(i);
    level.first.push_back(static_cast<uint32_t>(entries.size()));
    const size_t groups = level.first.size() - 1;
    level.leader.reserve(groups);
    level.from_times.reserve(groups);
    level.to_times.reserve(groups);
    size_t child = 0;  // the finer level's group
    for (size_t g = 0; g < groups; ++g) {
      uint32_t leader = 0;
      bool any = false;
      const auto consider = [&](uint32_t k) {
        if (!any || before(k, leader)) leader = k;
        any = true;
      };
      if (l + 1 == shifts.size()) {
        for (uint32_t i = level.first[g]; i < level.first[g + 1]; ++i) consider(out.order[i]);
      } else {
        const ArrowLevel& finer = out.levels[l + 1];
        for (; child + 1 < finer.first.size() && finer.first[child] < level.first[g + 1]; ++child)
          consider(finer.leader[child]);
      }
      level.leader.push_back(leader);
      level.from_times.push_back(arrows[leader].from_time);
      level.to_times.push_back(arrows[leader].to_time);
    }
  }
  return out;
}

namespace {

constexpr uint32_t kPrefetchAhead = 8;

// Walks the levels depth first, so that at every level the groups it visits come in order: where
// a group's finer groups begin is found from where the last search at that level ended, a few
// places on, rather than by a search of the whole level.
struct UnitWalk {
  const ArrowLevels& levels;
  std::span<const Arrow> arrows;
  uint64_t begin;
  uint64_t end;
  const PixelColumns& column;
  const std::function<void(const ArrowUnit&)>& unit;
  std::vector<size_t> searched_to = std::vector<size_t>(levels.levels.size(), 0);

  // Groups [first_group, last_group) of level l, all of `kind` between `rows`.
  void groups(size_t l, size_t first_group, size_t last_group, ArrowKind kind, std::pair<uint32_t, uint32_t> rows) {
    const ArrowLevel& level = levels.levels[l];
    const uint64_t bin_last =
        level.shift >= 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << level.shift) - 1;
    for (size_t g = first_group; g < last_group; ++g) {
      const uint64_t from_first = level.from_times[g] & ~bin_last;
      const uint64_t to_first = level.to_times[g] & ~bin_last;
      const uint64_t from_last = from_first | bin_last;
      const uint64_t to_last = to_first | bin_last;
      if (from_first > end || to_last < begin) continue;  // none of the group is in the window
      const uint32_t first = level.first[g];
      const uint32_t last = level.first[g + 1];
      if (from_last <= end && to_first >= begin && column(from_first) == column(from_last) &&
          column(to_first) == column(to_last)) {
        // All of it in the window, drawn alike.
        unit({level.leader[g], last - first, level.from_times[g], level.to_times[g], kind, rows});
      } else if (l + 1 < levels.levels.size()) {
        const std::span<const uint32_t> finer = levels.levels[l + 1].first;
        const size_t lower = lower_bound_after(finer, searched_to[l + 1], finer.size() - 1, first);
        const size_t upper = lower_bound_after(finer, lower, finer.size() - 1, last);
        searched_to[l + 1] = upper;
        groups(l + 1, lower, upper, kind, rows);
      } else {
        leaves(first, last, kind, rows);
      }
    }
  }

  // The arrows order[first, last) one by one.
  void leaves(uint32_t first, uint32_t last, ArrowKind kind, std::pair<uint32_t, uint32_t> rows) const {
    const std::span<const uint32_t> order = levels.order;
    for (uint32_t i = first; i < last; ++i) {
      // The arrows are far apart in memory: ask for one a few ahead while this one is read.
      if (i + kPrefetchAhead < last) __builtin_prefetch(&arrows[order[i + kPrefetchAhead]]);
      const uint32_t k = order[i];
      const Arrow& arrow = arrows[k];
      if (arrow.to_time >= begin && arrow.from_time <= end) unit({k, 1, arrow.from_time, arrow.to_time, kind, rows});
    }
  }
};

}  // namespace

void for_each_arrow_unit(const ArrowLevels& levels, std::span<const Arrow> arrows, uint64_t begin, uint64_t end,
                         const PixelColumns& column, const ArrowRowsOf& shown_rows,
                         const std::function<void(const ArrowUnit&)>& unit) {
  if (levels.levels.empty()) return;
  UnitWalk walk{levels, arrows, begin, end, column, unit};
  // A coarsest group's arrows have one pair of rows and one kind (the order begins with them).
  const ArrowLevel& top = levels.levels.front();
  for (size_t g = 0; g < top.leader.size(); ++g) {
    const Arrow& leader = arrows[top.leader[g]];
    if (const auto rows = shown_rows(leader)) walk.groups(0, g, g + 1, leader.kind, *rows);
  }
}

}  // namespace chronicle::viewer
