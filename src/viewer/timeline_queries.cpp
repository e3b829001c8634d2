// What the viewer asks a built timeline index: the window at a level of detail, times, tasks,
// search, range stats.
#include "viewer/timeline_index.hpp"

#include <fmt/format.h>

#include "analysis/sample_stacks.hpp"
#include "reader/run_on_threads.hpp"
#include "viewer/drawn_key.hpp"
#include "viewer/near_search.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

namespace chronicle::viewer {

std::string fold_case(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

namespace {

// Past this many spans in a range, stats give per-thread totals only: a per-name breakdown
// would visit every span, and range stats must answer as fast as a pan.
constexpr uint64_t kMaxSpansToBreakDown = 2'000'000;

// The texts [first, last) of `owner`, whose owners are `owners` in order; clamped to the `texts`
// there are (as many as owners, unless a cache file says otherwise).
std::pair<size_t, size_t> texts_of(const Column<uint32_t>& owners, size_t texts, uint32_t owner) {
  const auto [first, last] = std::equal_range(owners.begin(), owners.end(), owner);
  return {std::min(static_cast<size_t>(first - owners.begin()), texts),
          std::min(static_cast<size_t>(last - owners.begin()), texts)};
}

bool contains_folded(std::string_view haystack, const std::string& needle_lower) {
  return fold_case(haystack).find(needle_lower) != std::string::npos;
}

// In the order of their leaders' places, as finding the arrows one by one by arrows_by_length_
// gives them.
void put_in_order_of_leaders(std::vector<ArrowInView>& arrows, const std::vector<ArrowPlace>& places) {
  std::vector<uint32_t> order(arrows.size());
  for (uint32_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return places[a] < places[b]; });
  std::vector<ArrowInView> sorted;
  sorted.reserve(arrows.size());
  for (const uint32_t k : order) sorted.push_back(arrows[k]);
  arrows = std::move(sorted);
}

}  // namespace

void visible_in_row(const IntervalRow& row, uint32_t row_number, uint64_t begin, uint64_t end, double ns_per_pixel,
                    double min_pixels, std::vector<VisibleInterval>& wide, std::vector<BusyBlock>& blocks) {
  visible_in_row(row.begins, row.ends, row_number, begin, end, ns_per_pixel, min_pixels, wide, blocks);
}

void visible_in_row(std::span<const uint64_t> begins, std::span<const uint64_t> ends, uint32_t row_number,
                    uint64_t begin, uint64_t end, double ns_per_pixel, double min_pixels,
                    std::vector<VisibleInterval>& wide, std::vector<BusyBlock>& blocks) {
  const size_t count = std::min(begins.size(), ends.size());
  const double min_ns = min_pixels * ns_per_pixel;
  auto is_wide = [&](size_t k) { return static_cast<double>(ends[k] - begins[k]) >= min_ns; };
  // The end of the pixel column after the one holding `time`: a block takes in every interval
  // that begins before it, so each step of a block moves at least a column and costs a search.
  auto reach_after = [&](uint64_t time) {
    const double column = std::floor(static_cast<double>(time - begin) / ns_per_pixel);
    const double reach = static_cast<double>(begin) + (column + 2) * ns_per_pixel;
    return reach >= static_cast<double>(end) ? end : static_cast<uint64_t>(reach);
  };
  size_t i = lower_bound_near(ends, 0, ends.size(), begin);
  while (i < count && begins[i] <= end) {
    if (is_wide(i)) {
      wide.push_back({row_number, static_cast<uint32_t>(i)});
      ++i;
      continue;
    }
    BusyBlock block{row_number, begins[i], ends[i], static_cast<uint32_t>(i), 1};
    size_t next = i + 1;
    while (next < count) {
      const uint64_t reach = reach_after(std::max(block.end, begin));
      const size_t past = upper_bound_near(begins, next, begins.size(), reach);
      if (past == next) break;
      // Rows do not overlap, so of the intervals beginning before `reach` only the last can
      // reach further: when it is wide it is drawn by itself and ends the block.
      const size_t last = past - 1;
      if (is_wide(last)) {
        block.count += static_cast<uint32_t>(last - next);
        if (last > next) block.end = ends[last - 1];
        next = last;
        break;
      }
      block.count += static_cast<uint32_t>(past - next);
      block.end = ends[last];
      next = past;
    }
    blocks.push_back(block);
    i = next;
  }
}

void MinMaxPyramid::build(std::span<const double> values) {
  mins_.clear();
  maxs_.clear();
  std::span<const double> lower_min = values;
  std::span<const double> lower_max = values;
  while (lower_min.size() > kFanOut) {
    std::vector<double> upper_min((lower_min.size() + kFanOut - 1) / kFanOut);
    std::vector<double> upper_max(upper_min.size());
    for (size_t block = 0; block < upper_min.size(); ++block) {
      const size_t first = block * kFanOut;
      const size_t last = std::min(first + kFanOut, lower_min.size());
      upper_min[block] = *std::min_element(lower_min.begin() + first, lower_min.begin() + last);
      upper_max[block] = *std::max_element(lower_max.begin() + first, lower_max.begin() + last);
    }
    mins_.push_back(std::move(upper_min));
    maxs_.push_back(std::move(upper_max));
    lower_min = mins_.back();
    lower_max = maxs_.back();
  }
}

std::pair<double, double> MinMaxPyramid::range(std::span<const double> values, size_t first, size_t last) const {
  double low = std::numeric_limits<double>::infinity();
  double high = -low;
  auto take = [&](size_t level, size_t from, size_t to) {
    const auto& level_min = level == 0 ? values : mins_[level - 1];
    const auto& level_max = level == 0 ? values : maxs_[level - 1];
    for (size_t k = from; k < to; ++k) {
      low = std::min(low, level_min[k]);
      high = std::max(high, level_max[k]);
    }
  };
  // Climb while whole blocks of the next level fit, taking the ragged edges at each level.
  size_t level = 0;
  while (level < mins_.size()) {
    const size_t upper_first = (first + kFanOut - 1) / kFanOut;
    const size_t upper_last = last / kFanOut;
    if (upper_first >= upper_last) break;
    take(level, first, upper_first * kFanOut);
    take(level, upper_last * kFanOut, last);
    first = upper_first;
    last = upper_last;
    ++level;
  }
  take(level, first, last);
  return {low, high};
}

std::span<const uint64_t> TimelineIndex::run_begins(uint32_t task) const {
  return {run_begins_.data() + run_first_.at(task), run_begins_.data() + run_first_.at(task + 1)};
}

std::span<const uint64_t> TimelineIndex::run_ends(uint32_t task) const {
  return {run_ends_.data() + run_first_.at(task), run_ends_.data() + run_first_.at(task + 1)};
}

uint64_t TimelineIndex::line_end(uint32_t task) const {
  const auto ends = run_ends(task);
  const uint64_t end = task_lines_[task].end;
  return ends.empty() ? end : std::max(end, ends.back());
}

const reader::Site* TimelineIndex::site(uint32_t id) const {
  if (id == 0 || id > sites_.size() || sites_[id - 1].id == 0) return nullptr;
  return &sites_[id - 1];
}

std::string TimelineIndex::site_name(uint32_t id) const {
  const reader::Site* found = site(id);
  if (!found) return "?";
  return found->category.empty() ? found->name : found->category + "/" + found->name;
}

std::optional<uint32_t> TimelineIndex::task_index(model::TaskId id) const {
  return task_index(0, id);
}

size_t TimelineIndex::process_of_task(uint32_t task) const {
  const auto after = std::upper_bound(task_processes_.begin(), task_processes_.end(), task,
                                      [](uint32_t k, const TaskProcess& process) { return k < process.first_task; });
  return static_cast<size_t>(after - task_processes_.begin()) - 1;
}

const model::Task& TimelineIndex::task(uint32_t index) const {
  const size_t process = process_of_task(index);
  return graphs()[process].tasks().at(index - task_processes_[process].first_task);
}

const std::vector<model::TaskGraph>& TimelineIndex::graphs() const {
  if (graph_loader_ && !graph_loader_->loaded.load(std::memory_order_acquire)) {
    std::lock_guard lock(graph_loader_->mutex);
    if (!graph_loader_->loaded.load(std::memory_order_relaxed)) {
      graphs_ = graph_loader_->load();
      // Release: a thread that sees `loaded` without the lock sees graphs_ whole.
      graph_loader_->loaded.store(true, std::memory_order_release);
    }
  }
  return graphs_;
}

std::pair<size_t, size_t> TimelineIndex::task_attributes_of(uint32_t index) const {
  return texts_of(task_attribute_tasks_, task_attribute_texts_.size(), index);
}

std::string_view TimelineIndex::task_display_name(uint32_t index) const {
  const std::string_view label = task_label(index);
  return label.empty() ? task_name(index) : label;
}

uint64_t TimelineIndex::to_ns(size_t process, uint64_t ticks) const {
  const TaskProcess& clock = task_processes_.at(process);
  if (ticks <= clock.origin_ticks) return clock.origin_offset_ns;
  return clock.origin_offset_ns + rounded_ns(static_cast<double>(ticks - clock.origin_ticks) * clock.ns_per_tick);
}

uint64_t TimelineIndex::duration_ns(size_t process, uint64_t ticks) const {
  return rounded_ns(static_cast<double>(ticks) * task_processes_.at(process).ns_per_tick);
}

std::string TimelineIndex::lane_of_thread(uint32_t thread_id) const {
  return lane_of_thread(0, thread_id);
}

std::string TimelineIndex::lane_of_thread(size_t process, uint32_t thread_id) const {
  const uint32_t first = task_processes_.at(process).first_lane;
  const auto last = process + 1 < task_processes_.size() ? task_processes_[process + 1].first_lane
                                                         : static_cast<uint32_t>(lanes_.size());
  for (uint32_t k = first; k < last; ++k)
    if (lanes_[k].thread_id == thread_id) return lanes_[k].name;
  return std::to_string(thread_id);
}

Window TimelineIndex::window(uint64_t begin, uint64_t end, uint32_t width, double min_pixels) const {
  return window(begin, end, width, TaskRowQuery{}, min_pixels);
}

Window TimelineIndex::window(uint64_t begin, uint64_t end, uint32_t width, const TaskRowQuery& rows,
                             double min_pixels) const {
  Window out;
  end = std::max(end, begin + 1);
  width = std::max<uint32_t>(width, 1);
  out.begin = begin;
  out.end = end;
  out.width = width;
  const double ns_per_pixel = static_cast<double>(end - begin) / width;
  // The lanes on another core beside the rest: over a long trace they take as long as the rest (a
  // few searches per pixel column of each row), and they read only what nothing else here writes.
  // Each part fills its own fields of `out`.
  const auto failures = reader::run_on_threads(2, 2, [&](size_t part) {
    if (part == 0)
      out.lanes = window_lanes(begin, end, ns_per_pixel, min_pixels);
    else
      window_beside_lanes(begin, end, ns_per_pixel, rows, min_pixels, out);
  });
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);
  return out;
}

