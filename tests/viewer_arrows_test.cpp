// The arrows a window draws, found whichever way the index finds them (TimelineIndex::ArrowSearch:
// by time, by the rows they join, or from the arrows merged ahead of time), against looking at
// every arrow of the trace: the same arrows drawn, the same counts, the same one standing for
// each, in the same order; as a tree (collapsed or not) and by time, built and read back.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "format/trace_writer.hpp"
#include "reader/trace_reader.hpp"
#include "support.hpp"
#include "viewer/index_cache.hpp"
#include "viewer/task_tree.hpp"
#include "viewer/timeline_index.hpp"

namespace chronicle {
namespace {

using test::TemporaryDirectory;
using viewer::ArrowInView;
using viewer::TaskRowQuery;
using viewer::TimelineIndex;

// What window() draws, found by looking at every arrow: those in [begin, end] whose rows as shown
// reach the rows asked for, merged by pixel columns, rows and kind, the first by arrow_place
// standing for them, in the order of that first.
std::vector<ArrowInView> looking_at_every_arrow(const TimelineIndex& index, uint64_t begin, uint64_t end,
                                                uint32_t width, const TaskRowQuery& rows) {
  const viewer::PixelColumns column{begin, static_cast<double>(end - begin) / width, width};
  const viewer::ShownRows shown(index.task_tree(), rows.by_time ? std::vector<uint32_t>{} : rows.collapsed);
  const auto& arrows = index.arrows();
  const auto place = [&](uint32_t k) { return viewer::arrow_place(arrows[k], k); };
  std::map<std::tuple<uint64_t, uint64_t, uint32_t, uint32_t, viewer::ArrowKind>, size_t> drawn;
  std::vector<ArrowInView> out;
  for (uint32_t k = 0; k < arrows.size(); ++k) {
    const viewer::Arrow& arrow = arrows[k];
    if (arrow.to_time < begin || arrow.from_time > end) continue;
    uint32_t from = 0;
    uint32_t to = 0;
    if (rows.by_time) {
      const auto& time_row = index.task_time_rows().row;
      if (arrow.from_task >= time_row.size() || arrow.to_task >= time_row.size()) continue;
      from = time_row[arrow.from_task];
      to = time_row[arrow.to_task];
    } else {
      const uint32_t from_tree = index.task_lines()[arrow.from_task].row;
      const uint32_t to_tree = index.task_lines()[arrow.to_task].row;
      from = shown.shown_row(from_tree);
      to = shown.shown_row(to_tree);
      if (from == to && from_tree != to_tree) continue;  // inside one collapsed subtree
    }
    if (std::max(from, to) < rows.first || std::min(from, to) >= rows.last) continue;
    const auto key = std::tuple(column(arrow.from_time), column(arrow.to_time), from, to, arrow.kind);
    const auto [found, inserted] = drawn.try_emplace(key, out.size());
    if (inserted) {
      out.push_back({k, 1, from, to});
      continue;
    }
    ArrowInView& merged = out[found->second];
    ++merged.merged;
    if (place(k) < place(merged.arrow)) merged.arrow = k;
  }
  std::sort(out.begin(), out.end(),
            [&](const ArrowInView& a, const ArrowInView& b) { return place(a.arrow) < place(b.arrow); });
  return out;
}

std::string describe(const std::vector<ArrowInView>& arrows, size_t k) {
  if (k >= arrows.size()) return "none";
  const ArrowInView& a = arrows[k];
  return "arrow " + std::to_string(a.arrow) + " x" + std::to_string(a.merged) + " rows " + std::to_string(a.from_row) +
         "->" + std::to_string(a.to_row);
}

// Windows from the whole trace to a ten-thousandth of it, at several places and widths, with a
// screen's rows, a few rows further down, and every row.
void expect_every_window_alike(const TimelineIndex& index, const TaskRowQuery& base,
                               std::set<TimelineIndex::ArrowSearch>& searches) {
  const uint64_t duration = index.duration();
  for (const uint64_t parts : {uint64_t{1}, uint64_t{10}, uint64_t{300}, uint64_t{10'000}})
    for (const uint64_t place : {uint64_t{0}, uint64_t{1}, uint64_t{7}})
      for (const uint32_t width : {1600u, 333u, 40u, 5u, 1u})
        for (const auto& [first, last] : {std::pair(0u, 112u), std::pair(3u, 9u), std::pair(0u, UINT32_MAX)}) {
          const uint64_t length = std::max<uint64_t>(duration / parts, 1);
          const uint64_t begin = std::min(duration, place * length / 3 + place * duration / 9);
          const uint64_t end = begin + length;
          TaskRowQuery rows = base;
          rows.first = first;
          rows.last = last;
          SCOPED_TRACE(::testing::Message() << "window " << begin << ".." << end << " at " << width << " px, rows "
                                            << first << "-" << last << (rows.by_time ? " by time" : " as a tree"));
          const auto found = index.window(begin, end, width, rows).arrows;
          const auto expected = looking_at_every_arrow(index, begin, end, width, rows);
          searches.insert(index.arrow_search(begin, end, rows));
          ASSERT_EQ(found.size(), expected.size());
          for (size_t k = 0; k < found.size(); ++k) {
            const bool alike = found[k].arrow == expected[k].arrow && found[k].merged == expected[k].merged &&
                               found[k].from_row == expected[k].from_row && found[k].to_row == expected[k].to_row;
            ASSERT_TRUE(alike) << "at " << k << ": " << describe(found, k)
                               << ", looking at each: " << describe(expected, k);
          }
        }
}

// Short tasks on a few rows by time, waiting on long ones on a few rows more: arrows of every
// length from a nanosecond to 10 ms, with ends all over the trace, between few pairs of rows, so that arrows reach
// across the bins of every level and levels merge many (made by hand: programs' waits are mostly short).
void write_tasks_with_arrows_of_every_length(const std::string& path) {
  format::TraceDescription description;
  description.clock = {1'000'000'000, 0, 0, 1'700'000'000'000'000'000, 0, 0};  // a tick is a nanosecond
  description.pid = 4244;
  description.process_name = "arrows";
  format::TraceWriter writer(description);
  constexpr uint32_t kThread = 7;
  writer.define_thread(kThread, "main");
  enum class What { create, wait, resolve };
  struct Event {
    uint64_t ticks;
    What what;
    uint64_t task;
    uint64_t other;  // the parent, the awaited task, the resolver
  };
  constexpr uint64_t kShort = 12'000;
  constexpr uint64_t kSpacing = 10'000;
  constexpr uint64_t kChains = 4;
  std::mt19937_64 random(45);
  std::vector<Event> events;
  // Long tasks one after another on each of a few chains, each 0.5 to 10 ms: ids past kShort.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> chains(kChains);  // (end, task)
  uint64_t next_long = kShort + 1;
  for (auto& chain : chains)
    for (uint64_t begin = 1; begin < kShort * kSpacing;) {
      const uint64_t end = begin + 500'000 + random() % 9'500'000;
      chain.emplace_back(end, next_long);
      events.push_back({begin, What::create, next_long, 0});
      events.push_back({end, What::resolve, next_long, next_long});
      ++next_long;
      begin = end + 1;
    }
  for (uint64_t task = 1; task <= kShort; ++task) {
    const uint64_t created = task * kSpacing + random() % kSpacing;
    const uint64_t parent = task > 1 && random() % 2 == 0 ? task - 1 : 0;
    events.push_back({created, What::create, task, parent});
    const uint64_t wait = created + random() % 5'000;
    const auto& chain = chains[random() % kChains];
    const auto awaited = std::lower_bound(chain.begin(), chain.end(), std::pair(wait, uint64_t{0}));
    if (random() % 2 == 0 && awaited != chain.end()) events.push_back({wait, What::wait, task, awaited->second});
    events.push_back({created + 5'000 + random() % 3'000, What::resolve, task, random() % 2 == 0 ? task : task - 1});
  }
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.ticks < b.ticks; });
  for (const Event& event : events) {
    if (event.what == What::create)
      writer.add(kThread, format::EventId::task_create, event.ticks,
                 {event.task, event.other, uint64_t{1}, uint64_t{0}});
    if (event.what == What::wait)
      writer.add(kThread, format::EventId::task_wait, event.ticks, {event.task, event.other});
    if (event.what == What::resolve)
      writer.add(kThread, format::EventId::task_resolve, event.ticks,
                 {event.task, event.other, uint64_t{0}, std::string_view{}});
  }
  writer.write(path);
}

class ArrowSearch : public ::testing::Test {
 protected:
  // Enough arrows that they are merged ahead of time (thousands), few enough to check quickly.
  static void SetUpTestSuite() {
    directory_ = new TemporaryDirectory;
    trace_ = *directory_ / "trace";
    write_tasks_with_arrows_of_every_length(trace_);
  }
  static void TearDownTestSuite() {
    delete directory_;
    directory_ = nullptr;
  }
  static inline TemporaryDirectory* directory_ = nullptr;
  static inline std::string trace_;
};

TEST_F(ArrowSearch, EveryWayFindsTheArrowsThatLookingAtEachFindsBuiltAndReadBack) {
  for (const bool read_back : {false, true}) {
    SCOPED_TRACE(read_back ? "read back from the index file" : "built");
    const viewer::OpenedIndex opened = viewer::open_index(trace_);
    ASSERT_EQ(opened.from_cache, read_back) << opened.cache_problem;
    const TimelineIndex& index = opened.index;
    ASSERT_GT(index.arrows().size(), 8'000u);
    std::set<TimelineIndex::ArrowSearch> searches;
    TaskRowQuery by_time;
    by_time.by_time = true;
    expect_every_window_alike(index, by_time, searches);
    expect_every_window_alike(index, TaskRowQuery{}, searches);
    // Collapsed: the first tasks with a subtree, which hides some rows and arrows.
    TaskRowQuery collapsed;
    for (uint32_t task = 0; task < index.task_lines().size() && collapsed.collapsed.size() < 5; ++task)
      if (index.task_tree().subtree[task] > 1) collapsed.collapsed.push_back(task);
    ASSERT_FALSE(collapsed.collapsed.empty());
    expect_every_window_alike(index, collapsed, searches);
    EXPECT_EQ(searches, (std::set{TimelineIndex::ArrowSearch::by_length, TimelineIndex::ArrowSearch::by_rows,
                                  TimelineIndex::ArrowSearch::by_levels}))
        << "a way of finding arrows went untried";
  }
}

// The levels alone, on arrows made at random (few pairs of rows, lengths of every scale, times
// all over), at windows of every size and place: the units a window gets add up, per place
// drawn, to the arrows there, and each place's leader is its first arrow by arrow_place.
TEST(ArrowLevels, AWindowsUnitsAreEveryArrowInItDrawnAlike) {
  std::mt19937_64 random(4545);
  std::vector<viewer::Arrow> arrows(30'000);
  for (viewer::Arrow& arrow : arrows) {
    arrow.kind = static_cast<viewer::ArrowKind>(random() % 3);
    arrow.from_task = static_cast<uint32_t>(random() % 6);  // the task's row, here
    arrow.to_task = static_cast<uint32_t>(random() % 6);
    arrow.from_time = random() % 100'000'000;
    arrow.to_time = arrow.from_time + (random() % 4 == 0 ? 0 : random() % (uint64_t{1} << (random() % 27)));
  }
  const auto rows_of = [](const viewer::Arrow& arrow) -> std::optional<std::pair<uint32_t, uint32_t>> {
    if (arrow.from_task == 5 && arrow.to_task == 5) return std::nullopt;  // has no rows
    return std::pair(arrow.from_task, arrow.to_task);
  };
  const viewer::ArrowLevels levels = viewer::build_arrow_levels(arrows, rows_of);
  ASSERT_GE(levels.levels.size(), 3u) << "too few levels to look into one from another";
  const auto place = [&](uint32_t k) { return viewer::arrow_place(arrows[k], k); };
  using Drawn = std::tuple<uint64_t, uint64_t, uint32_t, uint32_t, viewer::ArrowKind>;
  size_t groups_taken_whole = 0;
  for (int window = 0; window < 300; ++window) {
    const uint64_t begin = random() % 110'000'000;
    const uint64_t end = begin + 1 + random() % (uint64_t{1} << (10 + random() % 18));
    const auto width = static_cast<uint32_t>(1 + random() % 2'000);
    const uint32_t hidden_row = static_cast<uint32_t>(random() % 6);  // rows not asked for
    SCOPED_TRACE(::testing::Message() << "window " << begin << ".." << end << " at " << width << " px");
    const viewer::PixelColumns column{begin, static_cast<double>(end - begin) / width, width};
    const auto shown_rows = [&](const viewer::Arrow& arrow) -> std::optional<std::pair<uint32_t, uint32_t>> {
      const auto rows = rows_of(arrow);
      if (!rows || rows->first == hidden_row || rows->second == hidden_row) return std::nullopt;
      return rows;
    };
    std::map<Drawn, std::pair<uint32_t, uint32_t>> expected;  // leader, count
    for (uint32_t k = 0; k < arrows.size(); ++k) {
      const viewer::Arrow& arrow = arrows[k];
      const auto rows = shown_rows(arrow);
      if (!rows || arrow.to_time < begin || arrow.from_time > end) continue;
      const Drawn at{column(arrow.from_time), column(arrow.to_time), rows->first, rows->second, arrow.kind};
      auto [found, inserted] = expected.try_emplace(at, k, 0);
      if (place(k) < place(found->second.first)) found->second.first = k;
      ++found->second.second;
    }
    std::map<Drawn, std::pair<uint32_t, uint32_t>> units;
    viewer::for_each_arrow_unit(levels, arrows, begin, end, column, shown_rows, [&](const viewer::ArrowUnit& unit) {
      const viewer::Arrow& leader = arrows[unit.leader];
      EXPECT_EQ(unit.from_time, leader.from_time);
      EXPECT_EQ(unit.to_time, leader.to_time);
      EXPECT_EQ(unit.kind, leader.kind);
      groups_taken_whole += unit.count > 1;
      const Drawn at{column(unit.from_time), column(unit.to_time), unit.rows.first, unit.rows.second, unit.kind};
      auto [found, inserted] = units.try_emplace(at, unit.leader, 0);
      if (place(unit.leader) < place(found->second.first)) found->second.first = unit.leader;
      found->second.second += unit.count;
    });
    ASSERT_EQ(units, expected);
  }
  EXPECT_GT(groups_taken_whole, 1'000u) << "the windows never took groups whole";
}

}  // namespace
}  // namespace chronicle
