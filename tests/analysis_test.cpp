// `chronicle stats`: the profile's numbers on traces whose timings we control, and the critical
// path of a coroutine whose waits we know.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <malloc.h>
#include <chronicle/chronicle.hpp>
#include <chronicle/coro.hpp>
#include <chronicle/task.hpp>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <map>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "analysis/critical_path.hpp"
#include "analysis/profile.hpp"
#include "analysis/span_time.hpp"
#include "export/export_common.hpp"
#include "support.hpp"
#include "undrained_session.hpp"

// Heap in use and its peak, for the tests of what `stats` keeps: every operator new and delete
// of this test binary goes through here. Not under a sanitizer, whose own allocator must see
// every new and delete (the variants not replaced here would pair its new with our free).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CHRONICLE_COUNTS_HEAP 0
#else
#define CHRONICLE_COUNTS_HEAP 1
#endif
namespace {
std::atomic<int64_t> g_heap_live{0};
std::atomic<int64_t> g_heap_peak{0};

#if CHRONICLE_COUNTS_HEAP
void* counted_allocation(std::size_t size) {
  void* memory = std::malloc(size ? size : 1);
  if (!memory) throw std::bad_alloc();
  const int64_t live = g_heap_live.fetch_add(static_cast<int64_t>(malloc_usable_size(memory))) +
                       static_cast<int64_t>(malloc_usable_size(memory));
  int64_t peak = g_heap_peak.load();
  while (live > peak && !g_heap_peak.compare_exchange_weak(peak, live)) {
  }
  return memory;
}

void counted_release(void* memory) noexcept {
  if (!memory) return;
  g_heap_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(memory)));
  std::free(memory);
}
}  // namespace

void* operator new(std::size_t size) {
  return counted_allocation(size);
}
void* operator new[](std::size_t size) {
  return counted_allocation(size);
}
void operator delete(void* memory) noexcept {
  counted_release(memory);
}
void operator delete[](void* memory) noexcept {
  counted_release(memory);
}
void operator delete(void* memory, std::size_t) noexcept {
  counted_release(memory);
}
void operator delete[](void* memory, std::size_t) noexcept {
  counted_release(memory);
}
#else
}  // namespace
#endif