// What a window shows besides the lanes: its tasks, arrows, messages and counters.
void TimelineIndex::window_beside_lanes(uint64_t begin, uint64_t end, double ns_per_pixel, const TaskRowQuery& rows,
                                        double min_pixels, Window& out) const {
  const uint32_t width = out.width;
  const ShownRows shown(task_tree_, rows.by_time ? std::vector<uint32_t>{} : rows.collapsed);
  ArrowRowsOf rows_of;
  if (rows.by_time) {
    const TaskTimeRows& by_time = task_time_rows_;
    out.task_rows_shown = by_time.count();
    for (size_t p = 0; p < task_processes_.size(); ++p)
      out.process_first_rows.push_back(p < by_time.process_first.size() ? by_time.process_first[p] : by_time.count());
    window_tasks_by_time(begin, end, ns_per_pixel, min_pixels, rows, out);
    rows_of = [&by_time](const Arrow& arrow) -> std::optional<std::pair<uint32_t, uint32_t>> {
      if (arrow.from_task >= by_time.row.size() || arrow.to_task >= by_time.row.size()) return std::nullopt;
      return std::pair(by_time.row[arrow.from_task], by_time.row[arrow.to_task]);
    };
  } else {
    out.task_rows_shown = shown.count();
    // Tree row first_task holds one of the process's roots (parents are within a process): never hidden.
    for (const TaskProcess& process : task_processes_)
      out.process_first_rows.push_back(process.first_task < task_row_count() ? shown.shown_row(process.first_task)
                                                                             : out.task_rows_shown);
    window_tasks(begin, end, ns_per_pixel, shown, rows, out);
    rows_of = [&](const Arrow& arrow) -> std::optional<std::pair<uint32_t, uint32_t>> {
      const uint32_t from_tree_row = task_lines_[arrow.from_task].row;
      const uint32_t to_tree_row = task_lines_[arrow.to_task].row;
      const uint32_t from_row = shown.shown_row(from_tree_row);
      const uint32_t to_row = shown.shown_row(to_tree_row);
      if (from_row == to_row && from_tree_row != to_tree_row) return std::nullopt;  // both in one collapsed subtree
      return std::pair(from_row, to_row);
    };
  }
  const PixelColumns column{begin, ns_per_pixel, width};
  window_arrows(begin, end, column, rows_of, rows, rows.by_time ? kTimeRows : kTreeRows, arrow_row_range(shown, rows),
                out);
  window_messages(begin, end, column, out);

  for (uint32_t counter = 0; counter < counters_.size(); ++counter) {
    const CounterSeries& series = counters_[counter];
    CounterWindow view;
    view.counter = counter;
    const auto& times = series.times;
    const size_t first = static_cast<size_t>(std::lower_bound(times.begin(), times.end(), begin) - times.begin());
    const size_t last = static_cast<size_t>(std::upper_bound(times.begin(), times.end(), end) - times.begin());
    // The sample before the window holds the value at its left edge.
    if (first > 0)
      view.points.push_back(
          {times[first - 1], series.values[first - 1], series.values[first - 1], series.values[first - 1]});
    if (last - first <= kCounterPointsPerPixel * width) {
      for (size_t k = first; k < last; ++k)
        view.points.push_back({times[k], series.values[k], series.values[k], series.values[k]});
    } else {
      view.downsampled = true;
      size_t column_first = first;
      for (uint32_t column = 0; column < width && column_first < last; ++column) {
        const auto column_end = static_cast<uint64_t>(static_cast<double>(begin) + (column + 1) * ns_per_pixel);
        const size_t column_last = lower_bound_near(times, column_first, last, column_end);
        if (column_last == column_first) continue;
        const auto [low, high] = series.pyramid.range(series.values, column_first, column_last);
        view.points.push_back({times[column_first], low, high, series.values[column_last - 1]});
        column_first = column_last;
      }
    }
    out.counters.push_back(std::move(view));
  }
}

