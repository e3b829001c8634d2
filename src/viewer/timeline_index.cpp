#include "viewer/timeline_index.hpp"

#include "analysis/cpu_timeline.hpp"
#include "analysis/critical_path.hpp"
#include "analysis/sample_stacks.hpp"
#include "model/task_graph_feed.hpp"
#include "reader/messages.hpp"
#include "viewer/drawn_key.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <queue>
#include <set>
#include <stdexcept>
#include <unordered_map>

namespace chronicle::viewer {
namespace {

// Past this many spans in a range, stats give per-thread totals only: a per-name breakdown
// would visit every span, and range stats must answer as fast as a pan.
constexpr uint64_t kMaxSpansToBreakDown = 2'000'000;

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool contains_folded(std::string_view haystack, const std::string& needle_lower) {
  return lowercase(haystack).find(needle_lower) != std::string::npos;
}

std::string process_group(const reader::Trace& trace) {
  const auto& description = trace.description();
  return fmt::format("{} · {} (pid {})", description.hostname, description.process_name, description.pid);
}

}  // namespace

void StringColumn::add(std::string_view text) {
  if (first.empty()) first.push_back(0);
  chars.insert_at_end(text.begin(), text.end());
  first.push_back(chars.size());
}

void Markers::add(uint64_t time, uint32_t site, format::EventId type, std::string_view text) {
  times.push_back(time);
  sites.push_back(site);
  types.push_back(type);
  texts.add(text);
}

void Markers::shrink_to_fit() {
  times.shrink_to_fit();
  sites.shrink_to_fit();
  types.shrink_to_fit();
  texts.first.shrink_to_fit();
  texts.chars.shrink_to_fit();
}

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

void visible_in_row(const IntervalRow& row, uint32_t row_number, uint64_t begin, uint64_t end, double ns_per_pixel,
                    double min_pixels, std::vector<VisibleInterval>& wide, std::vector<BusyBlock>& blocks) {
  const auto& begins = row.begins;
  const auto& ends = row.ends;
  const size_t count = row.size();
  const double min_ns = min_pixels * ns_per_pixel;
  auto is_wide = [&](size_t k) { return static_cast<double>(ends[k] - begins[k]) >= min_ns; };
  // The end of the pixel column after the one holding `time`: a block takes in every interval
  // that begins before it, so each step of a block moves at least a column and costs a search.
  auto reach_after = [&](uint64_t time) {
    const double column = std::floor(static_cast<double>(time - begin) / ns_per_pixel);
    const double reach = static_cast<double>(begin) + (column + 2) * ns_per_pixel;
    return reach >= static_cast<double>(end) ? end : static_cast<uint64_t>(reach);
  };
  size_t i = static_cast<size_t>(std::lower_bound(ends.begin(), ends.end(), begin) - ends.begin());
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
      const size_t past =
          static_cast<size_t>(std::upper_bound(begins.begin() + next, begins.end(), reach) - begins.begin());
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

// Fills a TimelineIndex from a trace.
class IndexBuilder {
 public:
  IndexBuilder(const reader::Trace& trace, const TimelineIndex::Progress& progress, model::GraphDetail detail)
      : trace_(trace), counter_catalog_(trace.sites()), progress_(progress), detail_(detail) {}

  // `pairing_problems`: span ends the reader paired with nothing, for the page's warnings.
  TimelineIndex build(std::vector<std::string>& pairing_problems) {
    find_origin();
    add_lanes();
    // The spans and the task graph need all events in time order, the markers and counters each
    // stream alone. One merge of the streams serves the spans and the graph, whose building is
    // handed to a second thread (the machine has at least two cores); that thread reads the
    // streams one by one for the markers and counters while no events of the merge wait.
    model::TaskGraphFeed feed(
        [this](uint32_t site_id) {
          const reader::Site* site = trace_.site(site_id);
          return site ? site->name : std::string();
        },
        detail_);
    auto graph =
        std::async(std::launch::async, [this, &feed] { return feed.build([this] { return index_streams_slice(); }); });
    uint64_t merged_last = 0;
    try {
      pairing_problems = index_spans(feed, merged_last);
    } catch (...) {
      feed.close();  // the graph's thread ends; the future waits for it as it goes
      throw;
    }
    feed.close();
    index_.graphs_.front() = graph.get();
    index_.event_count_ = stream_events_;
    // to_ns keeps the order of times: the latest event's time is the latest of the times.
    index_.duration_ = std::max(index_.duration_, merged_last);
    index_.duration_ = std::max(index_.duration_, index_.to_ns(index_.graphs_.front().last_ticks()));
    index_tasks();
    index_lane_runs();
    index_arrows();
    index_idle();
    index_off_cpu();
    index_samples();
    for (auto& counter : index_.counters_) finish_counter(counter);
    index_busy_prefix();
    return std::move(index_);
  }

 private:
  void find_origin() {
    uint64_t origin = std::numeric_limits<uint64_t>::max();
    for (size_t stream = 0; stream < trace_.streams().size(); ++stream) {
      reader::Trace::StreamCursor cursor(trace_, stream);
      reader::Event first;
      if (cursor.next(first)) origin = std::min(origin, first.ticks);
    }
    if (origin == std::numeric_limits<uint64_t>::max()) origin = 0;
    index_.origin_ticks_ = origin;
    index_.origin_unix_ns_ = trace_.to_unix_ns(origin);
    index_.ns_per_tick_ = 1e9 / static_cast<double>(trace_.description().clock.frequency_hz);
    index_.sites_ = trace_.sites();
    index_.task_processes_.front() = {process_group(trace_), 0, 0, origin, 0, index_.ns_per_tick_, 0, 0};
  }

  // One lane per stream, in stream order.
  void add_lanes() {
    for (const reader::StreamInfo& stream : trace_.streams()) {
      Lane lane;
      lane.thread_id = stream.thread_id;
      lane.name = trace_.thread_name(lane.thread_id);
      lane.group = process_group(trace_);
      index_.lanes_.push_back(std::move(lane));
    }
  }

  // The lanes' markers and the counters' samples, stream after stream (the order finish_counter
  // keeps for samples at the same time), a slice at a time; false when all is done. Nothing else
  // of the index: the merged pass fills it meanwhile.
  bool index_streams_slice() {
    constexpr size_t kSliceEvents = size_t{1} << 16;
    reader::Event event;
    for (size_t k = 0; k < kSliceEvents; ++k) {
      if (!stream_cursor_) {
        if (next_stream_ == trace_.streams().size()) return false;
        stream_cursor_.emplace(trace_, next_stream_);
      }
      if (!stream_cursor_->next(event)) {
        // Vectors grown by doubling hold up to twice what they need, for as long as the server runs.
        index_.lanes_[next_stream_].markers.shrink_to_fit();
        stream_cursor_.reset();
        ++next_stream_;
        continue;
      }
      index_stream_event(event, static_cast<uint32_t>(next_stream_));
    }
    return true;
  }

  void index_stream_event(const reader::Event& event, uint32_t lane_number) {
    using format::EventId;
    ++stream_events_;
    switch (event.type) {
      case EventId::instant:
      case EventId::note:
        index_.lanes_[lane_number].markers.add(index_.to_ns(event.ticks), event.name_id, event.type,
                                               event.type == format::EventId::note ? event.text : std::string_view());
        break;
      case EventId::counter:
      case EventId::counter_float:
        add_counter_sample(event, index_.to_ns(event.ticks), lane_number);
        break;
      default:
        break;
    }
  }

  // Samples as traced, stream after stream; finish_counter puts them in time order.
  void add_counter_sample(const reader::Event& event, uint64_t time, uint32_t lane_number) {
    const std::optional<uint32_t> found = counter_catalog_.series_of(event.name_id);
    if (!found) return;
    const analysis::SeriesInfo& info = counter_catalog_.series()[*found];
    for (size_t next = index_.counters_.size(); next <= *found; ++next) {
      CounterSeries series;
      series.site = event.name_id;
      series.lane = lane_number;
      series.name = counter_catalog_.series()[next].label;
      series.kind = counter_catalog_.series()[next].kind;
      index_.counters_.push_back(std::move(series));
    }
    CounterSeries& series = index_.counters_[*found];
    if (series.lanes.empty() || series.lanes.back() != lane_number) series.lanes.push_back(lane_number);
    series.sample_lanes.push_back(lane_number);
    series.times.push_back(time);
    series.values.push_back(analysis::traced_value(event, info.kind));
  }

  // Several threads' samples of one series merged in time order (a stable sort keeps a
  // thread's own order at equal times), then shown as readers show them.
  static void finish_counter(CounterSeries& series) {
    if (series.lanes.size() > 1) {
      std::vector<uint32_t> order(series.times.size());
      for (uint32_t k = 0; k < order.size(); ++k) order[k] = k;
      std::stable_sort(order.begin(), order.end(),
                       [&series](uint32_t a, uint32_t b) { return series.times[a] < series.times[b]; });
      Column<uint64_t>::Built times(order.size());
      Column<double>::Built values(order.size());
      Column<uint32_t>::Built lanes(order.size());
      for (size_t k = 0; k < order.size(); ++k) {
        times[k] = series.times[order[k]];
        values[k] = series.values[order[k]];
        lanes[k] = series.sample_lanes[order[k]];
      }
      series.times = std::move(times);
      series.values = std::move(values);
      series.sample_lanes = std::move(lanes);
    } else {
      series.sample_lanes = Column<uint32_t>::Built{};  // one writer: `lane` says whose every sample is
    }
    series.sample_lanes.shrink_to_fit();
    analysis::to_shown_values(series.kind, series.values.values());
    series.times.shrink_to_fit();
    series.values.shrink_to_fit();
    if (!series.values.empty()) {
      series.min = *std::min_element(series.values.begin(), series.values.end());
      series.max = *std::max_element(series.values.begin(), series.values.end());
    }
    series.pyramid.build(series.values);
  }

  // Spans as the reader pairs them, on the lane of the thread they are on: a task's span has a
  // piece in each of the task's runs, at the depth it has on that thread then. (Streams and
  // lanes are in the same order.) The events the task graph needs go to `feed` on the way.
  // `last`: the time of the latest event.
  std::vector<std::string> index_spans(model::TaskGraphFeed& feed, uint64_t& last) {
    struct Piece {
      uint64_t begin;
      uint32_t site;
      uint64_t sequence;
      uint64_t task;
    };
    std::vector<std::vector<Piece>> open(index_.lanes_.size());
    auto close = [&](size_t lane_number, size_t depth, uint64_t end) {
      Lane& lane = index_.lanes_[lane_number];
      auto& stack = open[lane_number];
      if (lane.depths.size() <= depth) lane.depths.resize(depth + 1);
      lane.depths[depth].add(stack[depth].begin, end, stack[depth].site);
      ++lane.span_count;
      stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(depth));
    };
    reader::SpanPairing pairing(trace_);
    uint64_t last_ticks = 0;
    uint64_t events_read = 0;
    trace_.for_each_event(pairing, [&](const reader::Event& event) {
      if (++events_read % TimelineIndex::kProgressEvents == 0 && progress_) progress_(events_read);
      feed.add(event, pairing);
      last_ticks = std::max(last_ticks, event.ticks);
      auto& stack = open[event.stream];
      switch (event.type) {
        case format::EventId::span_begin:
          stack.push_back({index_.to_ns(event.ticks), event.span->site_id, event.span->sequence, event.span->task});
          break;
        case format::EventId::span_end:
          for (size_t depth = stack.size(); event.span && depth-- > 0;)
            if (stack[depth].sequence == event.span->sequence) {
              close(event.stream, depth, index_.to_ns(event.ticks));
              break;
            }
          break;
        case format::EventId::task_run_begin:
          if (const auto* spans = pairing.open_in_task(event.task))
            for (const reader::PairedSpan& span : *spans)
              stack.push_back({index_.to_ns(event.ticks), span.site_id, span.sequence, span.task});
          break;
        case format::EventId::task_run_end:
          // The task's spans go on in its next run, wherever that is.
          for (size_t depth = stack.size(); depth-- > 0;)
            if (stack[depth].task == event.task) close(event.stream, depth, index_.to_ns(event.ticks));
          break;
        default:
          break;
      }
      return true;
    });
    last = index_.to_ns(last_ticks);
    for (size_t lane = 0; lane < open.size(); ++lane)  // cut by the trace's end
      while (!open[lane].empty()) close(lane, open[lane].size() - 1, last);
    for (Lane& lane : index_.lanes_)
      for (IntervalRow& row : lane.depths) row.shrink_to_fit();
    return pairing.describe_problems();
  }

  void index_tasks() {
    const auto& tasks = index_.graphs_.front().tasks();
    index_.task_lines_.resize(tasks.size());
    index_.run_first_.assign(1, 0);
    for (uint32_t k = 0; k < tasks.size(); ++k) {
      const model::Task& task = tasks[k];
      TaskLine& line = index_.task_lines_[k];
      if (task.created)
        line.begin = index_.to_ns(*task.created);
      else if (!task.runs.empty())
        line.begin = index_.to_ns(task.runs.front().begin);
      line.id = task.id;
      line.created = task.created.has_value();
      line.kind = task.kind;
      line.outcome = task.outcome;
      index_.task_names_.add(task.name);
      index_.task_labels_.add(task.label);
      line.resolved = task.resolved.has_value();
      line.end = task.resolved ? index_.to_ns(*task.resolved) : index_.duration_;
      line.end = std::max(line.end, line.begin);
      for (const model::RunInterval& run : task.runs) {
        index_.run_begins_.push_back(index_.to_ns(run.begin));
        index_.run_ends_.push_back(std::max(index_.to_ns(run.end), index_.to_ns(run.begin)));
      }
      index_.run_first_.push_back(static_cast<uint32_t>(index_.run_begins_.size()));
    }
    lay_out_tasks(index_);
    index_.run_begins_.shrink_to_fit();
    index_.run_ends_.shrink_to_fit();
  }

  // Each thread's task runs, nested: a run goes on the first depth free when it begins.
  void index_lane_runs() {
    std::unordered_map<uint32_t, uint32_t> lane_of_thread;
    for (uint32_t k = 0; k < index_.lanes_.size(); ++k) lane_of_thread.try_emplace(index_.lanes_[k].thread_id, k);
    struct Run {
      uint64_t begin, end;
      uint32_t task;
    };
    std::vector<std::vector<Run>> by_lane(index_.lanes_.size());
    const auto& tasks = index_.graphs_.front().tasks();
    for (uint32_t k = 0; k < tasks.size(); ++k)
      for (size_t r = 0; r < tasks[k].runs.size(); ++r) {
        const auto lane = lane_of_thread.find(tasks[k].runs[r].thread_id);
        if (lane == lane_of_thread.end()) continue;
        const uint32_t flat = index_.run_first_[k] + static_cast<uint32_t>(r);
        by_lane[lane->second].push_back({index_.run_begins_[flat], index_.run_ends_[flat], k});
      }
    for (uint32_t lane = 0; lane < by_lane.size(); ++lane) {
      auto& runs = by_lane[lane];
      // Outer runs first when two begin together, so that the inner one nests under it.
      std::sort(runs.begin(), runs.end(),
                [](const Run& a, const Run& b) { return a.begin != b.begin ? a.begin < b.begin : a.end > b.end; });
      std::vector<IntervalRow>& rows = index_.lanes_[lane].runs;
      for (const Run& run : runs) {
        size_t depth = 0;
        while (depth < rows.size() && rows[depth].ends.back() > run.begin) ++depth;
        if (depth == rows.size()) rows.emplace_back();
        rows[depth].add(run.begin, run.end, run.task);
      }
      for (IntervalRow& row : rows) row.shrink_to_fit();
    }
  }

  void index_arrows() {
    index_arrows_of_graph();
    sort_arrows_by_length(index_);
  }

 public:
  // Every process's tasks in tree order: a task's parent is in its own process.
  static void lay_out_tasks(TimelineIndex& index) {
    std::vector<uint32_t> parents(index.task_lines_.size(), kNoTask);
    for (uint32_t k = 0; k < parents.size(); ++k) {
      const model::Task& task = index.task(k);
      if (task.parent == 0) continue;
      const auto parent = index.task_index(index.process_of_task(k), task.parent);
      if (parent && *parent != k) parents[k] = *parent;
    }
    index.task_tree_ = layout_task_tree(parents);
    for (uint32_t k = 0; k < parents.size(); ++k) index.task_lines_[k].row = index.task_tree_.row[k];
  }

  static void sort_arrows_by_length(TimelineIndex& index) {
    index.arrows_by_length_.assign(65, {});
    for (uint32_t k = 0; k < index.arrows_.size(); ++k) {
      const Arrow& arrow = index.arrows_[k];
      const uint64_t length = arrow.to_time - arrow.from_time;  // waits end no earlier than they begin
      index.arrows_by_length_[std::bit_width(length)].push_back(k);
    }
    // Stable: arrows that begin together keep their order, so the --html page merges them alike.
    for (auto& bucket : index.arrows_by_length_)
      std::stable_sort(bucket.begin(), bucket.end(),
                       [&](uint32_t a, uint32_t b) { return index.arrows_[a].from_time < index.arrows_[b].from_time; });
  }

 private:
  void index_arrows_of_graph() {
    for (const model::Edge& edge : index_.graphs_.front().edges()) {
      const auto from = index_.task_index(edge.from);
      const auto to = index_.task_index(edge.to);
      if (!from || !to) continue;
      Arrow arrow;
      const uint64_t time = index_.to_ns(edge.ticks);
      if (edge.kind == model::EdgeKind::created_by) {
        arrow = {.kind = ArrowKind::created,
                 .from_task = *to,
                 .to_task = *from,
                 .from_time = time,
                 .to_time = time};  // from the creator to the created
      } else if (edge.kind == model::EdgeKind::waits_on) {
        const TaskLine& awaited = index_.task_lines_[*to];
        arrow = {.kind = ArrowKind::wait,
                 .from_task = *from,
                 .to_task = *to,
                 .from_time = time,
                 .to_time = awaited.resolved && awaited.end >= time ? awaited.end : time};
      } else {
        arrow = {.kind = ArrowKind::resolve,
                 .from_task = *to,
                 .to_task = *from,
                 .from_time = time,
                 .to_time = time};  // the resolver resolves `from`
      }
      index_.arrows_.push_back(arrow);
    }
  }

  void index_idle() {
    std::unordered_map<uint32_t, uint32_t> lane_of_thread;
    for (uint32_t k = 0; k < index_.lanes_.size(); ++k) lane_of_thread.try_emplace(index_.lanes_[k].thread_id, k);
    const auto& idle = index_.graphs_.front().idle();
    for (uint32_t k = 0; k < idle.size(); ++k) {
      auto lane = lane_of_thread.find(idle[k].thread_id);
      if (lane == lane_of_thread.end()) continue;
      index_.lanes_[lane->second].idle.add(index_.to_ns(idle[k].begin), index_.to_ns(idle[k].end), k);
    }
  }

  // When each lane's thread was off its CPU, blocked or waiting for one, from the context switches.
  void index_off_cpu() {
    const analysis::CpuTimeline timeline(trace_);
    if (timeline.empty()) return;
    for (Lane& lane : index_.lanes_)
      timeline.for_each_stretch(lane.thread_id, [&](uint64_t begin, uint64_t end, format::CpuState state) {
        if (state != format::CpuState::running)
          lane.off_cpu.add(index_.to_ns(begin), index_.to_ns(end), static_cast<uint32_t>(state));
      });
  }

  // Each sample of the traced process on its thread's lane, its stack symbolised and kept once.
  // Samples are in the sampler's stream alone, in time order, and only the packets that hold one
  // are read; a trace with no module definitions has none.
  void index_samples() {
    if (trace_.modules().empty()) return;
    analysis::SampleStacks symbolised(trace_);
    const auto pid = static_cast<uint32_t>(trace_.description().pid);
    std::unordered_map<uint32_t, uint32_t> lane_of_thread;
    for (uint32_t k = 0; k < index_.lanes_.size(); ++k) lane_of_thread.try_emplace(index_.lanes_[k].thread_id, k);
    std::map<std::vector<uint32_t>, uint32_t> stack_ids;
    std::vector<uint32_t> outermost_first;
    SampleStackTable& table = index_.sample_stacks_;
    table.first.push_back(0);
    const uint32_t samples = format::event_type_bit(static_cast<uint32_t>(format::EventId::cpu_sample));
    for (size_t stream = 0; stream < trace_.streams().size(); ++stream) {
      reader::Trace::StreamCursor cursor(trace_, stream, samples);
      reader::Event event;
      while (cursor.next(event)) {
        if (event.type != format::EventId::cpu_sample || event.sampled_pid != pid) continue;
        const std::vector<uint32_t>& leaf_first = symbolised.leaf_first(event);
        outermost_first.assign(leaf_first.rbegin(), leaf_first.rend());
        const auto [found, added] = stack_ids.try_emplace(outermost_first, static_cast<uint32_t>(table.size()));
        if (added) {
          table.frames.insert_at_end(outermost_first.begin(), outermost_first.end());
          table.first.push_back(table.frames.size());
        }
        const auto lane = lane_of_thread.find(event.sampled_tid);
        IntervalRow& row =
            lane == lane_of_thread.end() ? index_.samples_without_lane_ : index_.lanes_[lane->second].samples;
        const uint64_t time = index_.to_ns(event.ticks);
        row.add(time, time, found->second);
      }
    }
    for (const std::string& name : symbolised.function_names()) table.functions.add(name);
  }

  void index_busy_prefix() {
    for (const Lane& lane : index_.lanes_) {
      Column<uint64_t>::Built prefix{0};
      if (!lane.depths.empty()) {
        const IntervalRow& top = lane.depths.front();
        prefix.reserve(top.size() + 1);
        for (size_t k = 0; k < top.size(); ++k) prefix.push_back(prefix.back() + (top.ends[k] - top.begins[k]));
      }
      index_.busy_prefix_.push_back(std::move(prefix));
    }
  }

  const reader::Trace& trace_;
  analysis::SeriesCatalog counter_catalog_;
  const TimelineIndex::Progress& progress_;
  model::GraphDetail detail_;
  TimelineIndex index_;
  // index_streams_slice's place.
  size_t next_stream_ = 0;
  std::optional<reader::Trace::StreamCursor> stream_cursor_;
  uint64_t stream_events_ = 0;
};

TimelineIndex TimelineIndex::build(const reader::Trace& trace, const Progress& progress, model::GraphDetail detail) {
  TimelineIndex index = build_one(trace, progress, detail);
  index.index_task_lookup();
  return index;
}

TimelineIndex TimelineIndex::build_one(const reader::Trace& trace, const Progress& progress,
                                       model::GraphDetail detail) {
  std::vector<std::string> pairing_problems;
  TimelineIndex index = IndexBuilder(trace, progress, detail).build(pairing_problems);
  if (progress) progress(index.event_count());
  index.warnings_ = trace.warnings();
  for (std::string& problem : pairing_problems) index.warnings_.push_back(std::move(problem));
  return index;
}

// The traces reopened and the messages between them found, once, when a critical path first
// crosses processes: the index otherwise holds no trace (view lets their mappings go).
class CrossProcessPaths {
 public:
  explicit CrossProcessPaths(std::vector<std::string> directories) : directories_(std::move(directories)) {}
  const std::vector<std::string>& directories() const { return directories_; }