namespace chronicle {
namespace {

using namespace std::chrono_literals;
using test::TemporaryDirectory;

const std::string kCli = CHRONICLE_CLI;

using test::test_config;

// Busy-waits: a sleeping thread could be descheduled for longer than asked.
void spin_for(std::chrono::microseconds length) {
  const auto until = std::chrono::steady_clock::now() + length;
  while (std::chrono::steady_clock::now() < until) {
  }
}

void outer_with_two_inner() {
  CHRONICLE_SPAN("profile", "outer");
  spin_for(4000us);
  for (int i = 0; i < 2; ++i) {
    CHRONICLE_SPAN("profile", "inner");
    spin_for(3000us);
  }
}

TEST(Profile, SelfTimeExcludesChildrenAndCountsAreExact) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  for (int i = 0; i < 5; ++i) outer_with_two_inner();
  for (int i = 1; i <= 10; ++i) CHRONICLE_COUNTER("profile", "level", i * 10);
  stop();
  reader::Trace trace(config.output);
  const analysis::Profile profile = analysis::profile_trace(trace);
  EXPECT_EQ(profile.events, 5u * 6 + 10);
  ASSERT_EQ(profile.spans.size(), 2u);
  const auto& inner = profile.spans[0].name == "inner" ? profile.spans[0] : profile.spans[1];
  const auto& outer = profile.spans[0].name == "outer" ? profile.spans[0] : profile.spans[1];
  EXPECT_EQ(inner.duration.count, 10u);
  EXPECT_EQ(outer.duration.count, 5u);
  // Exact relations, not timings (a loaded machine stretches any span): inner has no children,
  // and outer's self time is its total less its children's (up to tick-to-ns rounding).
  EXPECT_EQ(inner.self, inner.duration.total);
  EXPECT_NEAR(static_cast<double>(outer.self), static_cast<double>(outer.duration.total - inner.duration.total), 10.0);
  // Lower bounds the busy-waits guarantee.
  EXPECT_GE(outer.self, 5u * 4'000'000);
  EXPECT_GE(inner.duration.p50, 3'000'000u * 24 / 25) << "within the histogram's 4%";
  EXPECT_GE(inner.duration.max, inner.duration.p99);
  EXPECT_GE(inner.duration.p99, inner.duration.p50);
  ASSERT_EQ(profile.counters.size(), 1u);
  EXPECT_EQ(profile.counters[0].samples, 10u);
  EXPECT_EQ(profile.counters[0].min, 10);
  EXPECT_EQ(profile.counters[0].max, 100);
  EXPECT_EQ(profile.counters[0].last, 100);
  ASSERT_EQ(profile.threads.size(), 1u);
  EXPECT_EQ(profile.threads[0].busy, outer.duration.total) << "busy = inside outermost spans";
  EXPECT_EQ(profile.discarded, 0u);
}

// Each round: a span of the thread's own, then a run of one long-lived task holding a note and
// a span. Events grow with the rounds; names, threads and tasks do not.
void record_rounds(const Config& config, int rounds) {
  ASSERT_TRUE(start(config)) << last_error();
  const TaskId worker = create_task(TaskKind::handler, "worker");
  for (int round = 0; round < rounds; ++round) {
    { CHRONICLE_SPAN("heap", "outside"); }
    TaskRunScope run(worker);
    CHRONICLE_NOTE("heap", "round {}", round);
    CHRONICLE_SPAN("heap", "inside");
  }
  resolve_task(worker, TaskOutcome::ok);
  stop();
}

// Records a trace with `record(config, count)` for a count and ten times it, reads each with
// `read` (which returns the events it read), and expects the larger read's peak heap, over what
// was in use before it, to be the smaller's within noise: the same names, one thread, one task,
// and a few bytes per event would be megabytes here (the reader's own buffers are the noise).
void expect_heap_flat_in_events(const std::function<void(const Config&, int)>& record, int count,
                                const std::function<uint64_t(const std::string&)>& read) {
  TemporaryDirectory small_directory, large_directory;
  Config small = test_config(small_directory), large = test_config(large_directory);
  small.buffer_size = large.buffer_size = size_t{32} << 20;
  record(small, count);
  record(large, 10 * count);
  auto heap_peak = [&read](const std::string& directory, uint64_t& events) {
    const int64_t before = g_heap_live.load();
    g_heap_peak.store(before);
    events = read(directory);
    return g_heap_peak.load() - before;
  };
  uint64_t small_events = 0, large_events = 0;
  const int64_t small_peak = heap_peak(small.output, small_events);
  const int64_t large_peak = heap_peak(large.output, large_events);
  ASSERT_GE(large_events, 9 * small_events);
  EXPECT_LE(large_peak, small_peak + (int64_t{256} << 10)) << "heap peak " << small_peak << " B for " << small_events
                                                           << " events, " << large_peak << " B for " << large_events;
}

TEST(Profile, HeapDoesNotGrowWithEvents) {
  if (!CHRONICLE_COUNTS_HEAP) GTEST_SKIP() << "heap counting replaces operator new, which a sanitizer owns";
  // Ten times the events (spans, runs, notes) of one task's many runs.
  expect_heap_flat_in_events(record_rounds, 10'000, [](const std::string& directory) {
    reader::Trace trace(directory);
    const analysis::Profile profile = analysis::profile_trace(trace);
    EXPECT_EQ(profile.discarded, 0u) << "the comparison needs every round in the trace";
    EXPECT_EQ(profile.task_kinds.size(), 1u);
    return profile.events;
  });
}

// One run of one task holding every span and note: the exports' task graph keeps the task, its
// runs and its edges, not what happened inside the runs. It kept every note and counter of a
// task's runs (no export reads them): `record --otlp-endpoint` of tests/live_spans, 87 MiB of
// trace, peaked at 292 MB of heap, most of it these notes.
void record_one_long_run(const Config& config, int spans) {
  ASSERT_TRUE(start(config)) << last_error();
  const TaskId task = create_task(TaskKind::handler, "long run");
  {
    TaskRunScope run(task);
    for (int i = 0; i < spans; ++i) {
      CHRONICLE_SPAN("heap", "inside");
      CHRONICLE_NOTE("heap", "step {}", i);
    }
  }
  resolve_task(task, TaskOutcome::ok);
  stop();
}

TEST(Export, TaskGraphHeapDoesNotGrowWithEventsInsideARun) {
  if (!CHRONICLE_COUNTS_HEAP) GTEST_SKIP() << "heap counting replaces operator new, which a sanitizer owns";
  expect_heap_flat_in_events(record_one_long_run, 10'000, [](const std::string& directory) {
    reader::Trace trace(directory);
    EXPECT_EQ(trace.events_discarded(), 0u) << "the comparison needs every event in the trace";
    const exports::ExportOptions options;
    exports::ProgressCounter progress(options);
    const model::TaskGraph graph = exports::build_task_graph(trace, progress);
    EXPECT_EQ(graph.tasks().size(), 1u);
    return progress.events();
  });
}