std::vector<LaneWindow> TimelineIndex::window_lanes(uint64_t begin, uint64_t end, double ns_per_pixel,
                                                    double min_pixels) const {
  std::vector<LaneWindow> out;
  for (uint32_t lane_number = 0; lane_number < lanes_.size(); ++lane_number) {
    const Lane& lane = lanes_[lane_number];
    LaneWindow view;
    view.lane = lane_number;
    for (uint32_t depth = 0; depth < lane.depths.size(); ++depth)
      visible_in_row(lane.depths[depth], depth, begin, end, ns_per_pixel, min_pixels, view.spans, view.blocks);
    for (uint32_t depth = 0; depth < lane.runs.size(); ++depth)
      visible_in_row(lane.runs[depth], depth, begin, end, ns_per_pixel, min_pixels, view.runs, view.run_blocks);
    visible_in_row(lane.idle, 0, begin, end, ns_per_pixel, min_pixels, view.idle_wide, view.idle);
    visible_in_row(lane.off_cpu, 0, begin, end, ns_per_pixel, min_pixels, view.off_cpu_wide, view.off_cpu);
    std::vector<VisibleInterval> no_wide_samples;  // a sample is an instant: never wide
    visible_in_row(lane.samples, 0, begin, end, ns_per_pixel, std::max(min_pixels, 1.0), no_wide_samples, view.samples);
    out.push_back(std::move(view));
  }
  return out;
}

// The task rows asked for, each with its runs merged where less than a pixel apart (a task's
// runs never overlap, so the one run that reaches furthest is the last one begun).
void TimelineIndex::window_tasks(uint64_t begin, uint64_t end, double ns_per_pixel, const ShownRows& shown,
                                 const TaskRowQuery& rows, Window& out) const {
  const std::vector<uint32_t> tree_rows = shown.tree_rows(rows.first, rows.last);
  const double gap = std::max(ns_per_pixel, 1.0);
  for (size_t k = 0; k < tree_rows.size(); ++k) {
    const uint32_t task = task_tree_.row_task[tree_rows[k]];
    if (line_end(task) < begin || task_lines_[task].begin > end) continue;
    out.tasks.push_back({task, rows.first + static_cast<uint32_t>(k), runs_in_view(task, begin, end, gap)});
  }
}