  // Throws when a trace can no longer be read.
  // `sources`: each process's tasks, in the order of the directories.
  analysis::CriticalPath path(const std::vector<const analysis::TaskSource*>& sources, size_t process,
                              model::TaskId target) {
    std::lock_guard lock(mutex_);
    if (traces_.empty())
      for (const std::string& directory : directories_) traces_.emplace_back(directory);
    if (traces_.size() != sources.size()) throw std::logic_error("a task source per trace");
    std::vector<analysis::ProcessGraph> processes;
    for (const reader::Trace& trace : traces_) processes.push_back({&trace, nullptr});  // the traces only
    if (!arrivals_) arrivals_ = analysis::MessageArrivals::find(processes);
    return analysis::critical_path(sources, processes, *arrivals_, process, target);
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> directories_;
  std::vector<reader::Trace> traces_;
  std::optional<analysis::MessageArrivals> arrivals_;
};

std::vector<std::string> TimelineIndex::cross_process_directories() const {
  return cross_process_ ? cross_process_->directories() : std::vector<std::string>{};
}

std::shared_ptr<CrossProcessPaths> TimelineIndex::paths_between(std::vector<std::string> directories) {
  return std::make_shared<CrossProcessPaths>(std::move(directories));
}

// Puts the indexes of several traces, each built alone, on one timeline: each moved by where its
// origin lies after the earliest one, the lanes, counters and tasks of the others appended with
// their site ids moved past the sites before them and their task indexes past the tasks before.
class IndexCombiner {
 public:
  static TimelineIndex combine(const std::vector<reader::Trace>& traces, const TimelineIndex::Progress& progress,
                               model::GraphDetail detail) {
    std::vector<TimelineIndex> parts;
    uint64_t events_before = 0;  // in the traces already indexed
    for (const reader::Trace& trace : traces) {
      TimelineIndex::Progress part_progress;
      if (progress) part_progress = [&](uint64_t events) { progress(events_before + events); };
      parts.push_back(TimelineIndex::build_one(trace, part_progress, detail));
      events_before += parts.back().event_count();
    }
    int64_t origin = parts.front().origin_unix_ns_;
    for (const TimelineIndex& part : parts) origin = std::min(origin, part.origin_unix_ns_);
    std::vector<uint32_t> first_lanes;
    std::vector<std::string> directories;
    TimelineIndex combined;
    for (size_t k = 0; k < parts.size(); ++k) {
      first_lanes.push_back(static_cast<uint32_t>(combined.lanes_.size()));
      const std::string group = process_group(traces[k]);
      for (std::string& warning : parts[k].warnings_) warning = group + ": " + warning;
      directories.push_back(traces[k].directory());
      const auto offset = static_cast<uint64_t>(parts[k].origin_unix_ns_ - origin);
      shift(parts[k], offset);
      parts[k].task_processes_.front().origin_offset_ns = offset;
      if (k == 0) {
        combined = std::move(parts[0]);
        combined.origin_offset_ns_ = offset;
        combined.origin_unix_ns_ = origin;
        continue;
      }
      append(combined, std::move(parts[k]));
    }
    IndexBuilder::lay_out_tasks(combined);
    IndexBuilder::sort_arrows_by_length(combined);
    combined.messages_ = find_messages(traces, first_lanes, origin);
    combined.cross_process_ = std::make_shared<CrossProcessPaths>(std::move(directories));
    combined.index_task_lookup();
    return combined;
  }