// Busy time is counted as the events come; it must be what the intervals say: the union of the
// thread's outermost spans and the task runs on it, overlaps once.
TEST(Profile, BusyIsTheUnionOfOutermostSpansAndTaskRuns) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  const TaskId task = create_task(TaskKind::handler, "handler");
  {
    CHRONICLE_SPAN("busy", "outer");  // a run inside a span
    spin_for(300us);
    TaskRunScope run(task);
    CHRONICLE_SPAN("busy", "in the task");
    spin_for(300us);
  }
  spin_for(300us);
  {
    TaskRunScope run(task);  // a span inside a run, and a nested run of the same task
    spin_for(300us);
    { CHRONICLE_SPAN("busy", "in the run"); }
    TaskRunScope again(task);
    spin_for(300us);
  }
  spin_for(300us);
  {
    CHRONICLE_SPAN("busy", "alone");
    spin_for(300us);
  }
  resolve_task(task, TaskOutcome::ok);
  stop();

  reader::Trace trace(config.output);
  std::vector<std::pair<uint64_t, uint64_t>> intervals;
  trace.for_each_event([&](const reader::Event& event) {
    if (event.type == format::EventId::span_end && event.span && event.span->task == 0 &&
        event.span->parent_sequence == 0)
      intervals.emplace_back(event.span->begin, event.span->end);
    return true;
  });
  const model::TaskGraph graph = model::build_task_graph(trace);
  for (const auto& run : graph.find(task)->runs) intervals.emplace_back(run.begin, run.end);
  std::sort(intervals.begin(), intervals.end());
  // The union's stretches, each in ns on the trace's timeline (analysis/span_time.hpp: a
  // duration is the difference of its ends' times, as the viewer's range stats count busy time).
  // This took the union's ticks to ns in one step before, which the viewer could never match.
  const analysis::TimelineClock clock(trace);
  uint64_t union_ns = 0;
  std::optional<std::pair<uint64_t, uint64_t>> stretch;
  for (const auto& [begin, end] : intervals) {
    if (stretch && begin <= stretch->second) {
      stretch->second = std::max(stretch->second, end);
      continue;
    }
    if (stretch) union_ns += clock.ns(stretch->second) - clock.ns(stretch->first);
    stretch = {begin, end};
  }
  if (stretch) union_ns += clock.ns(stretch->second) - clock.ns(stretch->first);
  const analysis::Profile profile = analysis::profile_trace(trace);
  ASSERT_EQ(profile.threads.size(), 1u);
  EXPECT_EQ(profile.threads[0].busy, union_ns);
  EXPECT_GE(profile.threads[0].busy, 4 * 300'000u);
}