std::vector<std::pair<uint64_t, uint64_t>> TimelineIndex::runs_in_view(uint32_t task, uint64_t begin, uint64_t end,
                                                                       double gap) const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  const auto begins = run_begins(task);
  const auto ends = run_ends(task);
  size_t i = lower_bound_near(ends, 0, ends.size(), begin);
  while (i < begins.size() && begins[i] <= end) {
    std::pair<uint64_t, uint64_t> piece{begins[i], ends[i]};
    size_t next = i + 1;
    while (next < begins.size()) {
      const auto reach = static_cast<uint64_t>(static_cast<double>(piece.second) + gap);
      const auto past =
          static_cast<size_t>(std::upper_bound(begins.begin() + next, begins.end(), reach) - begins.begin());
      if (past == next) break;
      piece.second = std::max(piece.second, ends[past - 1]);
      next = past;
    }
    out.push_back(piece);
    i = next;
  }
  return out;
}

// Each row's tasks by the level of detail of spans: those a pixel wide or more drawn alone with
// their runs, the narrower merged into blocks, a block of one drawn as its task.
void TimelineIndex::window_tasks_by_time(uint64_t begin, uint64_t end, double ns_per_pixel, double min_pixels,
                                         const TaskRowQuery& rows, Window& out) const {
  const TaskTimeRows& by_time = task_time_rows_;
  const double gap = std::max(ns_per_pixel, 1.0);
  const uint32_t last = std::min(rows.last, by_time.count());
  std::vector<VisibleInterval> wide;
  std::vector<BusyBlock> blocks;
  for (uint32_t row = rows.first; row < last; ++row) {
    const uint32_t first = by_time.first[row];
    const uint32_t count = by_time.first[row + 1] - first;
    wide.clear();
    blocks.clear();
    visible_in_row(std::span(by_time.begins).subspan(first, count), std::span(by_time.ends).subspan(first, count), row,
                   begin, end, ns_per_pixel, min_pixels, wide, blocks);
    auto add_task = [&](uint32_t position) {
      const uint32_t task = by_time.order[position];
      if (task < task_lines_.size()) out.tasks.push_back({task, row, runs_in_view(task, begin, end, gap)});
    };
    for (const VisibleInterval& one : wide) add_task(first + one.index);
    for (const BusyBlock& block : blocks) {
      if (block.count == 1) {
        add_task(first + block.first);
        continue;
      }
      const uint32_t from = first + block.first;
      const uint32_t to = from + block.count;
      out.task_blocks.push_back({row, block.begin, block.end, block.count,
                                 by_time.failed_before[to] - by_time.failed_before[from],
                                 by_time.cancelled_before[to] - by_time.cancelled_before[from]});
    }
  }
}

// Arrows that touch the rows asked for (or cross them), found whichever way has fewest to look
// at (ArrowSearch: each finds the same arrows); those drawn at the same pixel columns and rows with
// the same kind are merged, the first by arrow_place standing for them. An arrow inside a
// collapsed subtree has nowhere to go and is left out.
void TimelineIndex::window_arrows(uint64_t begin, uint64_t end, const PixelColumns& column, const ArrowRowsOf& rows_of,
                                  const TaskRowQuery& rows, ArrowRowsKind row_kind,
                                  std::pair<uint32_t, uint32_t> row_range, Window& out) const {
  std::unordered_map<DrawnKey, uint32_t, DrawnKeyHash> drawn;
  // An arrow's rows as shown, when they are asked for.
  const auto shown_rows = [&](const Arrow& arrow) -> std::optional<std::pair<uint32_t, uint32_t>> {
    const auto shown = rows_of(arrow);
    if (!shown || std::max(shown->first, shown->second) < rows.first ||
        std::min(shown->first, shown->second) >= rows.last)
      return std::nullopt;
    return shown;
  };
  std::vector<ArrowPlace> places;  // of out.arrows' leaders
  // Arrows come in runs drawn alike (ArrowLevels' order, or by time): the last one drawn is
  // looked at before the map.
  std::optional<std::pair<DrawnKey, uint32_t>> last_drawn;
  const auto draw = [&](const ArrowUnit& unit) {
    const DrawnKey key = DrawnKey::of(column(unit.from_time), column(unit.to_time), unit.rows.first, unit.rows.second,
                                      static_cast<uint32_t>(unit.kind));
    if (!last_drawn || !(last_drawn->first == key)) {
      auto [found, inserted] = drawn.try_emplace(key, static_cast<uint32_t>(out.arrows.size()));
      last_drawn.emplace(key, found->second);
      if (inserted) {
        out.arrows.push_back({unit.leader, unit.count, unit.rows.first, unit.rows.second});
        places.push_back(unit.place());
        return;
      }
    }
    const uint32_t at = last_drawn->second;
    ArrowInView& merged = out.arrows[at];
    merged.merged += unit.count;
    if (unit.place() < places[at]) {
      merged.arrow = unit.leader;
      places[at] = unit.place();
    }
  };
  const auto draw_one = [&](uint32_t k) {
    const Arrow& arrow = arrows_[k];
    if (const auto shown = shown_rows(arrow)) draw({k, 1, arrow.from_time, arrow.to_time, arrow.kind, *shown});
  };
  const ArrowSearchCost cost = arrow_search_cost(begin, end, row_kind, row_range);
  switch (cost.cheapest()) {
    case ArrowSearch::by_levels:
      for_each_arrow_unit(arrow_levels_, arrows_, begin, end, column, shown_rows, draw);
      put_in_order_of_leaders(out.arrows, places);
      return;
    case ArrowSearch::by_rows:
      for (const uint32_t k : arrows_across_rows(cost.by_rows, begin, end, row_kind, row_range)) draw_one(k);
      return;
    case ArrowSearch::by_length:
      for (const auto& [first, last] : cost.by_length)
        for (auto it = first; it != last; ++it)
          if (arrows_[*it].to_time >= begin) draw_one(*it);
      return;
  }
}

