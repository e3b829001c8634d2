// The profile of a trace: the events read in one time-ordered merge (or, where the threads are
// apart, by profile_threads.cpp), and the report drawn from what they add up to.
#include "analysis/profile.hpp"
#include "analysis/profile_internal.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>
#include <unordered_map>

namespace chronicle::analysis {
namespace {

CounterProfile counter_profile(const SeriesInfo& series, const CounterAccumulator& accumulator, uint64_t elapsed_ns) {
  CounterProfile counter;
  counter.category = series.category;
  counter.name = series.name;
  counter.kind = series.kind;
  counter.samples = accumulator.samples;
  counter.min = accumulator.min;
  counter.max = accumulator.max;
  counter.first = accumulator.first;
  counter.last = accumulator.last;
  const double seconds = static_cast<double>(elapsed_ns) / 1e9;
  if (seconds <= 0) return counter;
  if (series.kind == SeriesKind::observations)
    counter.rate_per_second = static_cast<double>(accumulator.samples - 1) / seconds;
  else
    counter.rate_per_second = (accumulator.last - accumulator.first) / seconds;
  return counter;
}

// An outermost span of the thread's own (a task's spans make busy the threads its runs are on).
bool busies_its_thread(const reader::PairedSpan* span) {
  return span && span->task == 0 && span->parent_sequence == 0;
}

// The busy time of a thread changes with its spans and task runs; so does the time each task ran.
void follow_busy(const reader::Event& event, uint64_t ns, ThreadAccumulator& thread,
                 std::map<uint32_t, ThreadAccumulator>& threads, TaskRunClock& runs) {
  using format::EventId;
  switch (event.type) {
    case EventId::span_begin:
      if (busies_its_thread(event.span)) thread.busy.open_span(ns);
      break;
    case EventId::span_end:
      if (busies_its_thread(event.span)) threads[event.span->thread_id].busy.close_span(ns);
      break;
    case EventId::task_run_begin:
      if (event.task != 0) {
        thread.busy.begin_run(ns, event.task);
        runs.begin_run(event.task, event.thread_id, ns);
      }
      break;
    case EventId::task_run_end:
      if (event.task != 0) {
        thread.busy.end_run(ns, event.task);
        runs.end_run(event.task, event.thread_id, ns);
      }
      break;
    default:
      break;
  }
}

class Clock {
 public:
  explicit Clock(const reader::Trace& trace)
      : frequency_(static_cast<double>(trace.description().clock.frequency_hz)) {}
  uint64_t ns(uint64_t ticks) const { return static_cast<uint64_t>(static_cast<double>(ticks) * 1e9 / frequency_); }

