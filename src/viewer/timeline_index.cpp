// Building the timeline index of one trace (IndexBuilder). Combining several traces is in
// timeline_combine.cpp, the window (level of detail) and other queries in timeline_queries.cpp.
#include "viewer/timeline_index.hpp"
#include "viewer/timeline_index_internal.hpp"

#include "analysis/cpu_timeline.hpp"
#include "analysis/critical_path.hpp"
#include "analysis/sample_stacks.hpp"
#include "analysis/span_time.hpp"
#include "model/task_graph_feed.hpp"
#include "reader/run_on_threads.hpp"
#include "viewer/index_steps.hpp"
#include "viewer/spans_apart.hpp"
#include "viewer/stream_pass.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <exception>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <unordered_map>

namespace chronicle::viewer {
namespace index_internal {

std::string process_group(const reader::Trace& trace) {
  const auto& description = trace.description();
  return fmt::format("{} · {} (pid {})", description.hostname, description.process_name, description.pid);
}

std::string attribute_text_of(const reader::SpanAttribute& attribute) {
  return fmt::format("{} = {}", attribute.key, reader::attribute_text(attribute));
}

TaskAttributeTexts task_attribute_texts_of(const reader::SpanPairing& pairing) {
  TaskAttributeTexts texts;
  for (const auto& [task, attributes] : pairing.all_task_attributes())
    for (const reader::SpanAttribute& attribute : attributes) texts[task].push_back(attribute_text_of(attribute));
  return texts;
}

void add_attribute_texts(WholeSpans& whole, uint32_t k, const reader::PairedSpan& span) {
  for (const reader::SpanAttribute& attribute : span.attributes) {
    whole.attribute_spans.push_back(k);
    whole.attribute_texts.add(attribute_text_of(attribute));
  }
  if (span.failed) {
    whole.attribute_spans.push_back(k);
    whole.attribute_texts.add(fmt::format("status = error: {}", span.status_message));
  }
}

}  // namespace index_internal

using index_internal::add_attribute_texts;
using index_internal::attribute_text_of;
using index_internal::process_group;

void StringColumn::reserve(size_t strings, size_t total_chars) {
  first.reserve(strings + 1);
  chars.reserve(total_chars);
}

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

void IntervalRow::reserve(size_t count) {
  begins.reserve(count);
  ends.reserve(count);
  items.reserve(count);
}

void IntervalRow::shrink_to_fit() {
  begins.shrink_to_fit();
  ends.shrink_to_fit();
  items.shrink_to_fit();
}

namespace {

// Calls each(begin, end) for the lane's busy intervals in order: its outermost spans and task
// runs, merged where they overlap. Only intervals that overlap are merged: two that touch (one
// ends in the ns the next begins, which a clock read every ~10 ns gives often) add up the same,
// and keep busy_row() the outermost spans' row itself when the runs lie inside them.
template <class Each>
void for_each_busy(const Lane& lane, Each each) {
  std::vector<const IntervalRow*> rows;
  if (!lane.depths.empty()) rows.push_back(&lane.depths.front());
  for (const IntervalRow& row : lane.runs) rows.push_back(&row);
  std::vector<size_t> next(rows.size(), 0);
  bool holding = false;
  uint64_t held_begin = 0;
  uint64_t held_end = 0;
  while (true) {
    size_t earliest = rows.size();
    for (size_t r = 0; r < rows.size(); ++r)
      if (next[r] < rows[r]->size() &&
          (earliest == rows.size() || rows[r]->begins[next[r]] < rows[earliest]->begins[next[earliest]]))
        earliest = r;
    if (earliest == rows.size()) break;
    const uint64_t begin = rows[earliest]->begins[next[earliest]];
    const uint64_t end = rows[earliest]->ends[next[earliest]++];
    if (holding && begin < held_end) {
      held_end = std::max(held_end, end);
      continue;
    }
    if (holding) each(held_begin, held_end);
    holding = true;
    held_begin = begin;
    held_end = end;
  }
  if (holding) each(held_begin, held_end);
}

}  // namespace

// The busy row is made only when it is not the outermost spans' row (the common case: runs
// inside the spans), and then once at its size: a first walk counts the intervals and compares
// them with the outermost spans, a second, when needed, writes them. Built by doubling and
// copied to fit, the rows thrown away took 0.7 GB of fresh pages at 100 M events.
void index_internal::index_busy_row(Lane& lane) {
  const IntervalRow* outermost = lane.depths.empty() ? nullptr : &lane.depths.front();
  size_t count = 0;
  bool is_outermost = outermost != nullptr;
  for_each_busy(lane, [&](uint64_t begin, uint64_t end) {
    is_outermost =
        is_outermost && count < outermost->size() && outermost->begins[count] == begin && outermost->ends[count] == end;
    ++count;
  });
  lane.busy = IntervalRow{};
  lane.busy_is_outermost = is_outermost && count == outermost->size();
  if (lane.busy_is_outermost) return;
  lane.busy.begins.reserve(count);
  lane.busy.ends.reserve(count);
  for_each_busy(lane, [&](uint64_t begin, uint64_t end) {
    lane.busy.begins.push_back(begin);
    lane.busy.ends.push_back(end);
  });
}

// Fills a TimelineIndex from a trace.
class IndexBuilder {
 public:
  static constexpr uint64_t kOpen = std::numeric_limits<uint64_t>::max();  // a whole span's end, until it ends