TimelineIndex::ArrowSearch TimelineIndex::ArrowSearchCost::cheapest() const {
  // A group of the levels may have to be looked into: counted as a few arrows.
  constexpr size_t kPerGroup = 4;
  const auto count = [](const ArrowRanges& ranges) {
    size_t arrows = 0;
    for (const auto& [first, last] : ranges) arrows += static_cast<size_t>(last - first);
    return arrows;
  };
  const size_t by_length_count = count(by_length);
  const size_t by_rows_count = count(by_rows);
  const size_t fewest = std::min(by_length_count, by_rows_count);
  if (top_groups > 0 && top_groups * kPerGroup < fewest) return ArrowSearch::by_levels;
  return by_rows_count < by_length_count ? ArrowSearch::by_rows : ArrowSearch::by_length;
}

TimelineIndex::ArrowSearchCost TimelineIndex::arrow_search_cost(uint64_t begin, uint64_t end, ArrowRowsKind row_kind,
                                                                std::pair<uint32_t, uint32_t> row_range) const {
  ArrowSearchCost cost;
  cost.by_length = arrows_by_time_range(begin, end);
  cost.by_rows = arrows_by_row_range(row_kind, row_range);
  if (row_kind == kTimeRows) cost.top_groups = arrow_levels_.top_groups();
  return cost;
}

TimelineIndex::ArrowSearch TimelineIndex::arrow_search(uint64_t begin, uint64_t end, const TaskRowQuery& rows) const {
  const ShownRows shown(task_tree_, rows.by_time ? std::vector<uint32_t>{} : rows.collapsed);
  return arrow_search_cost(begin, end, rows.by_time ? kTimeRows : kTreeRows, arrow_row_range(shown, rows)).cheapest();
}

std::pair<uint32_t, uint32_t> TimelineIndex::arrow_row_range(const ShownRows& shown, const TaskRowQuery& rows) const {
  if (rows.by_time) return {rows.first, std::min(rows.last, task_time_rows_.count())};
  return {shown.tree_row_of(rows.first), shown.tree_row_of(rows.last)};
}

TimelineIndex::ArrowRanges TimelineIndex::arrows_by_time_range(uint64_t begin, uint64_t end) const {
  ArrowRanges ranges;
  for (size_t length_class = 0; length_class < arrows_by_length_.size(); ++length_class) {
    const auto& bucket = arrows_by_length_[length_class];
    if (bucket.empty()) continue;
    const uint64_t longest =
        length_class >= 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << length_class) - 1;
    const uint64_t earliest = begin > longest ? begin - longest : 0;
    const auto by_time = [&](uint32_t k, uint64_t time) { return arrows_[k].from_time < time; };
    const uint32_t* first = std::lower_bound(bucket.data(), bucket.data() + bucket.size(), earliest, by_time);
    const uint32_t* last = std::upper_bound(first, bucket.data() + bucket.size(), end,
                                            [&](uint64_t time, uint32_t k) { return time < arrows_[k].from_time; });
    ranges.emplace_back(first, last);
  }
  return ranges;
}

TimelineIndex::ArrowRanges TimelineIndex::arrows_by_row_range(ArrowRowsKind row_kind,
                                                              std::pair<uint32_t, uint32_t> row_range) const {
  ArrowRanges found;
  const auto by_lower_row = [&](uint32_t k, uint32_t row) { return arrow_row_span(arrows_[k], row_kind)->first < row; };
  const auto& classes = arrows_by_rows_[row_kind];
  for (size_t row_class = 0; row_class < classes.size(); ++row_class) {
    const auto& bucket = classes[row_class];
    if (bucket.empty()) continue;
    const uint32_t widest =
        row_class + 1 >= kRowClasses ? std::numeric_limits<uint32_t>::max() : (uint32_t{1} << row_class) - 1;
    const uint32_t lowest = row_range.first > widest ? row_range.first - widest : 0;
    const uint32_t* first = std::lower_bound(bucket.data(), bucket.data() + bucket.size(), lowest, by_lower_row);
    const uint32_t* last = std::lower_bound(first, bucket.data() + bucket.size(), row_range.second, by_lower_row);
    found.emplace_back(first, last);
  }
  return found;
}

std::vector<uint32_t> TimelineIndex::arrows_across_rows(const ArrowRanges& near, uint64_t begin, uint64_t end,
                                                        ArrowRowsKind row_kind,
                                                        std::pair<uint32_t, uint32_t> row_range) const {
  std::vector<uint32_t> found;
  for (const auto& [first, last] : near)
    for (const uint32_t* it = first; it != last; ++it) {
      const Arrow& arrow = arrows_[*it];
      if (arrow_row_span(arrow, row_kind)->second < row_range.first) continue;
      if (arrow.to_time >= begin && arrow.from_time <= end) found.push_back(*it);
    }
  std::sort(found.begin(), found.end(),
            [&](uint32_t a, uint32_t b) { return arrow_place(arrows_[a], a) < arrow_place(arrows_[b], b); });
  return found;
}

std::optional<std::pair<uint32_t, uint32_t>> TimelineIndex::arrow_row_span(const Arrow& arrow,
                                                                           ArrowRowsKind row_kind) const {
  uint32_t from = 0;
  uint32_t to = 0;
  if (row_kind == kTreeRows) {
    from = task_lines_[arrow.from_task].row;
    to = task_lines_[arrow.to_task].row;
  } else {
    const auto& rows = task_time_rows_.row;
    if (arrow.from_task >= rows.size() || arrow.to_task >= rows.size()) return std::nullopt;
    from = rows[arrow.from_task];
    to = rows[arrow.to_task];
  }
  return std::pair(std::min(from, to), std::max(from, to));
}