TEST(Profile, LostEventsAreCountedPerThread) {
  TemporaryDirectory directory;
  const reader::Trace trace = test::record_with_no_collector(directory, [] {
    for (int i = 0; i < 100'000; ++i) CHRONICLE_INSTANT("profile", "flood");
  });
  const auto profile = analysis::profile_trace(trace);
  EXPECT_GT(profile.discarded, 0u);
  EXPECT_EQ(profile.events + profile.discarded, 100'000u);
  EXPECT_EQ(profile.threads.at(0).discarded, profile.discarded);
}

// --- critical path ----------------------------------------------------------------------------

task<int> slow_step(thread_pool& pool, std::chrono::microseconds length) {
  co_await pool.schedule();
  spin_for(length);
  co_return 1;
}

task<int> request(thread_pool& pool) {
  int done = co_await slow_step(pool, 30'000us).named("first step");
  spin_for(2000us);
  done += co_await slow_step(pool, 50'000us).named("second step");
  co_return done;
}

// Whether [from, to] lies within the task's runs.
bool inside_runs(const model::Task& task, uint64_t from, uint64_t to) {
  for (const model::RunInterval& run : task.runs) {
    if (run.begin > from) return false;
    if (run.end >= from) from = std::max(from, run.end);
    if (from >= to) return true;
  }
  return from >= to;
}

// Whether a step said `ran` only for time in the task's runs, or for its resolution's tail: from
// the end of its last run there to its resolution (the rule of critical_path.hpp).
bool ran_only_in_runs(const model::Task& task, const analysis::CriticalStep& step) {
  if (step.state != analysis::StepState::ran || task.runs.empty()) return true;
  uint64_t to = step.to;
  if (task.resolved == step.to)
    for (const model::RunInterval& run : task.runs)
      if (run.end > step.from && run.end <= step.to) to = run.end;
  return inside_runs(task, step.from, to);
}

TEST(CriticalPath, FollowsTheWaitsThatDecidedWhenTheTaskFinished) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  {
    thread_pool pool(2, "pool");
    EXPECT_EQ(sync_wait(request(pool).named("request")), 2);
  }
  stop();
  reader::Trace trace(config.output);
  model::TaskGraph graph;
  analysis::profile_trace(trace, &graph);
  const model::TaskId target = analysis::find_task(graph, "request");
  const analysis::CriticalPath path = analysis::critical_path(graph, target);
  // request ran, waited for "first step", ran, waited for "second step", ran to its end; each
  // step waited in the pool's queue for its hop (thread_pool.schedule) before it ran.
  std::vector<std::string> names;
  for (const auto& step : path.steps) names.push_back(graph.find(step.task)->display_name());
  const std::vector<std::string> expected_order = {"request", "first step",  "thread_pool.schedule", "first step",
                                                   "request", "second step", "thread_pool.schedule", "second step",
                                                   "request"};
  std::vector<std::string> collapsed;
  for (const auto& name : names)
    if (collapsed.empty() || collapsed.back() != name) collapsed.push_back(name);
  EXPECT_EQ(collapsed, expected_order);
  const double frequency = static_cast<double>(trace.description().clock.frequency_hz);
  auto milliseconds = [frequency](uint64_t ticks) { return static_cast<double>(ticks) / frequency * 1e3; };
  double first = 0, second = 0, total = 0;
  for (const auto& step : path.steps) {
    const double length = milliseconds(step.to - step.from);
    total += length;
    const std::string& name = graph.find(step.task)->display_name();
    if (name == "first step") first += length;
    if (name == "second step") second += length;
    if (step.what.find("ran after") != std::string::npos) {
      EXPECT_NE(step.what.find("finished"), std::string::npos);
    }
    EXPECT_TRUE(ran_only_in_runs(*graph.find(step.task), step))
        << "'" << step.what << "' [" << step.from << ", " << step.to << "] of " << step.task_name;
  }
  // Lower bounds (the steps busy-wait that long); upper bounds would depend on the machine's load.
  EXPECT_GE(first, 30.0);
  EXPECT_GE(second, 50.0);
  EXPECT_NEAR(total, milliseconds(path.end - path.start), 1e-6) << "the steps add up to the chain";
  EXPECT_EQ(path.end, *graph.find(target)->resolved);
}

// --- sync_wait: a blocked thread waits on the task it drives -----------------------------------

// Hops to the pool, so it runs on another thread while its waiter's thread is blocked.
task<int> blocked_on(thread_pool& pool) {
  co_await pool.schedule();
  CHRONICLE_SPAN("test", "leaf work");
  spin_for(5000us);
  co_return 7;
}

// A task that blocks its (pool) thread in sync_wait rather than awaiting.
task<int> blocking_waiter(thread_pool& pool) {
  co_await pool.schedule();
  const int value = sync_wait(blocked_on(pool).named("leaf"));
  co_return value + 1;
}

// The tasks of a critical path's steps, in order, consecutive repeats collapsed.
std::vector<std::string> path_names(const model::TaskGraph& graph, const analysis::CriticalPath& path) {
  std::vector<std::string> names;
  for (const auto& step : path.steps) {
    const std::string& name = graph.find(step.task)->display_name();
    if (names.empty() || names.back() != name) names.push_back(name);
  }
  return names;
}

const model::Task* only_task_named(const model::TaskGraph& graph, const std::string& name) {
  const model::Task* found = nullptr;
  for (const auto& task : graph.tasks()) {
    if (task.display_name() != name) continue;
    EXPECT_EQ(found, nullptr) << "two tasks named " << name;
    found = &task;
  }
  return found;
}

TEST(SyncWait, ATaskBlockedInSyncWaitWaitsOnTheAwaitedTask) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  {
    thread_pool pool(2, "pool");  // two: the waiter blocks one thread, the leaf runs on the other
    EXPECT_EQ(sync_wait(blocking_waiter(pool).named("waiter")), 8);
  }
  stop();
  reader::Trace trace(config.output);
  model::TaskGraph graph;
  analysis::profile_trace(trace, &graph);
  EXPECT_TRUE(graph.problems().empty()) << graph.problems().front();
  const model::Task* waiter = only_task_named(graph, "waiter");
  const model::Task* leaf = only_task_named(graph, "leaf");
  ASSERT_TRUE(waiter && leaf);
  EXPECT_EQ(leaf->parent, waiter->id);
  // The waiter waits on its hop to the pool (thread_pool.schedule), then on the leaf.
  ASSERT_EQ(waiter->waits_on.size(), 2u);
  EXPECT_EQ(graph.find(waiter->waits_on[0])->name, "thread_pool.schedule");
  EXPECT_EQ(waiter->waits_on[1], leaf->id);
  size_t wait_edges = 0;
  for (const auto& edge : graph.edges())
    wait_edges += edge.kind == model::EdgeKind::waits_on && edge.from == waiter->id && edge.to == leaf->id;
  EXPECT_EQ(wait_edges, 1u);
  ASSERT_EQ(leaf->notes.size(), 2u) << "the span's begin and end, both the leaf's";
  EXPECT_EQ(leaf->notes[0].text, "leaf work");
  EXPECT_EQ(leaf->notes[0].type, format::EventId::span_begin);
  EXPECT_EQ(leaf->notes[1].text, "leaf work");
  EXPECT_EQ(leaf->notes[1].type, format::EventId::span_end);

  // The waiter's path goes through the leaf's run: it did not "run" while it was blocked.
  const analysis::CriticalPath path = analysis::critical_path(graph, waiter->id);
  EXPECT_EQ(path_names(graph, path), (std::vector<std::string>{"waiter", "thread_pool.schedule", "waiter", "leaf",
                                                               "thread_pool.schedule", "leaf", "waiter"}));
  bool leaf_ran = false;
  for (const auto& step : path.steps) {
    if (step.task == leaf->id && step.what == "ran") leaf_ran = true;
    EXPECT_TRUE(ran_only_in_runs(*graph.find(step.task), step)) << "'" << step.what << "' of " << step.task_name;
    if (step.task == waiter->id && step.from < *leaf->resolved && step.to > *leaf->resolved)
      ADD_FAILURE() << "the waiter's step '" << step.what << "' covers the leaf's end";
  }
  EXPECT_TRUE(leaf_ran);
  EXPECT_EQ(path.end, *waiter->resolved);
}

TEST(SyncWait, AThreadOutsideAnyTaskWaitsThroughATaskForTheCall) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  {
    thread_pool pool(1, "pool");
    EXPECT_EQ(sync_wait(blocked_on(pool).named("leaf")), 7);
  }
  EXPECT_EQ(current_task(), 0u) << "the call's task is the current task only during the call";
  stop();
  reader::Trace trace(config.output);
  model::TaskGraph graph;
  analysis::profile_trace(trace, &graph);
  EXPECT_TRUE(graph.problems().empty()) << graph.problems().front();
  const model::Task* leaf = only_task_named(graph, "leaf");
  const model::Task* call = only_task_named(graph, "sync_wait");
  ASSERT_TRUE(leaf && call);
  EXPECT_EQ(graph.tasks().size(), 3u);  // and the leaf's hop to the pool, thread_pool.schedule
  EXPECT_EQ(call->waits_on, std::vector<model::TaskId>{leaf->id});
  ASSERT_TRUE(call->resolved && leaf->resolved);
  EXPECT_EQ(call->outcome, format::TaskOutcome::ok);
  EXPECT_GE(*call->resolved, *leaf->resolved);
  ASSERT_EQ(call->runs.size(), 1u) << "the call holds its thread from its start to its end";
  EXPECT_EQ(call->runs[0].thread_id, leaf->runs.front().thread_id) << "the leaf starts on the calling thread";

  const analysis::CriticalPath path = analysis::critical_path(graph, call->id);
  EXPECT_EQ(path_names(graph, path), (std::vector<std::string>{"leaf", "thread_pool.schedule", "leaf", "sync_wait"}));
  ASSERT_FALSE(path.steps.empty());
  EXPECT_EQ(path.steps.back().what, "ran after " + model::task_id_text(leaf->id) + " finished");
}

task<int> failing_leaf() {
  throw std::runtime_error("no disk");
  co_return 0;
}

TEST(SyncWait, TheCallsTaskFailsWithTheAwaitedTask) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  EXPECT_THROW(sync_wait(failing_leaf()), std::runtime_error);
  stop();
  reader::Trace trace(config.output);
  const model::TaskGraph graph = model::build_task_graph(trace);
  EXPECT_TRUE(graph.problems().empty()) << graph.problems().front();
  const model::Task* call = only_task_named(graph, "sync_wait");
  ASSERT_TRUE(call && call->resolved);
  EXPECT_EQ(call->outcome, format::TaskOutcome::failed);
  EXPECT_EQ(call->outcome_text, "no disk");
  ASSERT_EQ(call->waits_on.size(), 1u);
  EXPECT_EQ(graph.find(call->waits_on[0])->outcome_text, "no disk");
}