 private:
  static void shift_row(IntervalRow& row, uint64_t offset) {
    for (uint64_t& begin : row.begins) begin += offset;
    for (uint64_t& end : row.ends) end += offset;
  }

  static void shift(TimelineIndex& index, uint64_t offset) {
    if (offset == 0) return;
    for (Lane& lane : index.lanes_) {
      for (IntervalRow& row : lane.depths) shift_row(row, offset);
      for (IntervalRow& row : lane.runs) shift_row(row, offset);
      shift_row(lane.idle, offset);
      shift_row(lane.off_cpu, offset);
      shift_row(lane.samples, offset);
      for (uint64_t& time : lane.markers.times) time += offset;
    }
    for (TaskLine& line : index.task_lines_) {
      line.begin += offset;
      line.end += offset;
    }
    for (uint64_t& time : index.run_begins_) time += offset;
    for (uint64_t& time : index.run_ends_) time += offset;
    for (Arrow& arrow : index.arrows_) {
      arrow.from_time += offset;
      arrow.to_time += offset;
    }
    for (CounterSeries& series : index.counters_)
      for (uint64_t& time : series.times) time += offset;
    shift_row(index.samples_without_lane_, offset);
    index.duration_ += offset;
  }

  // `part`'s lanes, counters, sites and tasks after `into`'s.
  static void append(TimelineIndex& into, TimelineIndex&& part) {
    const auto site_offset = static_cast<uint32_t>(into.sites_.size());
    const auto lane_offset = static_cast<uint32_t>(into.lanes_.size());
    const auto task_offset = static_cast<uint32_t>(into.task_lines_.size());
    append_tasks(into, std::move(part), lane_offset);
    auto moved_site = [site_offset](uint32_t site) { return site == 0 ? 0 : site + site_offset; };
    for (reader::Site& site : part.sites_) {
      site.id = moved_site(site.id);
      into.sites_.push_back(std::move(site));
    }
    const auto stack_offset = static_cast<uint32_t>(into.sample_stacks_.size());
    append_sample_stacks(into.sample_stacks_, part.sample_stacks_);
    for (uint32_t& stack : part.samples_without_lane_.items) stack += stack_offset;
    append_row(into.samples_without_lane_, part.samples_without_lane_);
    for (Lane& lane : part.lanes_) {
      for (uint32_t& stack : lane.samples.items) stack += stack_offset;
      for (IntervalRow& row : lane.depths)
        for (uint32_t& item : row.items) item = moved_site(item);
      for (uint32_t& site : lane.markers.sites) site = moved_site(site);
      for (IntervalRow& row : lane.runs)
        for (uint32_t& item : row.items) item += task_offset;
      into.lanes_.push_back(std::move(lane));
    }
    for (CounterSeries& series : part.counters_) {
      series.site = moved_site(series.site);
      series.lane += lane_offset;
      for (uint32_t& lane : series.lanes) lane += lane_offset;
      for (uint32_t& lane : series.sample_lanes) lane += lane_offset;
      into.counters_.push_back(std::move(series));
    }
    for (auto& prefix : part.busy_prefix_) into.busy_prefix_.push_back(std::move(prefix));
    for (std::string& warning : part.warnings_) into.warnings_.push_back(std::move(warning));
    into.event_count_ += part.event_count_;
    into.duration_ = std::max(into.duration_, part.duration_);
  }