 private:
  double frequency_;
};

// A histogram and total of TimelineClock ns.
Distribution distribution_ns(const LogHistogram& histogram, uint64_t total) {
  Distribution out;
  out.count = histogram.count();
  out.total = total;
  out.p50 = histogram.quantile(0.5);
  out.p90 = histogram.quantile(0.9);
  out.p99 = histogram.quantile(0.99);
  out.max = histogram.max();
  return out;
}

Distribution distribution(const LogHistogram& histogram, uint64_t total, const Clock& clock) {
  Distribution out;
  out.count = histogram.count();
  out.total = clock.ns(total);
  out.p50 = clock.ns(histogram.quantile(0.5));
  out.p90 = clock.ns(histogram.quantile(0.9));
  out.p99 = clock.ns(histogram.quantile(0.99));
  out.max = clock.ns(histogram.max());
  return out;
}

}  // namespace

namespace profile_internal {

SpanKey span_key(const reader::Trace& trace, uint32_t name_id) {
  if (const reader::Site* site = trace.site(name_id)) return {site->category, site->name};
  return {"", fmt::format("#{}", name_id)};
}

}  // namespace profile_internal

namespace {

// The events in one time-ordered merge, paired by the reader: what every trace can be read with.
EventTotals follow_merged(const reader::Trace& trace, const TimelineClock& timeline,
                          model::TaskGraphBuilder& graph_builder, const ProgressCallback& progress, uint64_t expected) {
  EventTotals totals;
  // Accumulate by (category, name), found once per site id. Counters: by series.
  // By site id; a hash map, since a damaged trace may carry any 32-bit id.
  std::unordered_map<uint32_t, SpanAccumulator*> span_by_site;
  CounterReader counter_reader(trace);
  std::vector<CounterAccumulator> counters;  // by series
  auto slot = [&trace](auto& by_site, auto& by_key, uint32_t name_id) {
    auto& found = by_site[name_id];
    if (!found) found = &by_key[span_key(trace, name_id)];
    return found;
  };
  auto& spans = totals.spans;
  auto& threads = totals.threads;
  uint64_t first = std::numeric_limits<uint64_t>::max(), last = 0;
  uint64_t seen = 0;

  // Time of the spans closed inside each open span, by its sequence (PairedSpan).
  std::unordered_map<uint64_t, uint64_t> children_of;
  // A task's span's running time: how long its task had run when it began, by its sequence.
  TaskRunClock runs;
  std::unordered_map<uint64_t, uint64_t> ran_at_begin;
  ThreadAccumulator* last_thread = nullptr;  // std::map's elements keep their address
  uint32_t last_thread_id = 0;
  reader::SpanPairing pairing(trace);
  trace.for_each_event(pairing, [&](const reader::Event& event) {
    ++seen;
    if (progress && (seen & 0xfffff) == 0) progress(seen, expected);
    first = std::min(first, event.ticks);
    last = std::max(last, event.ticks);
    // The merged events come in runs of one thread: its accumulator looked up once per run.
    if (!last_thread || last_thread_id != event.thread_id) {
      last_thread = &threads[event.thread_id];
      last_thread_id = event.thread_id;
    }
    ThreadAccumulator& thread = *last_thread;
    if (thread.events++ == 0) thread.first = event.ticks;
    thread.last = event.ticks;
    if (event.type == format::EventId::task_run_begin) thread.runs_tasks = true;
    const uint64_t ns = timeline.ns(event.ticks);
    follow_busy(event, ns, thread, threads, runs);
    switch (event.type) {
      case format::EventId::span_begin:
        if (event.span && event.span->task != 0)
          ran_at_begin[event.span->sequence] = runs.ran_until(event.span->task, ns);
        break;
      case format::EventId::span_end: {
        if (!event.span) break;  // it pairs with nothing (counted by the pairing)
        const reader::PairedSpan& span = *event.span;
        const uint64_t begin_ns = timeline.ns(span.begin);
        const uint64_t length = ns > begin_ns ? ns - begin_ns : 0;
        uint64_t running = length;
        if (span.task != 0) {
          const auto began = ran_at_begin.find(span.sequence);
          const uint64_t before = began == ran_at_begin.end() ? 0 : began->second;
          running = runs.ran_until(span.task, ns) - before;
          if (began != ran_at_begin.end()) ran_at_begin.erase(began);
        }
        uint64_t children = 0;
        if (const auto found = children_of.find(span.sequence); found != children_of.end()) {
          children = found->second;
          children_of.erase(found);
        }
        SpanAccumulator& accumulator = *slot(span_by_site, spans, span.site_id);
        accumulator.durations.add(length);
        accumulator.total += length;
        accumulator.self += length > children ? length - children : 0;
        accumulator.running += running;
        if (span.parent_sequence != 0) children_of[span.parent_sequence] += length;
        break;
      }
      case format::EventId::counter:
      case format::EventId::counter_float:
        if (const std::optional<CounterReading> reading = counter_reader.read(event)) {
          if (counters.size() <= reading->series) counters.resize(reading->series + 1);
          counters[reading->series].add(event.ticks, reading->value);
        }
        break;
      default:
        break;
    }
    graph_builder.add(event);
    return true;
  });
  totals.seen = seen;
  totals.first = first;
  totals.last = last;
  totals.pairing_problems = pairing.problems();
  for (size_t series = 0; series < counters.size(); ++series)
    totals.counters.push_back({counter_reader.series()[series], counters[series]});
  return totals;
}

}  // namespace

double Profile::events_per_second() const {
  return duration ? static_cast<double>(events) * 1e9 / static_cast<double>(duration) : 0.0;
}
double Profile::bytes_per_event() const {
  return events ? static_cast<double>(bytes) / static_cast<double>(events) : 0.0;
}

Profile profile_trace(const reader::Trace& trace, model::TaskGraph* graph_out, const ProgressCallback& progress) {
  return profile_trace(trace, graph_out, progress, model::GraphDetail::full);
}

namespace {

FlightWindows flight_windows(const reader::Trace& trace, const model::TaskGraph& graph, const EventTotals& totals,
                             const Clock& clock) {
  FlightWindows flight;
  flight.spans_before_window = totals.pairing_problems.unmatched_ends;
  flight.runs_before_window = graph.runs_before_window();
  for (const model::Task& task : graph.tasks()) {
    if (!task.seen_created) {
      ++flight.tasks_before_window;
      flight.details.push_back(fmt::format("task {} ({}) begins before its thread's window",
                                           model::task_id_text(task.id), task.display_name()));
    }
  }
  for (const auto& [thread_id, accumulator] : totals.threads)
    flight.windows.push_back({thread_id, trace.thread_name(thread_id), clock.ns(totals.last - accumulator.first)});
  // A thread that runs tasks may have resolved one before its window began: its window's start
  // bounds what the trace can say of ends. Threads that run none (chronicle's own) resolve none.
  for (const auto& [thread_id, accumulator] : totals.threads)
    if (accumulator.runs_tasks) flight.latest_window_start = std::max(flight.latest_window_start, accumulator.first);
  std::sort(flight.windows.begin(), flight.windows.end(),
            [](const auto& a, const auto& b) { return a.seconds_ns < b.seconds_ns; });
  return flight;
}

// Whether an unresolved task of a flight recording may have ended outside the windows.
bool cut_by_window(const model::Task& task, const FlightWindows& flight) {
  if (!task.seen_created) return true;
  uint64_t last_seen = task.created.value_or(0);
  for (const model::RunInterval& run : task.runs) last_seen = std::max(last_seen, run.end);
  return last_seen < flight.latest_window_start;
}

Profile build_profile(const reader::Trace& trace, model::TaskGraph* graph_out, const ProgressCallback& progress,
                      model::GraphDetail graph_detail, const ProfileOptions& options) {
  const Clock clock(trace);
  const TimelineClock timeline(trace);
  Profile profile;
  profile.directory = trace.directory();
  profile.hostname = trace.description().hostname;
  profile.process_name = trace.description().process_name;
  profile.pid = trace.description().pid;
  uint64_t expected = 0;
  for (const auto& stream : trace.streams()) {
    profile.bytes += stream.bytes;
    profile.discarded += stream.events_discarded;
  }
  expected = profile.bytes / 6 + 1;

  model::TaskGraphBuilder graph_builder(
      [&trace](uint32_t id) {
        const reader::Site* site = trace.site(id);
        return site ? site->name : std::string();
      },
      graph_out ? graph_detail : model::GraphDetail::summary);
  const bool flight = trace.description().policy == format::BufferPolicy::flight;
  if (flight) graph_builder.expect_windows();
  std::optional<EventTotals> apart;
  // A graph asked for is built from the merge: the threads apart give none.
  if (options.parallel && !graph_out && threads_are_apart(trace))
    apart = follow_threads_apart(trace, timeline, progress, expected, options);
  EventTotals totals;
  if (apart) {
    totals = std::move(*apart);
    profile.read_in_parallel = true;
    profile.read_in_pieces = totals.read_in_pieces;
    // Without task or loop events, all the graph takes of the events is their first and last times.
    if (totals.seen > 0) graph_builder.add_times(totals.first, totals.last);
  } else {
    totals = follow_merged(trace, timeline, graph_builder, progress, expected);
  }
  const uint64_t seen = totals.seen;
  if (progress) progress(seen, seen);
  profile.events = seen;
  if (seen > 0) {
    profile.duration = clock.ns(totals.last - totals.first);
    profile.first_unix_ns = trace.to_unix_ns(totals.first);
  }

  model::TaskGraph graph = graph_builder.finish();
  reader::PairingProblems shown = totals.pairing_problems;
  if (flight) {
    profile.flight = flight_windows(trace, graph, totals, clock);
    shown.unmatched_ends = 0;  // summarised in profile.flight
    // Attributes and statuses of those spans, whose begins the window left out.
    shown.orphan_attributes = 0;
  }
  profile.problems = reader::describe_pairing_problems(trace, shown);
  for (const std::string& problem : graph.problems()) profile.problems.push_back(problem);

  for (const auto& [key, accumulator] : totals.spans) {
    SpanProfile span;
    span.category = key.first;
    span.name = key.second;
    span.duration = distribution_ns(accumulator.durations, accumulator.total);
    span.self = accumulator.self;
    span.running = accumulator.running;
    profile.spans.push_back(std::move(span));
  }
  std::sort(profile.spans.begin(), profile.spans.end(),
            [](const SpanProfile& a, const SpanProfile& b) { return a.self > b.self; });

  std::map<uint32_t, uint64_t> discarded_by_thread;
  for (const auto& stream : trace.streams()) discarded_by_thread[stream.thread_id] += stream.events_discarded;
  for (auto& [thread_id, accumulator] : totals.threads) {
    ThreadProfile thread;
    thread.thread_id = thread_id;
    thread.name = trace.thread_name(thread_id);
    thread.events = accumulator.events;
    thread.busy = accumulator.busy.busy_until(timeline.ns(graph.last_ticks()));
    thread.idle = clock.ns(graph.idle_ticks(thread_id));
    thread.span = clock.ns(accumulator.last - accumulator.first);
    thread.discarded = discarded_by_thread[thread_id];
    profile.threads.push_back(std::move(thread));
  }

  struct KindAccumulator {
    TaskKindProfile profile;
    LogHistogram lifetimes, run_times;
    uint64_t lifetime_total = 0, run_total = 0;
  };
  std::map<std::string, KindAccumulator> kinds;
  for (const auto& task : graph.tasks()) {
    KindAccumulator& kind = kinds[std::string(format::task_kind_name(task.kind))];
    ++kind.profile.count;
    if (!task.resolved) {
      if (profile.flight && cut_by_window(task, *profile.flight)) {
        ++kind.profile.cut_by_window;
        ++profile.flight->tasks_cut;
      } else {
        ++kind.profile.unresolved;
      }
    } else {
      if (task.outcome == format::TaskOutcome::failed) ++kind.profile.failed;
      if (task.outcome == format::TaskOutcome::cancelled) ++kind.profile.cancelled;
      if (task.created && *task.resolved >= *task.created) {
        kind.lifetimes.add(*task.resolved - *task.created);
        kind.lifetime_total += *task.resolved - *task.created;
      }
    }
    const uint64_t busy = task.busy_ticks();
    kind.run_times.add(busy);
    kind.run_total += busy;
  }
  for (auto& [name, kind] : kinds) {
    kind.profile.kind = name;
    kind.profile.lifetime = distribution(kind.lifetimes, kind.lifetime_total, clock);
    kind.profile.run_time = distribution(kind.run_times, kind.run_total, clock);
    profile.task_kinds.push_back(std::move(kind.profile));
  }

  for (const CounterTotals& counter : totals.counters)
    profile.counters.push_back(counter_profile(counter.series, counter.values,
                                               clock.ns(counter.values.last_ticks - counter.values.first_ticks)));
  std::sort(profile.counters.begin(), profile.counters.end(), [](const CounterProfile& a, const CounterProfile& b) {
    return std::tie(a.category, a.name, a.kind) < std::tie(b.category, b.name, b.kind);
  });
  if (graph_out) *graph_out = std::move(graph);
  return profile;
}

}  // namespace

Profile profile_trace(const reader::Trace& trace, model::TaskGraph* graph_out, const ProgressCallback& progress,
                      model::GraphDetail graph_detail) {
  return build_profile(trace, graph_out, progress, graph_detail, ProfileOptions{});
}

Profile profile_trace(const reader::Trace& trace, const ProgressCallback& progress, const ProfileOptions& options) {
  return build_profile(trace, nullptr, progress, model::GraphDetail::full, options);
}

}  // namespace chronicle::analysis