  IndexBuilder(const reader::Trace& trace, const TimelineIndex::Progress& progress, model::GraphDetail detail,
               TimelineIndex::TaskLookup lookup)
      : trace_(trace), counter_catalog_(trace.sites()), progress_(progress), detail_(detail), lookup_(lookup) {}

  // `pairing_problems`: span ends the reader paired with nothing, for the page's warnings.
  TimelineIndex build(std::vector<std::string>& pairing_problems) {
    index_internal::IndexSteps steps;
    find_origin();
    add_lanes();
    // Each stream is read on its own, on every core (stream_pass.hpp): markers, counters and the
    // spans its thread owns. Then the events that tie the streams (tasks, and what runs in them)
    // are merged in time order for the task graph and the tasks' spans. The graph is built on a
    // second thread, which also puts the counters together while no events wait. When a trace's
    // streams cannot be read apart, all events are merged instead, as before. (The graph's thread
    // also indexes what needs neither: counters, off-CPU periods, samples, losses.)
    std::atomic<bool> apart = streams_can_be_apart();
    std::vector<index_internal::StreamPart> parts = index_streams_alone(apart);
    steps.done(apart ? "streams, each alone" : "streams (not apart)");
    model::TaskGraphFeed feed(
        [this](uint32_t site_id) {
          const reader::Site* site = trace_.site(site_id);
          return site ? site->name : std::string();
        },
        detail_);
    uint64_t task_creations = 0;
    uint64_t task_edges_at_most = 0;
    for (const index_internal::StreamPart& part : parts) {
      task_creations += part.task_creations;
      task_edges_at_most += part.task_creations + part.task_waits_and_resolutions;
    }
    count_samples_by_site(parts);
    feed.expect_tasks(task_creations, task_edges_at_most);
    auto graph = std::async(std::launch::async, [this, &feed, &parts] {
      BesideGraph at;
      return feed.build([this, &parts, &at] { return work_beside_graph(parts, at); });
    });
    // Once the tying events are merged, the tasks need nothing of the spans still to be put
    // together: the graph's thread's core takes the graph, the tasks, then the arrows and the task
    // lookup (which read nothing the lanes' runs, idle and busy rows write meanwhile).
    std::promise<void> tasks_indexed;
    std::future<void> tasks_ready = tasks_indexed.get_future();
    std::future<void> task_work;
    const auto index_tasks_beside = [&](uint64_t merged_last) {
      task_work = std::async(std::launch::async, [this, &graph, &tasks_indexed, merged_last] {
        index_tasks_then_arrows(graph, merged_last, tasks_indexed);
      });
    };
    try {
      if (apart) {
        index_internal::ApartResult apart_result =
            index_internal::index_spans_apart(trace_, index_, parts, index_.lanes_, index_.whole_spans_, feed, steps,
                                              [&](index_internal::TyingEventsMerged merged) {
                                                task_attribute_texts_ = std::move(merged.task_attribute_texts);
                                                index_tasks_beside(merged.last);
                                              });
        pairing_problems = std::move(apart_result.problems);
        finish_whole_spans(index_);
        steps.done("whole spans finished");
        index_.streams_read_apart_ = true;
      } else {
        forget_spans_read_apart();
        uint64_t merged_last = 0;
        pairing_problems = index_spans(feed, merged_last);  // closes the feed
        steps.done("every event merged");
        index_tasks_beside(merged_last);
      }
    } catch (...) {
      feed.close();  // the graph's thread ends; the futures wait for it and the tasks as they go
      throw;
    }
    for (const index_internal::StreamPart& part : parts) index_.event_count_ += part.events;
    tasks_ready.get();
    steps.done("tasks (waited for)");
    index_lane_runs();
    index_idle();
    index_busy();
    steps.done("runs, idle and busy");
    // The task lookup's first half here while the arrows are made (the main thread waited for
    // them); its arrow lists once they are.
    Column<uint32_t> wait_first;
    if (lookup_ == TimelineIndex::TaskLookup::made_here) wait_first = index_.index_task_ids_and_waits();
    steps.done("task ids and waits");
    task_work.get();
    if (lookup_ == TimelineIndex::TaskLookup::made_here) {
      index_.index_task_arrow_lists();
      index_.wait_first_ = std::move(wait_first);
    }
    steps.done("arrows (waited for), lookup");
    return std::move(index_);
  }

 private:
  // On the task work's thread: the graph taken when its thread ends, the tasks indexed (then
  // `tasks_indexed` is set, or holds what failed), the arrows, and the task lookup if made here.
  void index_tasks_then_arrows(std::future<model::TaskGraph>& graph, uint64_t merged_last,
                               std::promise<void>& tasks_indexed) {
    try {
      index_.graphs_.front() = graph.get();
      // to_ns keeps the order of times: the latest event's time is the latest of the times.
      index_.duration_ = std::max(index_.duration_, merged_last);
      index_.duration_ = std::max(index_.duration_, index_.to_ns(index_.graphs_.front().last_ticks()));
      index_tasks();
    } catch (...) {
      tasks_indexed.set_exception(std::current_exception());
      return;
    }
    tasks_indexed.set_value();
    index_arrows();
  }