  // `part`'s stacks and functions after `into`'s (a function of both processes has an id in each).
  static void append_sample_stacks(SampleStackTable& into, const SampleStackTable& part) {
    if (part.size() == 0) return;
    if (into.first.empty()) into.first.push_back(0);
    const auto function_offset = static_cast<uint32_t>(into.functions.size());
    for (size_t k = 0; k < part.size(); ++k) {
      for (const uint32_t function : part[k]) into.frames.push_back(function + function_offset);
      into.first.push_back(into.frames.size());
    }
    for (size_t k = 0; k < part.functions.size(); ++k) into.functions.add(part.functions[k]);
  }

  // `part`'s intervals after `into`'s, in time order (both rows are).
  static void append_row(IntervalRow& into, const IntervalRow& part) {
    IntervalRow merged;
    size_t a = 0;
    size_t b = 0;
    while (a < into.size() || b < part.size()) {
      const bool from_into = b == part.size() || (a < into.size() && into.begins[a] <= part.begins[b]);
      const IntervalRow& row = from_into ? into : part;
      const size_t k = from_into ? a++ : b++;
      merged.add(row.begins[k], row.ends[k], row.items[k]);
    }
    into = std::move(merged);
  }

  // Task indexes, rows and arrows are laid out again once every part is in.
  static void append_tasks(TimelineIndex& into, TimelineIndex&& part, uint32_t lane_offset) {
    const auto task_offset = static_cast<uint32_t>(into.task_lines_.size());
    const auto run_offset = static_cast<uint32_t>(into.run_begins_.size());
    TaskProcess process = part.task_processes_.front();
    process.first_task = task_offset;
    process.first_lane = lane_offset;
    into.task_processes_.push_back(std::move(process));
    into.graphs_.push_back(std::move(part.graphs_.front()));
    into.task_lines_.insert_at_end(part.task_lines_.begin(), part.task_lines_.end());
    for (uint32_t k = 0; k < part.task_names_.size(); ++k) {
      into.task_names_.add(part.task_names_[k]);
      into.task_labels_.add(part.task_labels_[k]);
    }
    for (size_t k = 1; k < part.run_first_.size(); ++k) into.run_first_.push_back(part.run_first_[k] + run_offset);
    into.run_begins_.insert_at_end(part.run_begins_.begin(), part.run_begins_.end());
    into.run_ends_.insert_at_end(part.run_ends_.begin(), part.run_ends_.end());
    for (Arrow arrow : part.arrows_) {
      arrow.from_task += task_offset;
      arrow.to_task += task_offset;
      into.arrows_.push_back(arrow);
    }
  }