TEST(CriticalPath, EndsOnCyclesAndUnknownTasks) {
  model::TaskGraphBuilder builder([](uint32_t) { return std::string("x"); });
  auto event = [](format::EventId type, uint64_t ticks, uint64_t task, uint64_t related) {
    reader::Event e;
    e.type = type;
    e.ticks = ticks;
    e.thread_id = 1;
    e.task = task;
    e.related_task = related;
    return e;
  };
  builder.add(event(format::EventId::task_create, 1, 1, 0));
  builder.add(event(format::EventId::task_create, 2, 2, 1));
  builder.add(event(format::EventId::task_wait, 3, 1, 2));
  builder.add(event(format::EventId::task_wait, 4, 2, 1));
  builder.add(event(format::EventId::task_wait, 5, 1, 99));
  const model::TaskGraph graph = builder.finish();
  const auto path = analysis::critical_path(graph, 1);
  EXPECT_LE(path.steps.size(), 20u);
  EXPECT_THROW(analysis::find_task(graph, "nothing"), std::invalid_argument);
}

// A root task that creates and awaits its children one after another, as a loop of co_awaits
// does: its path goes back through every child, and through the root's waits between them.
model::TaskGraph root_awaiting_children_in_turn(uint64_t children) {
  model::TaskGraphBuilder builder([](uint32_t) { return std::string("step"); });
  auto add = [&builder](format::EventId type, uint64_t ticks, uint64_t task, uint64_t related) {
    reader::Event e;
    e.type = type;
    e.ticks = ticks;
    e.thread_id = 1;
    e.task = task;
    e.related_task = related;
    builder.add(e);
  };
  using format::EventId;
  constexpr uint64_t kRoot = 1;
  add(EventId::task_create, 0, kRoot, 0);
  add(EventId::task_run_begin, 1, kRoot, 0);
  for (uint64_t k = 0; k < children; ++k) {
    const uint64_t child = k + 2, base = 10 + 10 * k;
    add(EventId::task_create, base, child, kRoot);
    add(EventId::task_wait, base + 1, kRoot, child);
    add(EventId::task_run_end, base + 2, kRoot, 0);
    add(EventId::task_run_begin, base + 3, child, 0);
    add(EventId::task_run_end, base + 6, child, 0);
    add(EventId::task_resolve, base + 7, child, 0);
    add(EventId::task_run_begin, base + 8, kRoot, 0);
  }
  const uint64_t end = 10 + 10 * children;
  add(EventId::task_run_end, end, kRoot, 0);
  add(EventId::task_resolve, end + 1, kRoot, 0);
  return builder.finish();
}