  // The timeline's origin and clock are stats' (analysis::TimelineClock), so that a span's time is
  // the same number in both.
  void find_origin() {
    const uint64_t origin = analysis::timeline_origin(trace_);
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

  // A thread's spans are paired apart only when the thread has one stream (a thread id used again
  // by a later thread has several, whose spans the pairing keeps together).
  // CHRONICLE_VIEW_ONE_PASS=1 merges all events, as before (to compare the two).
  bool streams_can_be_apart() const {
    if (const char* one_pass = std::getenv("CHRONICLE_VIEW_ONE_PASS"); one_pass && std::string_view(one_pass) == "1")
      return false;
    std::unordered_map<uint32_t, size_t> streams_of_thread;
    for (const reader::StreamInfo& stream : trace_.streams())
      if (++streams_of_thread[stream.thread_id] > 1) return false;
    return true;
  }

  std::vector<index_internal::StreamPart> index_streams_alone(std::atomic<bool>& apart) {
    const size_t count = trace_.streams().size();
    std::vector<index_internal::StreamPart> parts(count);
    std::vector<analysis::SeriesKind> counter_kinds;
    for (const reader::Site& site : trace_.sites()) {
      if (site.id == 0) continue;
      if (counter_kinds.size() <= site.id) counter_kinds.resize(site.id + 1, analysis::SeriesKind::level);
      counter_kinds[site.id] = analysis::series_kind(site.kind).value_or(analysis::SeriesKind::level);
    }
    // The largest streams first, so that the last to be read are short.
    std::vector<size_t> order(count);
    for (size_t k = 0; k < count; ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(),
                     [this](size_t a, size_t b) { return trace_.streams()[a].bytes > trace_.streams()[b].bytes; });
    std::atomic<uint64_t> read{0};
    std::mutex progress_mutex;
    const std::function<void(uint64_t)> progress = [&](uint64_t events) {
      const uint64_t before = read.fetch_add(events, std::memory_order_relaxed);
      if (!progress_ || before / TimelineIndex::kProgressEvents == (before + events) / TimelineIndex::kProgressEvents)
        return;
      const std::lock_guard lock(progress_mutex);
      progress_(before + events);
    };
    const std::vector<std::exception_ptr> failures =
        reader::run_on_threads(count, reader::default_thread_count(), [&](size_t k) {
          index_internal::index_stream_alone(trace_, index_, order[k], counter_kinds, index_.lanes_[order[k]],
                                             parts[order[k]], apart, progress);
        });
    for (const std::exception_ptr& failure : failures)
      if (failure) std::rethrow_exception(failure);
    return parts;
  }

  // What the streams' passes began of the spans before one of them found the streams tied.
  void forget_spans_read_apart() {
    for (Lane& lane : index_.lanes_) {
      lane.depths.clear();
      lane.depth_spans.clear();
      lane.span_count = 0;
    }
  }

  // Where the graph's thread is in what it does beside the graph.
  struct BesideGraph {
    uint32_t lane = 0;  // the counters' samples: stream after stream
    size_t sample = 0;
    size_t counter = 0;  // then each series finished
  };
  static constexpr size_t kSamplesAPiece = size_t{1} << 16;

  // A piece of what needs neither the graph nor the spans: the counters, then the lanes' other
  // rows; false once nothing is left. A piece is short, so that the events handed to the graph
  // meanwhile do not wait long (the pass stops when too many wait).
  bool work_beside_graph(const std::vector<index_internal::StreamPart>& parts, BesideGraph& at) {
    // The counters' samples, stream after stream (the order finish_counter keeps for samples at
    // the same time), numbered as series in that order.
    if (at.lane < parts.size()) {
      const auto& samples = parts[at.lane].counter_samples;
      const size_t last = std::min(samples.size(), at.sample + kSamplesAPiece);
      for (; at.sample < last; ++at.sample) add_counter_sample(samples[at.sample], at.lane);
      if (at.sample == samples.size()) {
        ++at.lane;
        at.sample = 0;
      }
      return true;
    }
    if (at.counter < index_.counters_.size()) {
      finish_counter(index_.counters_[at.counter++]);
      return true;
    }
    index_off_cpu();
    index_samples();
    index_lost();
    return false;
  }

  // Samples as traced, stream after stream; finish_counter puts them in time order.
  void add_counter_sample(const index_internal::StreamCounterSample& sample, uint32_t lane_number) {
    const std::optional<uint32_t> found = counter_catalog_.series_of(sample.site);
    if (!found) return;
    for (size_t next = index_.counters_.size(); next <= *found; ++next) {
      CounterSeries series;
      series.site = sample.site;
      series.lane = lane_number;
      series.name = counter_catalog_.series()[next].label;
      series.kind = counter_catalog_.series()[next].kind;
      index_.counters_.push_back(std::move(series));
    }
    CounterSeries& series = index_.counters_[*found];
    make_room(series, sample.site);
    if (series.lanes.empty() || series.lanes.back() != lane_number) series.lanes.push_back(lane_number);
    series.sample_lanes.push_back(lane_number);
    series.times.push_back(sample.time);
    series.values.push_back(sample.value);
  }

  void count_samples_by_site(const std::vector<index_internal::StreamPart>& parts) {
    for (const index_internal::StreamPart& part : parts) {
      const auto& counts = part.counter_samples_by_site;
      if (samples_by_site_.size() < counts.size()) samples_by_site_.resize(counts.size());
      for (size_t site = 0; site < counts.size(); ++site) samples_by_site_[site] += counts[site];
    }
  }

  // A series' arrays made once at their size, not grown by doubling (whose fresh pages the kernel
  // clears: a tenth of a first open's time at 100 M events, `perf`): the samples of each site
  // that feeds the series were counted by the streams' passes.
  void make_room(CounterSeries& series, uint32_t site) {
    if (site >= samples_by_site_.size() || samples_by_site_[site] == 0) return;
    // Room for the site's samples beside what the series has room for (other sites' samples).
    const size_t room = series.times.values().capacity() + std::exchange(samples_by_site_[site], 0);
    series.times.reserve(room);
    series.values.reserve(room);
    series.sample_lanes.reserve(room);
  }

  // The order of a series' samples by time, a thread's own order kept at equal times and an
  // earlier thread's first (as a stable sort gives it): each thread's samples, one run after
  // another, are in time order already (its stream goes forward in time), so the runs are merged,
  // in a pass that reads each run in order (a sort's comparisons read the times anywhere: a third
  // of the graph's thread at 10 M events, while the merge of the events waited for it). A run out
  // of order (a stream that goes back in time) is sorted.
  static std::vector<uint32_t> time_order(const CounterSeries& series) {
    const auto count = static_cast<uint32_t>(series.times.size());
    std::vector<uint32_t> order(count);
    struct Run {
      uint32_t next;
      uint32_t end;
    };
    std::vector<Run> runs;
    bool runs_in_order = true;
    for (uint32_t k = 0; k < count; ++k) {
      if (k == 0 || series.sample_lanes[k] != series.sample_lanes[k - 1])
        runs.push_back({k, k});
      else if (series.times[k] < series.times[k - 1])
        runs_in_order = false;
      runs.back().end = k + 1;
    }
    if (!runs_in_order) {
      for (uint32_t k = 0; k < count; ++k) order[k] = k;
      std::stable_sort(order.begin(), order.end(),
                       [&series](uint32_t a, uint32_t b) { return series.times[a] < series.times[b]; });
      return order;
    }
    // A heap of runs by their next sample's time, the earlier run first at equal times.
    const auto later = [&](uint32_t a, uint32_t b) {
      const uint64_t time_a = series.times[runs[a].next];
      const uint64_t time_b = series.times[runs[b].next];
      return time_a != time_b ? time_a > time_b : a > b;
    };
    std::vector<uint32_t> heap(runs.size());
    for (uint32_t r = 0; r < heap.size(); ++r) heap[r] = r;
    std::make_heap(heap.begin(), heap.end(), later);
    for (uint32_t k = 0; k < count; ++k) {
      std::pop_heap(heap.begin(), heap.end(), later);
      Run& run = runs[heap.back()];
      order[k] = run.next++;
      if (run.next < run.end)
        std::push_heap(heap.begin(), heap.end(), later);
      else
        heap.pop_back();
    }
    return order;
  }

  // The series' samples in `order` (order[k]: the sample that goes at k), one column at a time,
  // each read where order says into a column made at its size. Moving them in place, one cycle of
  // the permutation after another, needed no second column but read each sample from anywhere:
  // most of a 10 M-event build's time on the graph's thread (`perf`), while the merge of the
  // events waited for it. Here each thread's run is read in order.
  // Gathered into new arrays, not permuted in place: following the permutation's cycles in place
  // saves the fresh pages (240 MB at 100 M events) but waits on a cache miss at every step, and
  // made the graph's thread, which the merge of the tying events waits for, 1.5 s slower there.
  static void put_in_order(CounterSeries& series, const std::vector<uint32_t>& order) {
    gather_in_order(series.times, order);
    gather_in_order(series.values, order);
    gather_in_order(series.sample_lanes, order);
  }

  template <class T>
  static void gather_in_order(Column<T>& column, const std::vector<uint32_t>& order) {
    typename Column<T>::Built ordered(order.size());
    const T* from = column.data();
    for (size_t k = 0; k < order.size(); ++k) ordered[k] = from[order[k]];
    column = std::move(ordered);
  }

  // Several threads' samples of one series merged in time order (time_order), then shown as
  // readers show them.
  static void finish_counter(CounterSeries& series) {
    if (series.lanes.size() > 1) {
      std::vector<uint32_t> order = time_order(series);
      put_in_order(series, order);
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
      uint32_t whole;  // its span in whole_spans_
    };
    std::vector<std::vector<Piece>> open(index_.lanes_.size());
    WholeSpans& whole = index_.whole_spans_;
    auto close = [&](size_t lane_number, size_t depth, uint64_t end) {
      Lane& lane = index_.lanes_[lane_number];
      auto& stack = open[lane_number];
      if (lane.depths.size() <= depth) {
        lane.depths.resize(depth + 1);
        lane.depth_spans.resize(depth + 1);
      }
      const Piece& piece = stack[depth];
      lane.depths[depth].add(piece.begin, end, piece.site);
      lane.depth_spans[depth].push_back(piece.whole);
      whole.running[piece.whole] += end > piece.begin ? end - piece.begin : 0;
      ++lane.span_count;
      stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(depth));
    };
    reader::SpanPairing pairing(trace_, reader::SpanPairing::Identities::left_out_unless_traced);
    uint64_t last_ticks = 0;
    std::unordered_map<uint64_t, uint32_t> whole_of_sequence;  // open spans' places in whole_spans_
    trace_.for_each_event(pairing, [&](const reader::Event& event) {
      feed.add(event, pairing);
      last_ticks = std::max(last_ticks, event.ticks);
      auto& stack = open[event.stream];
      switch (event.type) {
        case format::EventId::span_begin: {
          const reader::PairedSpan& span = *event.span;
          const auto place = static_cast<uint32_t>(whole.size());
          // Around it: its owner's span, else (a task's outermost) the span its thread was in then.
          const auto parent = whole_of_sequence.find(span.parent_sequence);
          whole.parents.push_back(parent != whole_of_sequence.end() ? parent->second
                                  : stack.empty()                   ? WholeSpans::kNoParent
                                                                    : stack.back().whole);
          stack.push_back({index_.to_ns(event.ticks), span.site_id, span.sequence, span.task, place});
          whole_of_sequence[span.sequence] = place;
          whole.begins.push_back(index_.to_ns(event.ticks));
          whole.ends.push_back(kOpen);
          whole.running.push_back(0);
          whole.sites.push_back(span.site_id);
          whole.lanes.push_back(event.stream);
          break;
        }
        case format::EventId::span_end:
          if (event.span) {
            if (const auto found = whole_of_sequence.find(event.span->sequence); found != whole_of_sequence.end()) {
              whole.ends[found->second] = index_.to_ns(event.ticks);
              add_attribute_texts(whole, found->second, *event.span);
              whole_of_sequence.erase(found);
            }
          }
          for (size_t depth = stack.size(); event.span && depth-- > 0;)
            if (stack[depth].sequence == event.span->sequence) {
              close(event.stream, depth, index_.to_ns(event.ticks));
              break;
            }
          break;
        case format::EventId::task_run_begin:
          if (const auto* spans = pairing.open_in_task(event.task))
            for (const reader::PairedSpan& span : *spans)
              stack.push_back({index_.to_ns(event.ticks), span.site_id, span.sequence, span.task,
                               whole_of_sequence.at(span.sequence)});
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
    feed.close();  // the graph's thread goes on beside what is left here
    last = index_.to_ns(last_ticks);
    for (size_t lane = 0; lane < open.size(); ++lane)  // cut by the trace's end
      while (!open[lane].empty()) close(lane, open[lane].size() - 1, last);
    for (uint64_t& end : whole.ends)
      if (end == kOpen) end = last;
    finish_whole_spans(index_);
    task_attribute_texts_ = index_internal::task_attribute_texts_of(pairing);
    for (Lane& lane : index_.lanes_) {
      for (IntervalRow& row : lane.depths) row.shrink_to_fit();
      for (Column<uint32_t>& column : lane.depth_spans) column.shrink_to_fit();
    }
    return pairing.describe_problems();
  }

  void index_tasks() {
    const auto& tasks = index_.graphs_.front().tasks();
    reserve_task_columns(tasks);
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
      if (const auto own = task_attribute_texts_.find(task.id); own != task_attribute_texts_.end())
        for (const std::string& text : own->second) {
          index_.task_attribute_tasks_.push_back(k);
          index_.task_attribute_texts_.add(text);
        }
    }
    task_attribute_texts_.clear();
    lay_out_tasks(index_);
  }

  // The task columns index_tasks writes, made once at their size: grown by doubling, each step
  // took fresh pages and copied the last (and the runs were copied again to fit).
  void reserve_task_columns(std::span<const model::Task> tasks) {
    size_t runs = 0, name_chars = 0, label_chars = 0, attributes = 0, attribute_chars = 0;
    for (const model::Task& task : tasks) {
      runs += task.runs.size();
      name_chars += task.name.size();
      label_chars += task.label.size();
    }
    for (const auto& [id, texts] : task_attribute_texts_) {
      attributes += texts.size();
      for (const std::string& text : texts) attribute_chars += text.size();
    }
    index_.run_first_.reserve(tasks.size() + 1);
    index_.run_begins_.reserve(runs);
    index_.run_ends_.reserve(runs);
    index_.task_names_.reserve(tasks.size(), name_chars);
    index_.task_labels_.reserve(tasks.size(), label_chars);
    index_.task_attribute_tasks_.reserve(attributes);
    index_.task_attribute_texts_.reserve(attributes, attribute_chars);
  }

  // Each thread's task runs, nested: a run goes on the first depth free when it begins.
  void index_lane_runs() {
    const std::unordered_map<uint32_t, uint32_t> lane_of_thread = lanes_by_thread();
    struct Run {
      uint64_t begin, end;
      uint32_t task;
      uint32_t depth = 0;  // its nesting on its lane
    };
    std::vector<std::vector<Run>> by_lane(index_.lanes_.size());
    const auto& tasks = index_.graphs_.front().tasks();
    std::vector<size_t> runs_of_lane(index_.lanes_.size(), 0);
    for (const model::Task& task : tasks)
      for (const model::RunInterval& run : task.runs)
        if (const auto lane = lane_of_thread.find(run.thread_id); lane != lane_of_thread.end())
          ++runs_of_lane[lane->second];
    for (size_t lane = 0; lane < by_lane.size(); ++lane) by_lane[lane].reserve(runs_of_lane[lane]);
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
      // Each row made once at its size: the depths first, then the rows.
      std::vector<uint64_t> depth_ends;  // the last run's end at each depth
      std::vector<size_t> depth_sizes;
      for (Run& run : runs) {
        run.depth = 0;
        while (run.depth < depth_ends.size() && depth_ends[run.depth] > run.begin) ++run.depth;
        if (run.depth == depth_ends.size()) {
          depth_ends.push_back(0);
          depth_sizes.push_back(0);
        }
        depth_ends[run.depth] = std::max(run.begin, run.end);
        ++depth_sizes[run.depth];
      }
      std::vector<IntervalRow>& rows = index_.lanes_[lane].runs;
      rows.resize(depth_sizes.size());
      for (size_t depth = 0; depth < rows.size(); ++depth) rows[depth].reserve(depth_sizes[depth]);
      for (const Run& run : runs) rows[run.depth].add(run.begin, run.end, run.task);
    }
  }

  void index_arrows() {
    index_arrows_of_graph();
    sort_arrows(index_);
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
    std::vector<TaskSpan> spans(parents.size());
    std::vector<TaskEnding> endings(parents.size(), TaskEnding::other);
    for (uint32_t k = 0; k < parents.size(); ++k) {
      const TaskLine& line = index.task_lines_[k];
      spans[k] = {line.begin, index.line_end(k), parents[k], line.row};
      if (line.resolved && line.outcome == format::TaskOutcome::failed) endings[k] = TaskEnding::failed;
      if (line.resolved && line.outcome == format::TaskOutcome::cancelled) endings[k] = TaskEnding::cancelled;
    }
    std::vector<uint32_t> process_first_tasks;
    for (const TaskProcess& process : index.task_processes_) process_first_tasks.push_back(process.first_task);
    index.task_time_rows_ = build_task_time_rows(spans, endings, process_first_tasks);
  }

  // The attribute texts in order of span (stable: a span's keep their order).
  static void sort_attribute_texts(WholeSpans& spans) {
    const size_t count = spans.attribute_spans.size();
    if (std::is_sorted(spans.attribute_spans.begin(), spans.attribute_spans.end())) return;
    std::vector<uint32_t> order(count);
    for (uint32_t a = 0; a < count; ++a) order[a] = a;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return spans.attribute_spans[a] < spans.attribute_spans[b]; });
    Column<uint32_t> sorted_spans;
    StringColumn sorted_texts;
    for (const uint32_t a : order) {
      sorted_spans.push_back(spans.attribute_spans[a]);
      sorted_texts.add(spans.attribute_texts[a]);
    }
    spans.attribute_spans = std::move(sorted_spans);
    spans.attribute_texts = std::move(sorted_texts);
  }