// Messages are few next to spans (two events each): all of them are looked at, those drawn at
// the same pixel columns between the same lanes merged.
void TimelineIndex::window_messages(uint64_t begin, uint64_t end, const PixelColumns& column, Window& out) const {
  std::unordered_map<DrawnKey, uint32_t, DrawnKeyHash> drawn;
  for (uint32_t k = 0; k < messages_.size() && messages_[k].from_time <= end; ++k) {
    const MessageArrow& message = messages_[k];
    if (std::max(message.from_time, message.to_time) < begin) continue;
    const DrawnKey key =
        DrawnKey::of(column(message.from_time), column(message.to_time), message.from_lane, message.to_lane, 0);
    auto [found, inserted] = drawn.try_emplace(key, static_cast<uint32_t>(out.messages.size()));
    if (inserted)
      out.messages.push_back({k, 1});
    else
      ++out.messages[found->second].merged;
  }
}

std::vector<CounterShare> TimelineIndex::counter_breakdown(uint32_t counter, uint64_t begin, uint64_t end) const {
  const CounterSeries& series = counters_.at(counter);
  const auto& times = series.times;
  const size_t first = static_cast<size_t>(std::lower_bound(times.begin(), times.end(), begin) - times.begin());
  const size_t last = static_cast<size_t>(std::upper_bound(times.begin(), times.end(), end) - times.begin());
  std::vector<CounterShare> shares;
  for (uint32_t lane : series.lanes) shares.push_back({lane});
  for (size_t k = first; k < last; ++k) {
    const uint32_t lane = series.sample_lanes.empty() ? series.lane : series.sample_lanes[k];
    auto share = std::find_if(shares.begin(), shares.end(), [lane](const CounterShare& s) { return s.lane == lane; });
    if (share == shares.end()) continue;
    const double value = series.values[k];
    share->min = share->samples == 0 ? value : std::min(share->min, value);
    share->max = share->samples == 0 ? value : std::max(share->max, value);
    share->last = value;
    share->added += value - (k > 0 ? series.values[k - 1] : 0);
    ++share->samples;
  }
  return shares;
}

std::vector<SearchHit> TimelineIndex::search(const std::string& text, size_t limit, uint64_t* total) const {
  std::vector<SearchHit> hits;
  uint64_t matched = 0;
  // Past the limit the scan goes on only to count.
  const auto wanted = [&] { return hits.size() < limit || total != nullptr; };
  const auto finish = [&] {
    if (total) *total = matched;
    return std::move(hits);
  };
  const std::string needle = fold_case(text);
  if (needle.empty()) return finish();
  for (uint32_t k = 0; k < task_lines_.size() && wanted(); ++k) {
    const bool by_name = contains_folded(task_label(k), needle) || contains_folded(task_name(k), needle);
    std::optional<size_t> by_attribute;  // the first of its own attributes that matches
    if (!by_name)
      for (auto [a, last] = task_attributes_of(k); a < last && !by_attribute; ++a)
        if (contains_folded(task_attribute_texts_[a], needle)) by_attribute = a;
    if (!by_name && !by_attribute) continue;
    if (++matched > limit) continue;
    SearchHit hit;
    hit.kind = SearchHit::Kind::task;
    hit.task = k;
    hit.begin = task_lines_[k].begin;
    hit.end = line_end(k);
    hit.text = task_display_name(k);
    if (by_attribute) hit.text += fmt::format(" ({})", task_attribute_texts_[*by_attribute]);
    hits.push_back(std::move(hit));
  }
  std::sort(hits.begin(), hits.end(), [](const SearchHit& a, const SearchHit& b) { return a.begin < b.begin; });
  std::vector<bool> site_matches(sites_.size() + 1, false);
  bool any_site = false;
  for (const auto& candidate : sites_)
    if (candidate.id != 0 && contains_folded(site_name(candidate.id), needle))
      any_site = site_matches[candidate.id] = true;
  // Spans whose attributes match ("user.id = acme", "status = error: …"): the first text that does.
  constexpr uint32_t kNoText = UINT32_MAX;
  std::unordered_map<uint32_t, uint32_t> text_of_span;
  const WholeSpans& whole = whole_spans_;
  for (uint32_t a = 0; a < std::min(whole.attribute_spans.size(), whole.attribute_texts.size()); ++a)
    if (contains_folded(whole.attribute_texts[a], needle)) text_of_span.emplace(whole.attribute_spans[a], a);
  if (!any_site && text_of_span.empty()) return finish();
  for (uint32_t lane = 0; lane < lanes_.size() && wanted(); ++lane)
    for (uint32_t depth = 0; depth < lanes_[lane].depths.size() && wanted(); ++depth) {
      const IntervalRow& row = lanes_[lane].depths[depth];
      const Column<uint32_t>* spans =
          depth < lanes_[lane].depth_spans.size() ? &lanes_[lane].depth_spans[depth] : nullptr;
      for (uint32_t k = 0; k < row.size() && wanted(); ++k) {
        const bool by_name = row.items[k] < site_matches.size() && site_matches[row.items[k]];
        uint32_t text = kNoText;
        if (!by_name && spans && k < spans->size())
          if (const auto found = text_of_span.find((*spans)[k]); found != text_of_span.end()) text = found->second;
        if (!by_name && text == kNoText) continue;
        if (++matched > limit) continue;
        SearchHit hit;
        hit.kind = SearchHit::Kind::span;
        hit.lane = lane;
        hit.depth = depth;
        hit.index = k;
        hit.begin = row.begins[k];
        hit.end = row.ends[k];
        hit.text = site_name(row.items[k]);
        if (text != kNoText) hit.text += fmt::format(" ({})", whole.attribute_texts[text]);
        hits.push_back(std::move(hit));
      }
    }
  return finish();
}