TEST(CriticalPath, ALongChainIsWalkedWhole) {
  // Long enough that a walk scanning a task's waits (or runs) at each visit would not end in
  // any reasonable time; a linear one takes a fraction of a second.
  constexpr uint64_t kChildren = 200'000;
  const model::TaskGraph graph = root_awaiting_children_in_turn(kChildren);
  ASSERT_TRUE(graph.problems().empty()) << graph.problems().front();
  const analysis::CriticalPath path = analysis::critical_path(graph, 1);
  // Per child: the root queued after it finished, the root ran; the child queued since its
  // creation, the child ran (its resolution, recorded just after its run ended, counts to that
  // run: no piece of its own); then the root's start: queued, ran.
  ASSERT_EQ(path.steps.size(), 4 * kChildren + 2);
  EXPECT_EQ(path.start, 0u);
  EXPECT_EQ(path.end, 10 + 10 * kChildren + 1);
  uint64_t covered = 0;
  for (size_t k = 0; k < path.steps.size(); ++k) {
    covered += path.steps[k].to - path.steps[k].from;
    if (k > 0) {
      ASSERT_EQ(path.steps[k].from, path.steps[k - 1].to) << "steps are contiguous, at " << k;
    }
  }
  EXPECT_EQ(covered, path.end - path.start);
  const uint64_t last_base = 10 + 10 * (kChildren - 1);
  const analysis::CriticalStep& last_child_ran = path.steps[path.steps.size() - 3];
  EXPECT_EQ(last_child_ran.task, kChildren + 1);
  EXPECT_EQ(last_child_ran.what, "ran");
  EXPECT_EQ(last_child_ran.state, analysis::StepState::ran);
  EXPECT_EQ(last_child_ran.from, last_base + 3);
  EXPECT_EQ(last_child_ran.to, last_base + 7);
  const analysis::CriticalStep& root_queued = path.steps[path.steps.size() - 2];
  EXPECT_EQ(root_queued.state, analysis::StepState::queued);
  EXPECT_EQ(root_queued.from, last_base + 7);
  EXPECT_EQ(root_queued.to, last_base + 8);
  EXPECT_EQ(path.steps.back().what, fmt::format("ran after {} finished", model::task_id_text(kChildren + 1)));
  EXPECT_EQ(path.steps.back().state, analysis::StepState::ran);
}

// A root that awaits a child, which finishes at 10 while the root's thread is busy: the root is
// resumed then but runs only from 30. Its path must say it was queued for exactly [10, 30] and ran
// for exactly its run [30, 40], and never call time outside a run "ran".
model::TaskGraph root_queued_after_its_child() {
  model::TaskGraphBuilder builder([](uint32_t) { return std::string("step"); });
  auto add = [&builder](format::EventId type, uint64_t ticks, uint64_t task, uint64_t related) {
    reader::Event e;
    e.type = type;
    e.ticks = ticks;
    e.thread_id = 1;
    e.task = task;
    e.related_task = related;
    builder.add(e);
  };
  using format::EventId;
  add(EventId::task_create, 0, 1, 0);
  add(EventId::task_run_begin, 1, 1, 0);
  add(EventId::task_create, 2, 2, 1);
  add(EventId::task_wait, 3, 1, 2);
  add(EventId::task_run_end, 4, 1, 0);
  add(EventId::task_run_begin, 6, 2, 0);
  add(EventId::task_run_end, 10, 2, 0);
  add(EventId::task_resolve, 10, 2, 0);
  add(EventId::task_run_begin, 30, 1, 0);
  add(EventId::task_run_end, 40, 1, 0);
  add(EventId::task_resolve, 40, 1, 0);
  return builder.finish();
}