  // Every message sent in one trace and received in another, by send time. Streams and lanes
  // are in the same order, so a stream's lane is its trace's first lane plus its number.
  static std::vector<MessageArrow> find_messages(const std::vector<reader::Trace>& traces,
                                                 const std::vector<uint32_t>& first_lanes, int64_t origin) {
    auto time = [&](size_t trace, uint64_t ticks) {
      return static_cast<uint64_t>(std::max<int64_t>(traces[trace].to_unix_ns(ticks) - origin, 0));
    };
    std::vector<MessageArrow> messages;
    for (const reader::MessageEnds& message : reader::match_messages(traces))
      messages.push_back({first_lanes[message.sender] + static_cast<uint32_t>(message.send_stream),
                          first_lanes[message.receiver] + static_cast<uint32_t>(message.receive_stream),
                          time(message.sender, message.send_ticks), time(message.receiver, message.receive_ticks)});
    std::sort(messages.begin(), messages.end(),
              [](const MessageArrow& a, const MessageArrow& b) { return a.from_time < b.from_time; });
    return messages;
  }
};

TimelineIndex TimelineIndex::build(const std::vector<reader::Trace>& traces, const Progress& progress,
                                   model::GraphDetail detail) {
  if (traces.empty()) throw std::invalid_argument("no trace to index");
  if (traces.size() == 1) return build(traces.front(), progress, detail);
  return IndexCombiner::combine(traces, progress, detail);
}

uint64_t TimelineIndex::to_ns(uint64_t ticks) const {
  if (ticks <= origin_ticks_) return origin_offset_ns_;
  return origin_offset_ns_ +
         static_cast<uint64_t>(std::llround(static_cast<double>(ticks - origin_ticks_) * ns_per_tick_));
}

uint64_t TimelineIndex::duration_ns(uint64_t ticks) const {
  return static_cast<uint64_t>(std::llround(static_cast<double>(ticks) * ns_per_tick_));
}

std::span<const uint64_t> TimelineIndex::run_begins(uint32_t task) const {
  return {run_begins_.data() + run_first_.at(task), run_begins_.data() + run_first_.at(task + 1)};
}

std::span<const uint64_t> TimelineIndex::run_ends(uint32_t task) const {
  return {run_ends_.data() + run_first_.at(task), run_ends_.data() + run_first_.at(task + 1)};
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

std::string_view TimelineIndex::task_display_name(uint32_t index) const {
  const std::string_view label = task_label(index);
  return label.empty() ? task_name(index) : label;
}

uint64_t TimelineIndex::to_ns(size_t process, uint64_t ticks) const {
  const TaskProcess& clock = task_processes_.at(process);
  if (ticks <= clock.origin_ticks) return clock.origin_offset_ns;
  return clock.origin_offset_ns +
         static_cast<uint64_t>(std::llround(static_cast<double>(ticks - clock.origin_ticks) * clock.ns_per_tick));
}

uint64_t TimelineIndex::duration_ns(size_t process, uint64_t ticks) const {
  return static_cast<uint64_t>(std::llround(static_cast<double>(ticks) * task_processes_.at(process).ns_per_tick));
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
    out.lanes.push_back(std::move(view));
  }
  const ShownRows shown(task_tree_, rows.collapsed);
  out.task_rows_shown = shown.count();
  // Tree row first_task holds one of the process's roots (parents are within a process): never hidden.
  for (const TaskProcess& process : task_processes_)
    out.process_first_rows.push_back(process.first_task < task_row_count() ? shown.shown_row(process.first_task)
                                                                           : out.task_rows_shown);
  window_tasks(begin, end, ns_per_pixel, shown, rows, out);
  auto column = [&](uint64_t time) {
    return static_cast<uint64_t>(std::clamp((static_cast<double>(time) - static_cast<double>(begin)) / ns_per_pixel,
                                            -1.0, static_cast<double>(width) + 1) +
                                 1);
  };
  window_arrows(begin, end, column, shown, rows, out);
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
        const size_t column_last = static_cast<size_t>(
            std::lower_bound(times.begin() + column_first, times.begin() + last, column_end) - times.begin());
        if (column_last == column_first) continue;
        const auto [low, high] = series.pyramid.range(series.values, column_first, column_last);
        view.points.push_back({times[column_first], low, high, series.values[column_last - 1]});
        column_first = column_last;
      }
    }
    out.counters.push_back(std::move(view));
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
    const TaskLine& line = task_lines_[task];
    if (line.end < begin || line.begin > end) continue;
    TaskInView view{task, rows.first + static_cast<uint32_t>(k), {}};
    const auto begins = run_begins(task);
    const auto ends = run_ends(task);
    size_t i = static_cast<size_t>(std::lower_bound(ends.begin(), ends.end(), begin) - ends.begin());
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
      view.runs.push_back(piece);
      i = next;
    }
    out.tasks.push_back(std::move(view));
  }
}