bool TimelineIndex::span_attribute_contains(uint32_t lane, uint32_t depth, uint32_t index,
                                            const std::string& needle) const {
  if (lane >= lanes_.size() || depth >= lanes_[lane].depth_spans.size()) return false;
  const Column<uint32_t>& spans = lanes_[lane].depth_spans[depth];
  if (index >= spans.size()) return false;
  const auto [first, last] = whole_spans_.attributes_of(spans[index]);
  for (size_t a = first; a < last; ++a)
    if (contains_folded(whole_spans_.attribute_texts[a], needle)) return true;
  return false;
}

std::pair<size_t, size_t> WholeSpans::attributes_of(uint32_t k) const {
  return texts_of(attribute_spans, attribute_texts.size(), k);
}

uint64_t WholeSpans::running_ns(size_t k, std::span<const Lane> lane_rows) const {
  if (!running.empty()) return running[k];
  const auto* found = std::lower_bound(paused.begin(), paused.end(), k);
  if (found != paused.end() && *found == k) return paused_running[static_cast<size_t>(found - paused.begin())];
  const WholeSpan span = at(k, lane_rows);
  return span.end - span.begin;
}

void WholeSpans::keep_paused_only() {
  if (running.empty()) return;
  if (kept_apart_only()) throw std::logic_error("running times kept after the spans' pieces");
  Column<uint32_t>::Built spans;
  Column<uint64_t>::Built times;
  for (size_t k = 0; k < size(); ++k) {
    if (running[k] == ends[k] - begins[k]) continue;
    spans.push_back(static_cast<uint32_t>(k));
    times.push_back(running[k]);
  }
  paused = std::move(spans);
  paused_running = std::move(times);
  running = Column<uint64_t>::Built{};
}

void WholeSpans::keep_every_running() {
  if (!running.empty() || size() == 0) return;
  if (kept_apart_only()) throw std::logic_error("spans added to spans kept in their pieces");
  Column<uint64_t>::Built every(size());
  for (size_t k = 0; k < size(); ++k) every[k] = running_ns(k, {});
  running = std::move(every);
  paused = Column<uint32_t>::Built{};
  paused_running = Column<uint64_t>::Built{};
}

void WholeSpans::keep_apart_only(std::span<const Lane> lane_rows) {
  if (kept_apart_only() || size() == 0) return;
  Column<uint8_t>::Built depths(size(), kApart);
  Column<uint32_t>::Built places(size(), 0);
  for (uint32_t l = 0; l < lane_rows.size(); ++l) {
    const Lane& lane = lane_rows[l];
    const size_t levels = std::min<size_t>(std::min(lane.depths.size(), lane.depth_spans.size()), kApart);
    for (size_t depth = 0; depth < levels; ++depth) {
      const IntervalRow& row = lane.depths[depth];
      const Column<uint32_t>& owners = lane.depth_spans[depth];
      for (size_t piece = 0; piece < std::min(row.size(), owners.size()); ++piece) {
        const uint32_t k = owners[piece];
        if (k < size() && lanes[k] == l && is_whole_piece(row, piece, {begins[k], ends[k], sites[k]})) {
          depths[k] = static_cast<uint8_t>(depth);
          places[k] = static_cast<uint32_t>(piece);
        }
      }
    }
  }
  keep_links(std::move(depths), std::move(places), [this](uint32_t k) {
    return WholeSpan{begins[k], ends[k], sites[k]};
  });
}

void WholeSpans::keep_links(Column<uint8_t>::Built depths, Column<uint32_t>::Built places,
                            const std::function<WholeSpan(uint32_t)>& apart_span) {
  Column<uint64_t>::Built apart_begins;
  Column<uint64_t>::Built apart_ends;
  Column<uint32_t>::Built apart_sites;
  for (uint32_t k = 0; k < depths.size(); ++k) {
    if (depths[k] != kApart) continue;
    places[k] = static_cast<uint32_t>(apart_begins.size());
    const WholeSpan span = apart_span(k);
    apart_begins.push_back(span.begin);
    apart_ends.push_back(span.end);
    apart_sites.push_back(span.site);
  }
  begins = std::move(apart_begins);
  ends = std::move(apart_ends);
  sites = std::move(apart_sites);
  piece_depths = std::move(depths);
  pieces = std::move(places);
}

void WholeSpans::keep_whole(std::span<const Lane> lane_rows) {
  if (!kept_apart_only()) return;
  Column<uint64_t>::Built every_begin(size());
  Column<uint64_t>::Built every_end(size());
  Column<uint32_t>::Built every_site(size());
  for (size_t k = 0; k < size(); ++k) {
    const WholeSpan span = at(k, lane_rows);
    every_begin[k] = span.begin;
    every_end[k] = span.end;
    every_site[k] = span.site;
  }
  begins = std::move(every_begin);
  ends = std::move(every_end);
  sites = std::move(every_site);
  piece_depths = Column<uint8_t>::Built{};
  pieces = Column<uint32_t>::Built{};
}

uint64_t TimelineIndex::busy_before(uint32_t lane, size_t k) const {
  const IntervalRow& busy = lanes_[lane].busy_row();
  const size_t block = k / kBusyBlock;
  uint64_t sum = busy_sums_[lane].at(block);
  for (size_t j = block * kBusyBlock; j < k; ++j) sum += busy.ends[j] - busy.begins[j];
  return sum;
}