TEST(CriticalPath, ATaskQueuedAfterItsAwaitedTaskFinishedIsQueuedNotRunning) {
  const model::TaskGraph graph = root_queued_after_its_child();
  ASSERT_TRUE(graph.problems().empty()) << graph.problems().front();
  const analysis::CriticalPath path = analysis::critical_path(graph, 1);
  for (const analysis::CriticalStep& step : path.steps) {
    if (step.state == analysis::StepState::ran) {
      EXPECT_TRUE(inside_runs(*graph.find(step.task), step.from, step.to))
          << "'" << step.what << "' for [" << step.from << ", " << step.to << "] of " << step.task_name
          << ", outside its runs";
    }
  }
  // Back from the root's end: it ran [30, 40] and was queued [10, 30] after its child finished;
  // the child ran [6, 10], queued from its creation at 2; the root ran [1, 2], queued [0, 1].
  using analysis::StepState;
  const std::string child = model::task_id_text(2);
  const std::vector<std::tuple<model::TaskId, StepState, std::string, uint64_t, uint64_t>> expected = {
      {1, StepState::queued, "queued since creation", 0, 1},
      {1, StepState::ran, "ran", 1, 2},
      {2, StepState::queued, "queued since creation", 2, 6},
      {2, StepState::ran, "ran", 6, 10},
      {1, StepState::queued, "queued after " + child + " finished", 10, 30},
      {1, StepState::ran, "ran after " + child + " finished", 30, 40},
  };
  std::vector<std::tuple<model::TaskId, StepState, std::string, uint64_t, uint64_t>> steps;
  for (const analysis::CriticalStep& step : path.steps)
    steps.emplace_back(step.task, step.state, step.what, step.from, step.to);
  EXPECT_EQ(steps, expected);
}

// A root that waits on three children at once (a when_all: three waits recorded in a row); the
// middle one finishes last. What decided when the root could go on is that child, whichever wait
// was recorded last.
model::TaskGraph root_waiting_on_all_of_three() {
  model::TaskGraphBuilder builder([](uint32_t) { return std::string("step"); });
  auto add = [&builder](format::EventId type, uint64_t ticks, uint64_t task, uint64_t related) {
    reader::Event e;
    e.type = type;
    e.ticks = ticks;
    e.thread_id = 1;
    e.task = task;
    e.related_task = related;
    builder.add(e);
  };
  using format::EventId;
  add(EventId::task_create, 0, 1, 0);
  add(EventId::task_run_begin, 1, 1, 0);
  for (uint64_t child : {2, 3, 4}) add(EventId::task_create, 2, child, 1);
  for (uint64_t child : {2, 3, 4}) add(EventId::task_wait, 1 + child, 1, child);  // at 3, 4, 5
  add(EventId::task_run_end, 6, 1, 0);
  add(EventId::task_run_begin, 7, 2, 0);
  add(EventId::task_run_end, 9, 2, 0);
  add(EventId::task_resolve, 9, 2, 0);
  add(EventId::task_run_begin, 9, 4, 0);
  add(EventId::task_run_end, 12, 4, 0);
  add(EventId::task_resolve, 12, 4, 0);
  add(EventId::task_run_begin, 12, 3, 0);
  add(EventId::task_run_end, 20, 3, 0);
  add(EventId::task_resolve, 20, 3, 0);
  add(EventId::task_run_begin, 25, 1, 0);
  add(EventId::task_run_end, 30, 1, 0);
  add(EventId::task_resolve, 30, 1, 0);
  return builder.finish();
}

TEST(CriticalPath, AWaitOnAllGoesThroughTheTaskThatFinishedLast) {
  const model::TaskGraph graph = root_waiting_on_all_of_three();
  ASSERT_TRUE(graph.problems().empty()) << graph.problems().front();
  const analysis::CriticalPath path = analysis::critical_path(graph, 1);
  using analysis::StepState;
  const std::string last = model::task_id_text(3);
  const std::vector<std::tuple<model::TaskId, StepState, std::string, uint64_t, uint64_t>> expected = {
      {1, StepState::queued, "queued since creation", 0, 1},
      {1, StepState::ran, "ran", 1, 2},
      {3, StepState::queued, "queued since creation", 2, 12},
      {3, StepState::ran, "ran", 12, 20},
      {1, StepState::queued, "queued after " + last + " finished", 20, 25},
      {1, StepState::ran, "ran after " + last + " finished", 25, 30},
  };
  std::vector<std::tuple<model::TaskId, StepState, std::string, uint64_t, uint64_t>> steps;
  for (const analysis::CriticalStep& step : path.steps)
    steps.emplace_back(step.task, step.state, step.what, step.from, step.to);
  EXPECT_EQ(steps, expected);
}

// --- the command ------------------------------------------------------------------------------