// Arrows that touch the rows asked for (or cross them), found by length class; those drawn at
// the same pixel columns and rows with the same kind are merged. An arrow inside a collapsed
// subtree has nowhere to go and is left out.
void TimelineIndex::window_arrows(uint64_t begin, uint64_t end, const std::function<uint64_t(uint64_t)>& column,
                                  const ShownRows& shown, const TaskRowQuery& rows, Window& out) const {
  std::unordered_map<DrawnKey, uint32_t, DrawnKeyHash> drawn;
  for (size_t length_class = 0; length_class < arrows_by_length_.size(); ++length_class) {
    const auto& bucket = arrows_by_length_[length_class];
    if (bucket.empty()) continue;
    const uint64_t longest =
        length_class >= 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << length_class) - 1;
    const uint64_t earliest = begin > longest ? begin - longest : 0;
    auto first = std::lower_bound(bucket.begin(), bucket.end(), earliest,
                                  [&](uint32_t k, uint64_t time) { return arrows_[k].from_time < time; });
    for (auto it = first; it != bucket.end() && arrows_[*it].from_time <= end; ++it) {
      const Arrow& arrow = arrows_[*it];
      if (arrow.to_time < begin) continue;
      const uint32_t from_tree_row = task_lines_[arrow.from_task].row;
      const uint32_t to_tree_row = task_lines_[arrow.to_task].row;
      const uint32_t from_row = shown.shown_row(from_tree_row);
      const uint32_t to_row = shown.shown_row(to_tree_row);
      if (std::max(from_row, to_row) < rows.first || std::min(from_row, to_row) >= rows.last) continue;
      if (from_row == to_row && from_tree_row != to_tree_row) continue;  // both in one collapsed subtree
      const DrawnKey key = DrawnKey::of(column(arrow.from_time), column(arrow.to_time), from_row, to_row,
                                        static_cast<uint32_t>(arrow.kind));
      auto [found, inserted] = drawn.try_emplace(key, static_cast<uint32_t>(out.arrows.size()));
      if (inserted)
        out.arrows.push_back({*it, 1, from_row, to_row});
      else
        ++out.arrows[found->second].merged;
    }
  }
}