  // Whole spans (not kept apart only) in order of begin, parents and pieces renumbered.
  static void put_spans_in_order(TimelineIndex& index) {
    WholeSpans& spans = index.whole_spans_;
    const size_t count = spans.size();
    std::vector<uint32_t> order(count);
    for (uint32_t k = 0; k < count; ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return spans.begins[a] < spans.begins[b]; });
    std::vector<uint32_t> place(count);
    for (uint32_t k = 0; k < count; ++k) place[order[k]] = k;
    WholeSpans sorted;
    for (const uint32_t k : order) {
      sorted.begins.push_back(spans.begins[k]);
      sorted.ends.push_back(spans.ends[k]);
      sorted.sites.push_back(spans.sites[k]);
      sorted.lanes.push_back(spans.lanes[k]);
      sorted.parents.push_back(spans.parents[k] == WholeSpans::kNoParent ? WholeSpans::kNoParent
                                                                         : place[spans.parents[k]]);
      sorted.running.push_back(spans.running_ns(k, index.lanes_));
    }
    for (uint32_t& span : spans.attribute_spans) span = place[span];
    sorted.attribute_spans = std::move(spans.attribute_spans);
    sorted.attribute_texts = std::move(spans.attribute_texts);
    spans = std::move(sorted);
    for (Lane& lane : index.lanes_)
      for (Column<uint32_t>& column : lane.depth_spans)
        for (uint32_t& span : column) span = place[span];
  }

  // In order of begin (spans appended process after process are not), parents kept, and the reach.
  // Spans read apart are kept apart only already, in order of begin (spans_apart.hpp), and read
  // through WholeSpans::at.
  static void finish_whole_spans(TimelineIndex& index) {
    WholeSpans& spans = index.whole_spans_;
    if (!spans.kept_apart_only() && !std::is_sorted(spans.begins.begin(), spans.begins.end()))
      put_spans_in_order(index);
    const size_t count = spans.size();
    Column<uint64_t>::Built reach;
    Column<uint64_t>::Built block_reach;
    Column<uint64_t>::Built block_begins;
    const size_t blocks = (count + WholeSpans::kReachBlock - 1) / WholeSpans::kReachBlock;
    for (Column<uint64_t>::Built* column : {&reach, &block_reach, &block_begins}) column->reserve(blocks);
    uint64_t latest = 0;
    uint64_t latest_in_block = 0;
    uint64_t previous_begin = 0;
    // The latest spans, where a span's parent most often is: read from here, not again from its piece.
    constexpr size_t kRecent = 256;
    std::vector<WholeSpan> recent(kRecent);
    for (size_t k = 0; k < count; ++k) {
      const WholeSpan span = spans.at(k, index.lanes_);
      if (span.begin < previous_begin) throw std::logic_error("spans out of order of begin");
      previous_begin = span.begin;
      // A span that does not lie within the span around it (a task's span that outlives the span it
      // began in) is outermost: a frame's time is never cut to its parent's.
      if (const uint32_t parent = spans.parents[k]; parent != WholeSpans::kNoParent) {
        const WholeSpan around = k - parent < kRecent ? recent[parent % kRecent] : spans.at(parent, index.lanes_);
        if (span.begin < around.begin || span.end > around.end) spans.parents[k] = WholeSpans::kNoParent;
      }
      recent[k % kRecent] = span;
      if (k % WholeSpans::kReachBlock == 0) block_begins.push_back(span.begin);
      latest = std::max(latest, span.end);
      latest_in_block = std::max(latest_in_block, span.end);
      if ((k + 1) % WholeSpans::kReachBlock == 0 || k + 1 == count) {
        reach.push_back(latest);
        block_reach.push_back(latest_in_block);
        latest_in_block = 0;
      }
    }
    spans.reach = std::move(reach);
    spans.block_reach = std::move(block_reach);
    spans.block_begins = std::move(block_begins);
    sort_attribute_texts(spans);
    spans.keep_paused_only();
    for (Column<uint64_t>* column : {&spans.begins, &spans.ends}) column->shrink_to_fit();
    for (Column<uint32_t>* column : {&spans.sites, &spans.lanes, &spans.parents}) column->shrink_to_fit();
  }

  // Once tasks have rows (lay_out_tasks): the arrows by length and by the rows they join.
  static void sort_arrows(TimelineIndex& index) {
    sort_arrows_by_length(index);
    sort_arrows_by_rows(index, TimelineIndex::kTreeRows);
    sort_arrows_by_rows(index, TimelineIndex::kTimeRows);
    const auto& time_rows = index.task_time_rows_.row;
    index.arrow_levels_ =
        build_arrow_levels(index.arrows_, [&](const Arrow& arrow) -> std::optional<std::pair<uint32_t, uint32_t>> {
          if (arrow.from_task >= time_rows.size() || arrow.to_task >= time_rows.size()) return std::nullopt;
          return std::pair(time_rows[arrow.from_task], time_rows[arrow.to_task]);
        });
  }

  // Sorted by lower row with a count per row (linear: there are no more rows than tasks), then
  // dealt into the classes in that order: within a class, by lower row, then by index.
  static void sort_arrows_by_rows(TimelineIndex& index, TimelineIndex::ArrowRowsKind kind) {
    const auto count = static_cast<uint32_t>(index.arrows_.size());
    std::vector<uint32_t> lower(count);
    std::vector<uint8_t> row_class(count);
    std::vector<uint32_t> class_sizes(TimelineIndex::kRowClasses, 0);
    uint32_t rows = 0;
    for (uint32_t k = 0; k < count; ++k) {
      const auto span = index.arrow_row_span(index.arrows_[k], kind);
      if (!span) {
        row_class[k] = UINT8_MAX;  // no row: never drawn this way
        continue;
      }
      lower[k] = span->first;
      row_class[k] = static_cast<uint8_t>(std::bit_width(span->second - span->first));
      ++class_sizes[row_class[k]];
      rows = std::max(rows, span->first + 1);
    }
    std::vector<uint32_t> row_first(size_t{rows} + 1, 0);
    for (uint32_t k = 0; k < count; ++k)
      if (row_class[k] != UINT8_MAX) ++row_first[lower[k] + 1];
    std::partial_sum(row_first.begin(), row_first.end(), row_first.begin());
    std::vector<uint32_t> by_lower(row_first.back());
    for (uint32_t k = 0; k < count; ++k)
      if (row_class[k] != UINT8_MAX) by_lower[row_first[lower[k]]++] = k;
    auto& classes = index.arrows_by_rows_[kind];
    classes.assign(TimelineIndex::kRowClasses, {});
    for (size_t c = 0; c < classes.size(); ++c) classes[c].reserve(class_sizes[c]);
    for (const uint32_t k : by_lower) classes[row_class[k]].push_back(k);
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
    index_.arrows_.reserve(index_.graphs_.front().edges().size());  // an arrow per edge whose tasks are known
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
    const std::unordered_map<uint32_t, uint32_t> lane_of_thread = lanes_by_thread();
    const auto& idle = index_.graphs_.front().idle();
    for (uint32_t k = 0; k < idle.size(); ++k) {
      auto lane = lane_of_thread.find(idle[k].thread_id);
      if (lane == lane_of_thread.end()) continue;
      index_.lanes_[lane->second].idle.add(index_.to_ns(idle[k].begin), index_.to_ns(idle[k].end), k);
    }
  }

  // Each thread's lane (its first, when a thread has several streams).
  std::unordered_map<uint32_t, uint32_t> lanes_by_thread() const {
    std::unordered_map<uint32_t, uint32_t> lane_of_thread;
    for (uint32_t k = 0; k < index_.lanes_.size(); ++k) lane_of_thread.try_emplace(index_.lanes_[k].thread_id, k);
    return lane_of_thread;
  }

  // Where each lane's thread lost events: each growth of its packets' cumulative count of
  // discarded events (the first packet's count counts from zero), between the packet before it
  // and the packet that counted it.
  void index_lost() {
    const std::unordered_map<uint32_t, uint32_t> lane_of_thread = lanes_by_thread();
    for (size_t stream = 0; stream < trace_.streams().size(); ++stream) {
      const auto lane = lane_of_thread.find(trace_.streams()[stream].thread_id);
      if (lane == lane_of_thread.end() || trace_.streams()[stream].events_discarded == 0) continue;
      IntervalRow& lost = index_.lanes_[lane->second].lost;
      uint64_t counted = 0;
      std::optional<uint64_t> previous_end;
      trace_.for_each_packet(stream, [&](const uint8_t* packet, uint64_t) {
        const auto& header = *reinterpret_cast<const format::PacketHeader*>(packet);
        const uint64_t begin = index_.to_ns(header.timestamp_begin);
        const uint64_t discarded = header.events_discarded.load(std::memory_order_relaxed);
        for (uint64_t more = discarded > counted ? discarded - counted : 0; more > 0;) {
          const auto item = static_cast<uint32_t>(std::min<uint64_t>(more, UINT32_MAX));
          lost.add(std::min(previous_end.value_or(begin), begin), begin, item);
          more -= item;
        }
        counted = std::max(counted, discarded);
        previous_end = index_.to_ns(header.timestamp_end.load(std::memory_order_relaxed));
      });
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
    const std::unordered_map<uint32_t, uint32_t> lane_of_thread = lanes_by_thread();
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

  // Each lane's busy time: its outermost span pieces and its task runs, merged where they overlap
  // or touch (a task's pieces lie in its runs; a thread's own outermost spans are whole there).
  // Each of those rows is in order of begin, so the lane's are merged, not sorted; lanes on
  // every core.
  void index_busy() {
    index_.busy_sums_.resize(index_.lanes_.size());
    const auto failures = reader::run_on_threads(index_.lanes_.size(), reader::default_thread_count(),
                                                 [this](size_t lane) { index_busy(lane); });
    for (const std::exception_ptr& failure : failures)
      if (failure) std::rethrow_exception(failure);
  }

  void index_busy(size_t lane_number) {
    Lane& lane = index_.lanes_[lane_number];
    index_internal::index_busy_row(lane);
    index_.busy_sums_[lane_number] = busy_sums_of(lane.busy_row());
  }

  // TimelineIndex::busy_sums_'s column for one lane's busy intervals.
  static Column<uint64_t>::Built busy_sums_of(const IntervalRow& busy) {
    Column<uint64_t>::Built sums{0};
    sums.reserve(busy.size() / TimelineIndex::kBusyBlock + 2);
    uint64_t total = 0;
    for (size_t k = 0; k < busy.size(); ++k) {
      total += busy.ends[k] - busy.begins[k];
      if ((k + 1) % TimelineIndex::kBusyBlock == 0) sums.push_back(total);
    }
    if (busy.size() % TimelineIndex::kBusyBlock != 0) sums.push_back(total);
    return sums;
  }

  const reader::Trace& trace_;
  analysis::SeriesCatalog counter_catalog_;
  std::vector<uint64_t> samples_by_site_;  // not yet made room for (make_room)
  const TimelineIndex::Progress& progress_;
  model::GraphDetail detail_;
  TimelineIndex::TaskLookup lookup_;
  TimelineIndex index_;
  // The tasks' own attributes as texts, until the tasks are indexed.
  index_internal::TaskAttributeTexts task_attribute_texts_;
};

namespace index_internal {

void finish_whole_spans(TimelineIndex& index) {
  IndexBuilder::finish_whole_spans(index);
}

void lay_out_tasks(TimelineIndex& index) {
  IndexBuilder::lay_out_tasks(index);
}

void sort_arrows(TimelineIndex& index) {
  IndexBuilder::sort_arrows(index);
}

}  // namespace index_internal

TimelineIndex TimelineIndex::build(const reader::Trace& trace, const Progress& progress, model::GraphDetail detail) {
  TimelineIndex index = build_one(trace, progress, detail, TaskLookup::made_here);
  index_internal::IndexSteps steps;
  index.whole_spans_.keep_apart_only(index.lanes_);
  steps.done("spans kept apart only");
  return index;
}

TimelineIndex TimelineIndex::build_one(const reader::Trace& trace, const Progress& progress, model::GraphDetail detail,
                                       TaskLookup lookup) {
  std::vector<std::string> pairing_problems;
  TimelineIndex index = IndexBuilder(trace, progress, detail, lookup).build(pairing_problems);
  if (progress) progress(index.event_count());
  index.warnings_ = trace.warnings();
  for (std::string& problem : pairing_problems) index.warnings_.push_back(std::move(problem));
  return index;
}

}  // namespace chronicle::viewer