TEST(StatsCommand, JsonAndTextAgreeWithTheTrace) {
  TemporaryDirectory directory;
  ASSERT_EQ(test::run(kCli + " record -q -o " + (directory / "trace") + " -- " + ECHO_EXAMPLE + " 3 20").exit_code, 0);
  auto result = test::run(kCli + " stats --json " + (directory / "trace"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto stats = nlohmann::json::parse(result.out);
  reader::Trace trace(directory / "trace");
  EXPECT_EQ(stats["events"].get<size_t>(), test::read_all(trace).size());
  EXPECT_EQ(stats["discarded"].get<uint64_t>(), 0u);
  ASSERT_FALSE(stats["task_kinds"].empty());
  uint64_t tasks = 0;
  for (const auto& kind : stats["task_kinds"]) tasks += kind["count"].get<uint64_t>();
  EXPECT_EQ(tasks, model::build_task_graph(trace).tasks().size());

  result = test::run(kCli + " stats " + (directory / "trace"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("Tasks by kind:"), std::string::npos);
  EXPECT_NE(result.out.find("echo/bytes echoed"), std::string::npos);

  result = test::run(kCli + " stats --critical-path 'accept connection 3' " + (directory / "trace"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("Critical path of"), std::string::npos);
  EXPECT_NE(result.out.find("accept connection 2"), std::string::npos) << "created by the previous accept";

  result = test::run(kCli + " stats --critical-path no-such-task " + (directory / "trace"));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("no-such-task"), std::string::npos);
}

// A hop to a pool: `stats --critical-path` shows the time in the pool's queue as the hop's task,
// queued, and no step "suspended between runs" (on main: the hop recorded nothing, and its time
// was "waiting  suspended between runs (no wait recorded)").
TEST(StatsCommand, CriticalPathShowsAPoolHopAsQueued) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  {
    thread_pool pool(1, "pool");
    EXPECT_EQ(sync_wait(slow_step(pool, 100us).named("hopper")), 1);
  }
  stop();
  const auto result = test::run(kCli + " stats --critical-path hopper " + config.output);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  size_t hop_lines = 0;
  std::istringstream lines(result.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("thread_pool.schedule") == std::string::npos) continue;
    ++hop_lines;
    EXPECT_NE(line.find("queued  queued since creation"), std::string::npos) << line;
  }
  EXPECT_EQ(hop_lines, 1u) << result.out;
  EXPECT_EQ(result.out.find("suspended between runs"), std::string::npos) << result.out;
}

// A name many tasks share: every match is listed, and the one analysed is named with the rule
// that chose it; --json output stays one JSON document (the list goes to standard error).
TEST(StatsCommand, CriticalPathOfASharedNameListsTheMatchesAndSaysWhichItTakes) {
  TemporaryDirectory directory;
  ASSERT_EQ(test::run(kCli + " record -q -o " + (directory / "trace") + " -- " + ECHO_EXAMPLE + " 3 20").exit_code, 0);
  reader::Trace trace(directory / "trace");
  const model::TaskGraph graph = model::build_task_graph(trace);
  std::map<std::string, std::vector<model::TaskId>> by_name;
  std::set<std::string> labels;
  for (const auto& task : graph.tasks()) {
    by_name[task.name].push_back(task.id);
    labels.insert(task.label);
  }
  std::string shared;
  for (const auto& [name, ids] : by_name)
    if (!name.empty() && ids.size() > 1 && ids.size() <= 20 && !labels.count(name)) shared = name;
  ASSERT_FALSE(shared.empty()) << "the echo trace has no name shared by a few tasks";

  auto result = test::run(kCli + " stats --critical-path '" + shared + "' " + (directory / "trace"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find(std::to_string(by_name[shared].size()) + " tasks match"), std::string::npos) << result.err;
  for (const model::TaskId id : by_name[shared])
    EXPECT_NE(result.err.find(model::task_id_text(id) + " "), std::string::npos) << result.err;
  const size_t taken_at = result.err.find("taking the longest, ");
  ASSERT_NE(taken_at, std::string::npos) << result.err;
  const std::string taken =
      result.err.substr(taken_at + 20, result.err.find_first_of(" :\n", taken_at + 20) - taken_at - 20);
  EXPECT_TRUE(result.out.starts_with("Critical path of " + taken + " ")) << taken << "\n" << result.out;

  EXPECT_NE(result.out.find(" STATE   WHAT"), std::string::npos) << result.out;

  result = test::run(kCli + " stats --json --critical-path '" + shared + "' " + (directory / "trace"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json path = nlohmann::json::parse(result.out);
  EXPECT_EQ(path["task"], taken);
  const std::set<std::string> states = {"ran", "queued", "waiting", "blocked"};
  for (const auto& step : path["steps"]) EXPECT_TRUE(states.count(step.value("state", ""))) << step.dump();
}

}  // namespace
}  // namespace chronicle