// Messages are few next to spans (two events each): all of them are looked at, those drawn at
// the same pixel columns between the same lanes merged.
void TimelineIndex::window_messages(uint64_t begin, uint64_t end, const std::function<uint64_t(uint64_t)>& column,
                                    Window& out) const {
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

std::vector<SearchHit> TimelineIndex::search(const std::string& text, size_t limit) const {
  std::vector<SearchHit> hits;
  const std::string needle = lowercase(text);
  if (needle.empty()) return hits;
  for (uint32_t k = 0; k < task_lines_.size() && hits.size() < limit; ++k) {
    if (!contains_folded(task_label(k), needle) && !contains_folded(task_name(k), needle)) continue;
    SearchHit hit;
    hit.kind = SearchHit::Kind::task;
    hit.task = k;
    hit.begin = task_lines_[k].begin;
    hit.end = task_lines_[k].end;
    hit.text = task_display_name(k);
    hits.push_back(std::move(hit));
  }
  std::sort(hits.begin(), hits.end(), [](const SearchHit& a, const SearchHit& b) { return a.begin < b.begin; });
  std::vector<bool> site_matches(sites_.size() + 1, false);
  bool any_site = false;
  for (const auto& candidate : sites_)
    if (candidate.id != 0 && contains_folded(site_name(candidate.id), needle))
      any_site = site_matches[candidate.id] = true;
  if (!any_site) return hits;
  for (uint32_t lane = 0; lane < lanes_.size() && hits.size() < limit; ++lane)
    for (uint32_t depth = 0; depth < lanes_[lane].depths.size() && hits.size() < limit; ++depth) {
      const IntervalRow& row = lanes_[lane].depths[depth];
      for (uint32_t k = 0; k < row.size() && hits.size() < limit; ++k) {
        if (row.items[k] >= site_matches.size() || !site_matches[row.items[k]]) continue;
        SearchHit hit;
        hit.kind = SearchHit::Kind::span;
        hit.lane = lane;
        hit.depth = depth;
        hit.index = k;
        hit.begin = row.begins[k];
        hit.end = row.ends[k];
        hit.text = site_name(row.items[k]);
        hits.push_back(std::move(hit));
      }
    }
  return hits;
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
    if (!lane.depths.empty()) {
      const IntervalRow& top = lane.depths.front();
      const auto [first, last] = overlapping(top);
      if (first < last) {
        const auto& prefix = busy_prefix_[lane_number];
        uint64_t busy = prefix[last] - prefix[first];
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
          ++total.count;
          total.total_ns += clipped(row.begins[k], row.ends[k]);
        }
      }
    for (const auto& [site, total] : by_site) stats.top_names.push_back(total);
    std::sort(stats.top_names.begin(), stats.top_names.end(), [](const NameTotal& a, const NameTotal& b) {
      return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.site < b.site;
    });
    if (stats.top_names.size() > 20) stats.top_names.resize(20);
  }
  for (uint32_t k = 0; k < task_lines_.size(); ++k) {
    const TaskLine& line = task_lines_[k];
    if (line.begin <= end && line.end >= begin) ++stats.tasks_overlapping;
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

// Across processes when the index has several: a task that waited for a message goes on in the
// sender's process (as `chronicle stats --critical-path` does). Should the traces be gone since
// the index was built, the path stays within the task's own process.
std::vector<CriticalStep> TimelineIndex::critical_path(uint32_t task_number) const {
  std::vector<CriticalStep> steps;
  if (task_number >= task_lines_.size()) return steps;
  const size_t process = process_of_task(task_number);
  const model::TaskId target = task_lines_[task_number].id;
  analysis::CriticalPath path;
  bool found = false;
  if (cross_process_) try {
      const std::vector<std::unique_ptr<analysis::TaskSource>> sources = task_sources();
      std::vector<const analysis::TaskSource*> each;
      for (const auto& source : sources) each.push_back(source.get());
      path = cross_process_->path(each, process, target);
      found = true;
    } catch (const std::exception&) {
    }
  if (!found) {
    path = critical_path_in_process(process, target);
    for (analysis::CriticalStep& step : path.steps) step.process = process;
  }
  for (const analysis::CriticalStep& step : path.steps) {
    const auto index = task_index(step.process, step.task);
    if (index) steps.push_back({*index, step.what, to_ns(step.process, step.from), to_ns(step.process, step.to)});
  }
  return steps;
}

}  // namespace chronicle::viewer