RangeStats TimelineIndex::range_stats(uint64_t begin, uint64_t end) const {
  RangeStats stats;
  stats.begin = begin;
  stats.end = end;
  auto overlapping = [&](const IntervalRow& row) {
    const size_t first =
        static_cast<size_t>(std::lower_bound(row.ends.begin(), row.ends.end(), begin) - row.ends.begin());
    const size_t last =
        static_cast<size_t>(std::upper_bound(row.begins.begin(), row.begins.end(), end) - row.begins.begin());
    return std::pair<size_t, size_t>{first, std::max(first, last)};
  };
  auto clipped = [&](uint64_t from, uint64_t to) {
    return std::min(to, end) - std::min(std::max(from, begin), std::min(to, end));
  };
  uint64_t spans_in_range = 0;
  for (uint32_t lane_number = 0; lane_number < lanes_.size(); ++lane_number) {
    const Lane& lane = lanes_[lane_number];
    LaneStats lane_stats;
    lane_stats.lane = lane_number;
    for (const IntervalRow& row : lane.depths) {
      const auto [first, last] = overlapping(row);
      lane_stats.spans += last - first;
    }
    {
      const IntervalRow& top = lane.busy_row();
      const auto [first, last] = overlapping(top);
      if (first < last) {
        uint64_t busy = busy_before(lane_number, last) - busy_before(lane_number, first);
        // The whole first and last spans are in the sum: take off what lies outside the range.
        busy -= (top.ends[first] - top.begins[first]) - clipped(top.begins[first], top.ends[first]);
        if (last - 1 != first)
          busy -= (top.ends[last - 1] - top.begins[last - 1]) - clipped(top.begins[last - 1], top.ends[last - 1]);
        lane_stats.busy_ns = busy;
      }
    }
    const auto [idle_first, idle_last] = overlapping(lane.idle);
    for (size_t k = idle_first; k < idle_last; ++k)
      lane_stats.idle_ns += clipped(lane.idle.begins[k], lane.idle.ends[k]);
    const auto [off_first, off_last] = overlapping(lane.off_cpu);
    for (size_t k = off_first; k < off_last; ++k)
      (lane.off_cpu.items[k] == static_cast<uint32_t>(format::CpuState::blocked) ? lane_stats.blocked_ns
                                                                                 : lane_stats.runnable_ns) +=
          clipped(lane.off_cpu.begins[k], lane.off_cpu.ends[k]);
    const auto [sample_first, sample_last] = overlapping(lane.samples);
    lane_stats.samples = sample_last - sample_first;
    spans_in_range += lane_stats.spans;
    stats.lanes.push_back(lane_stats);
  }
  stats.names_complete = spans_in_range <= kMaxSpansToBreakDown;
  if (stats.names_complete) {
    std::unordered_map<uint32_t, NameTotal> by_site;
    for (const Lane& lane : lanes_)
      for (const IntervalRow& row : lane.depths) {
        const auto [first, last] = overlapping(row);
        for (size_t k = first; k < last; ++k) {
          NameTotal& total = by_site[row.items[k]];
          total.site = row.items[k];
          ++total.pieces;
          total.running_ns += clipped(row.begins[k], row.ends[k]);
        }
      }
    uint64_t whole_in_range = 0;
    whole_spans_.for_each_overlapping(begin, end, lanes_, [&](size_t, const WholeSpan& span) {
      if (++whole_in_range > kMaxSpansToBreakDown) return false;
      NameTotal& total = by_site[span.site];
      total.site = span.site;
      ++total.spans;
      total.wall_ns += clipped(span.begin, span.end);
      return true;
    });
    stats.names_complete = whole_in_range <= kMaxSpansToBreakDown;
    if (!stats.names_complete) by_site.clear();
    for (const auto& [site, total] : by_site) stats.top_names.push_back(total);
    std::sort(stats.top_names.begin(), stats.top_names.end(), [](const NameTotal& a, const NameTotal& b) {
      return a.wall_ns != b.wall_ns ? a.wall_ns > b.wall_ns : a.site < b.site;
    });
    if (stats.top_names.size() > 20) stats.top_names.resize(20);
  }
  for (uint32_t k = 0; k < task_lines_.size(); ++k) {
    const TaskLine& line = task_lines_[k];
    if (line.begin <= end && line_end(k) >= begin) ++stats.tasks_overlapping;
    if (line.created && line.begin >= begin && line.begin <= end) ++stats.tasks_created;
    if (line.resolved && line.end >= begin && line.end <= end) {
      ++stats.tasks_resolved;
      stats.tasks_failed += line.outcome == format::TaskOutcome::failed;
      stats.tasks_cancelled += line.outcome == format::TaskOutcome::cancelled;
    }
  }
  return stats;
}

std::optional<uint32_t> TimelineIndex::span_parent(uint32_t lane, uint32_t depth, uint32_t index) const {
  if (depth == 0 || lane >= lanes_.size() || depth >= lanes_[lane].depths.size()) return std::nullopt;
  const IntervalRow& row = lanes_[lane].depths[depth];
  const IntervalRow& above = lanes_[lane].depths[depth - 1];
  const uint64_t begin = row.begins.at(index);
  auto after = std::upper_bound(above.begins.begin(), above.begins.end(), begin);
  if (after == above.begins.begin()) return std::nullopt;
  const auto parent = static_cast<uint32_t>(after - above.begins.begin() - 1);
  if (above.ends[parent] < begin) return std::nullopt;
  return parent;
}

std::pair<uint32_t, uint32_t> TimelineIndex::span_children(uint32_t lane, uint32_t depth, uint32_t index) const {
  if (lane >= lanes_.size() || depth + 1 >= lanes_[lane].depths.size()) return {0, 0};
  const IntervalRow& row = lanes_[lane].depths[depth];
  const IntervalRow& below = lanes_[lane].depths[depth + 1];
  const auto first = std::lower_bound(below.begins.begin(), below.begins.end(), row.begins.at(index));
  const auto last = std::upper_bound(first, below.begins.end(), row.ends.at(index));
  return {static_cast<uint32_t>(first - below.begins.begin()), static_cast<uint32_t>(last - below.begins.begin())};
}

}  // namespace chronicle::viewer
