// The task layer end to end: what task<T>, the task API and the pool record, read back as
// events and as the task graph; and the graph builder on input that makes no sense.
#include <gtest/gtest.h>

#include <algorithm>
#include <chronicle/chronicle.hpp>
#include <chronicle/coro.hpp>
#include <chronicle/task.hpp>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "model/task_graph.hpp"
#include "reader/task_id_index.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using format::EventId;
using model::EdgeKind;
using test::TemporaryDirectory;

using test::test_config;

// Only the task layer's events and notes: what these tests look at.
std::vector<reader::Event> task_events(const reader::Trace& trace) {
  std::vector<reader::Event> out;
  for (const auto& event : test::read_all(trace))
    if ((event.type >= EventId::task_create && event.type <= EventId::task_label) || event.type == EventId::note)
      out.push_back(event);
  return out;
}

// --- a chain of coroutines --------------------------------------------------------------------

task<int> chain_c() {
  CHRONICLE_NOTE("test", "c starts");
  throw std::runtime_error("disk on fire");
  co_return 0;
}

task<int> chain_b() {
  co_return co_await chain_c() + 1;
}

task<int> chain_a() {
  try {
    co_return co_await chain_b();
  } catch (const std::exception& error) {
    CHRONICLE_NOTE("test", "a caught {}", error.what());
  }
  co_return -1;
}

struct Expected {
  EventId type;
  int task;     // 1: a, 2: b, 3: c, 4: the sync_wait call's own task, 0: none
  int related;  // parent, awaited or resolver
};

// The ids of a chain's tasks as Expected numbers them, learnt from the creations in order: the
// outermost coroutine (made by the call), the sync_wait call's own task (the test's thread runs no
// task), the middle one, the innermost. Empty unless there are exactly those four.
std::vector<uint64_t> chain_ids(const std::vector<reader::Event>& events) {
  std::vector<uint64_t> created;
  for (const auto& event : events)
    if (event.type == EventId::task_create) created.push_back(event.task);
  if (created.size() != 4) return {};
  return {0, created[0], created[2], created[3], created[1]};
}

TEST(Coroutines, AChainThatFailsGivesExactlyTheExpectedEventsAndGraph) {
  TemporaryDirectory directory;
  const Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  EXPECT_EQ(sync_wait(chain_a()), -1);
  stop();

  reader::Trace trace(config.output);
  const auto events = task_events(trace);
  // 1: a (made by the call chain_a()), 2: b, 3: c, 4: the sync_wait call's own task.
  const std::vector<uint64_t> ids = chain_ids(events);
  ASSERT_EQ(ids.size(), 5u) << "four tasks created";
  // The call's task begins to run and waits on a, which starts, at one instant; it ends when a
  // has ended.
  const Expected expected[] = {
      {EventId::task_create, 1, 0},    {EventId::task_create, 4, 0},    {EventId::task_run_begin, 4, 0},
      {EventId::task_wait, 4, 1},      {EventId::task_run_begin, 1, 0}, {EventId::task_create, 2, 1},
      {EventId::task_wait, 1, 2},      {EventId::task_run_end, 1, 0},   {EventId::task_run_begin, 2, 0},
      {EventId::task_create, 3, 2},    {EventId::task_wait, 2, 3},      {EventId::task_run_end, 2, 0},
      {EventId::task_run_begin, 3, 0}, {EventId::note, 3, 0},           {EventId::task_resolve, 3, 3},
      {EventId::task_run_end, 3, 0},   {EventId::task_run_begin, 2, 0}, {EventId::task_resolve, 2, 2},
      {EventId::task_run_end, 2, 0},   {EventId::task_run_begin, 1, 0}, {EventId::note, 1, 0},
      {EventId::task_resolve, 1, 1},   {EventId::task_run_end, 1, 0},   {EventId::task_resolve, 4, 4},
      {EventId::task_run_end, 4, 0},
  };
  ASSERT_EQ(events.size(), std::size(expected));
  for (size_t i = 0; i < events.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(events[i].type, expected[i].type);
    if (expected[i].type == EventId::note) continue;
    EXPECT_EQ(events[i].task, ids[expected[i].task]);
    EXPECT_EQ(events[i].related_task, ids[expected[i].related]);
    EXPECT_EQ(events[i].thread_id, events[0].thread_id);
  }
  EXPECT_EQ(events[0].task_kind, format::TaskKind::coroutine);
  EXPECT_EQ(trace.site(events[0].name_id)->name, "chronicle::chain_a");
  EXPECT_EQ(trace.site(events[1].name_id)->name, "sync_wait");
  EXPECT_EQ(events[1].task_kind, format::TaskKind::handler);
  EXPECT_EQ(trace.site(events[5].name_id)->name, "chronicle::chain_b");
  EXPECT_EQ(trace.site(events[9].name_id)->name, "chronicle::chain_c");
  EXPECT_TRUE(trace.site(events[0].name_id)->file.ends_with("task_test.cpp"));
  EXPECT_EQ(events[3].ticks, events[4].ticks) << "the wait and a's start share one clock read";
  EXPECT_EQ(events[13].text, "c starts");
  EXPECT_EQ(events[14].outcome, format::TaskOutcome::failed);
  EXPECT_EQ(events[14].text, "disk on fire");
  EXPECT_EQ(events[17].outcome, format::TaskOutcome::failed);
  EXPECT_EQ(events[17].text, "disk on fire");
  EXPECT_EQ(events[20].text, "a caught disk on fire");
  EXPECT_EQ(events[21].outcome, format::TaskOutcome::ok);
  EXPECT_EQ(events[21].text, "");
  EXPECT_EQ(events[23].outcome, format::TaskOutcome::ok);

  // The graph, edge by edge.
  const model::TaskGraph graph = model::build_task_graph(trace);
  EXPECT_TRUE(graph.problems().empty()) << graph.problems().front();
  ASSERT_EQ(graph.tasks().size(), 4u);
  const std::vector<model::Edge>& edges = graph.edges();
  ASSERT_EQ(edges.size(), 5u);
  auto expect_edge = [&](size_t index, EdgeKind kind, int from, int to) {
    SCOPED_TRACE("edge " + std::to_string(index));
    EXPECT_EQ(edges[index].kind, kind);
    EXPECT_EQ(edges[index].from, ids[from]);
    EXPECT_EQ(edges[index].to, ids[to]);
  };
  expect_edge(0, EdgeKind::waits_on, 4, 1);
  expect_edge(1, EdgeKind::created_by, 2, 1);
  expect_edge(2, EdgeKind::waits_on, 1, 2);
  expect_edge(3, EdgeKind::created_by, 3, 2);
  expect_edge(4, EdgeKind::waits_on, 2, 3);

  const model::Task& a = *graph.find(ids[1]);
  const model::Task& b = *graph.find(ids[2]);
  const model::Task& c = *graph.find(ids[3]);
  const model::Task& call = *graph.find(ids[4]);
  EXPECT_EQ(call.name, "sync_wait");
  EXPECT_EQ(call.parent, 0u);
  EXPECT_EQ(call.waits_on, std::vector<uint64_t>{a.id});
  EXPECT_EQ(call.outcome, format::TaskOutcome::ok);
  ASSERT_EQ(call.runs.size(), 1u);
  EXPECT_LE(call.runs[0].begin, a.runs.front().begin) << "the call holds the thread while a runs in it";
  EXPECT_GE(call.runs[0].end, a.runs.back().end);
  EXPECT_TRUE(call.notes.empty());
  EXPECT_EQ(a.name, "chronicle::chain_a");
  EXPECT_EQ(a.kind, format::TaskKind::coroutine);
  EXPECT_EQ(a.parent, 0u);
  EXPECT_EQ(b.parent, a.id);
  EXPECT_EQ(c.parent, b.id);
  EXPECT_EQ(a.waits_on, std::vector<uint64_t>{b.id});
  EXPECT_EQ(b.waits_on, std::vector<uint64_t>{c.id});
  EXPECT_EQ(a.outcome, format::TaskOutcome::ok);
  EXPECT_EQ(b.outcome, format::TaskOutcome::failed);
  EXPECT_EQ(b.outcome_text, "disk on fire");
  EXPECT_EQ(c.outcome, format::TaskOutcome::failed);
  EXPECT_EQ(c.resolver, c.id);
  EXPECT_EQ(a.runs.size(), 2u);
  EXPECT_EQ(b.runs.size(), 2u);
  EXPECT_EQ(c.runs.size(), 1u);
  for (const auto* task : {&a, &b, &c}) {
    ASSERT_TRUE(task->created && task->resolved);
    for (const auto& run : task->runs) EXPECT_TRUE(run.ended);
    EXPECT_LE(*task->created, task->runs.front().begin);
    EXPECT_LE(*task->resolved, task->runs.back().end);
  }
  // b's two runs frame c's; a's second run follows b's last.
  EXPECT_LE(b.runs[0].end, c.runs[0].begin);
  EXPECT_LE(c.runs[0].end, b.runs[1].begin);
  EXPECT_LE(b.runs[1].end, a.runs[1].begin);
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_EQ(c.notes[0].text, "c starts");
  ASSERT_EQ(a.notes.size(), 1u);
  EXPECT_EQ(a.notes[0].text, "a caught disk on fire");
  EXPECT_TRUE(b.notes.empty());
}

task<std::string> labelled_child() {
  co_return "done";
}

task<std::string> labelled_parent() {
  co_return co_await labelled_child().named("B.read");
}

task<int> leaf_ok() {
  co_return 1;
}
task<int> middle_ok() {
  co_return co_await leaf_ok() + 1;
}
task<int> top_ok() {
  co_return co_await middle_ok() + 1;
}

// A coroutine starting the child it awaits (its wait, its run's end, the child's run's beginning)
// and a child ending into it (its success, its run's end, the parent's run's beginning) are one
// event each in the files (20 bytes where three took 44 and 46: issue 44), and the three events
// each stands for in every tool.
TEST(Coroutines, AHandOverAndAReturnAreOneEventEachInTheFilesAndThreeWhenRead) {
  TemporaryDirectory directory;
  const Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  EXPECT_EQ(sync_wait(top_ok()), 3);
  stop();

  reader::Trace trace(config.output);
  std::vector<EventId> stored;
  test::for_each_stored_event(
      trace, [&](const format::RawEvent& raw, bool) { stored.push_back(static_cast<EventId>(raw.spec->id)); });
  EXPECT_EQ(std::count(stored.begin(), stored.end(), EventId::task_hand_over), 2) << "top -> middle -> leaf";
  EXPECT_EQ(std::count(stored.begin(), stored.end(), EventId::task_return), 2) << "leaf -> middle -> top";
  EXPECT_EQ(std::count(stored.begin(), stored.end(), EventId::task_wait), 1) << "only the sync_wait call's";

  const auto events = task_events(trace);
  // 1: top, 2: middle, 3: leaf, 4: the sync_wait call's own task.
  const std::vector<uint64_t> ids = chain_ids(events);
  ASSERT_EQ(ids.size(), 5u) << "four tasks created";
  const Expected expected[] = {
      {EventId::task_create, 1, 0},    {EventId::task_create, 4, 0},    {EventId::task_run_begin, 4, 0},
      {EventId::task_wait, 4, 1},      {EventId::task_run_begin, 1, 0}, {EventId::task_create, 2, 1},
      {EventId::task_wait, 1, 2},      {EventId::task_run_end, 1, 0},   {EventId::task_run_begin, 2, 0},
      {EventId::task_create, 3, 2},    {EventId::task_wait, 2, 3},      {EventId::task_run_end, 2, 0},
      {EventId::task_run_begin, 3, 0}, {EventId::task_resolve, 3, 3},   {EventId::task_run_end, 3, 0},
      {EventId::task_run_begin, 2, 0}, {EventId::task_resolve, 2, 2},   {EventId::task_run_end, 2, 0},
      {EventId::task_run_begin, 1, 0}, {EventId::task_resolve, 1, 1},   {EventId::task_run_end, 1, 0},
      {EventId::task_resolve, 4, 4},   {EventId::task_run_end, 4, 0},
  };
  ASSERT_EQ(events.size(), std::size(expected));
  for (size_t i = 0; i < events.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(events[i].type, expected[i].type);
    EXPECT_EQ(events[i].task, ids[expected[i].task]);
    EXPECT_EQ(events[i].related_task, ids[expected[i].related]);
    if (events[i].type == EventId::task_resolve) {
      EXPECT_EQ(events[i].outcome, format::TaskOutcome::ok);
      EXPECT_EQ(events[i].text, "");
    }
  }
  for (const size_t first : {6, 10, 13, 16}) {  // the four switches, each at one instant
    EXPECT_EQ(events[first].ticks, events[first + 1].ticks) << first;
    EXPECT_EQ(events[first].ticks, events[first + 2].ticks) << first;
  }
  EXPECT_EQ(trace.events_discarded(), 0u);
  EXPECT_TRUE(model::build_task_graph(trace).problems().empty());
}

// A stream's event found again from its mark (what the viewer's merge of the tying events seeks
// to, past the events between): the events a compound one stands for, each at its part, and
// events in every packet, forwards and back.
TEST(Coroutines, AnEventsMarkFindsItAgainInACompoundAndInAnyPacket) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  config.packet_size = 4096;
  ASSERT_TRUE(start(config)) << last_error();
  for (int round = 0; round < 400; ++round) {
    CHRONICLE_SPAN("test", "round");
    EXPECT_EQ(sync_wait(top_ok()), 3);
  }
  stop();

  reader::Trace trace(config.output);
  ASSERT_EQ(trace.streams().size(), 1u);
  std::vector<reader::Event> events;
  std::vector<reader::EventMark> marks;
  reader::Trace::StreamCursor reading(trace, 0);
  for (reader::Event event; reading.next(event);) {
    events.push_back(event);
    marks.push_back(reading.mark());
  }
  ASSERT_GT(events.size(), 4000u);
  EXPECT_GT(marks.back().packet, 10u) << "the stream's events are in many packets";
  EXPECT_TRUE(std::any_of(marks.begin(), marks.end(), [](const reader::EventMark& mark) { return mark.part == 2; }))
      << "the third event a task_hand_over or task_return stands for";

  auto same = [](const reader::Event& read, const reader::Event& expected) {
    return read.type == expected.type && read.ticks == expected.ticks && read.task == expected.task &&
           read.related_task == expected.related_task && read.name_id == expected.name_id &&
           read.outcome == expected.outcome;
  };
  reader::Trace::StreamCursor seeking(trace, 0);
  auto read_again_at = [&](size_t at) {
    seeking.seek(marks[at]);
    reader::Event event;
    for (size_t following = at; following < std::min(events.size(), at + 4); ++following) {
      if (!seeking.next(event)) return ::testing::AssertionFailure() << "no event " << following;
      if (!same(event, events[following]))
        return ::testing::AssertionFailure() << "event " << following << " read again from the mark of " << at;
    }
    return ::testing::AssertionSuccess();
  };
  for (size_t at = 0; at < events.size(); at += 3) ASSERT_TRUE(read_again_at(at));
  for (size_t at = events.size(); at-- > 0; at -= std::min<size_t>(at, 5)) ASSERT_TRUE(read_again_at(at));
  seeking.seek(marks.back());
  reader::Event last;
  ASSERT_TRUE(seeking.next(last));
  EXPECT_FALSE(seeking.next(last)) << "past the last event";
}

TEST(Coroutines, AnExplicitLabelNamesTheTask) {
  TemporaryDirectory directory;
  const Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  EXPECT_EQ(sync_wait(labelled_parent()), "done");
  stop();
  reader::Trace trace(config.output);
  const auto graph = model::build_task_graph(trace);
  ASSERT_EQ(graph.tasks().size(), 3u);  // and the sync_wait call's own, second
  EXPECT_EQ(graph.tasks()[2].label, "B.read");
  EXPECT_EQ(graph.tasks()[2].display_name(), "B.read");
  EXPECT_EQ(graph.tasks()[2].name, "chronicle::labelled_child");
  EXPECT_EQ(graph.tasks()[0].display_name(), "chronicle::labelled_parent");
  EXPECT_EQ(graph.tasks()[1].display_name(), "sync_wait");
}

TEST(Coroutines, RunWithoutASessionAndRecordNothing) {
  ASSERT_FALSE(active());
  EXPECT_THROW(sync_wait(chain_b()), std::runtime_error);
  EXPECT_EQ(sync_wait(chain_a()), -1);
  EXPECT_EQ(create_task(TaskKind::promise, "ignored"), 0u);
}

// --- a pool -----------------------------------------------------------------------------------

task<void> hopper(thread_pool& pool, int hops) {
  for (int hop = 0; hop < hops; ++hop) {
    co_await pool.schedule();
    CHRONICLE_COUNTER("test", "hop", hop);
  }
}

TEST(Pool, TasksMovingBetweenThreadsKeepTheirIdentityAndRunIntervals) {
  TemporaryDirectory directory;
  const Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  constexpr int kTasks = 4;
  constexpr int kHops = 25;
  std::vector<uint32_t> launcher_threads(kTasks);
  {
    thread_pool pool(2, "pool");
    std::vector<std::thread> launchers;
    for (int i = 0; i < kTasks; ++i) launchers.emplace_back([&pool] { sync_wait(hopper(pool, kHops)); });
    for (auto& launcher : launchers) launcher.join();
  }
  stop();

  reader::Trace trace(config.output);
  std::set<uint32_t> pool_threads;
  for (const auto& stream : trace.streams())
    if (trace.thread_name(stream.thread_id).starts_with("pool-")) pool_threads.insert(stream.thread_id);
  // Under load one pool thread may take every hop, and one that never ran writes no stream.
  ASSERT_GE(pool_threads.size(), 1u);
  ASSERT_LE(pool_threads.size(), 2u);

  const model::TaskGraph graph = model::build_task_graph(trace);
  EXPECT_TRUE(graph.problems().empty()) << graph.problems().front();
  // Each launcher's sync_wait call has its own task (its thread runs none), waiting on a hopper;
  // each hop is a task of its own (thread_pool.schedule, since the hops are recorded: the hopper
  // waits on it until a pool thread takes it from the queue, which resolves it).
  ASSERT_EQ(graph.tasks().size(), size_t{2 * kTasks + kTasks * kHops});
  for (const auto& task : graph.tasks()) {
    if (task.name != "thread_pool.schedule") continue;
    SCOPED_TRACE(model::task_id_text(task.id));
    EXPECT_EQ(graph.find(task.parent)->name, "chronicle::hopper");
    EXPECT_EQ(task.outcome, format::TaskOutcome::ok);
    ASSERT_EQ(task.runs.size(), 1u);
    EXPECT_EQ(pool_threads.count(task.runs[0].thread_id), 1u);
    EXPECT_EQ(task.runs[0].begin, task.runs[0].end) << "the hand-over to the coroutine, at one instant";
  }
  std::set<uint64_t> awaited;
  for (const auto& task : graph.tasks()) {
    if (task.name != "sync_wait") continue;
    SCOPED_TRACE(model::task_id_text(task.id));
    ASSERT_EQ(task.waits_on.size(), 1u);
    awaited.insert(task.waits_on[0]);
    EXPECT_EQ(graph.find(task.waits_on[0])->name, "chronicle::hopper");
    ASSERT_EQ(task.runs.size(), 1u);
    EXPECT_EQ(task.runs[0].thread_id, graph.find(task.waits_on[0])->created_on_thread);
    EXPECT_EQ(task.outcome, format::TaskOutcome::ok);
  }
  EXPECT_EQ(awaited.size(), size_t{kTasks});
  std::set<uint32_t> used_pool_threads;
  for (const auto& task : graph.tasks()) {
    if (task.name == "sync_wait" || task.name == "thread_pool.schedule") continue;
    SCOPED_TRACE(model::task_id_text(task.id));
    EXPECT_EQ(task.name, "chronicle::hopper");
    ASSERT_EQ(task.waits_on.size(), size_t{kHops});
    for (const uint64_t hop : task.waits_on) EXPECT_EQ(graph.find(hop)->name, "thread_pool.schedule");
    ASSERT_EQ(task.runs.size(), size_t{kHops + 1});
    EXPECT_EQ(pool_threads.count(task.runs[0].thread_id), 0u) << "the first run is on the launching thread";
    EXPECT_EQ(task.runs[0].thread_id, task.created_on_thread);
    for (size_t i = 1; i < task.runs.size(); ++i) {
      EXPECT_EQ(pool_threads.count(task.runs[i].thread_id), 1u);
      used_pool_threads.insert(task.runs[i].thread_id);
      EXPECT_LE(task.runs[i - 1].end, task.runs[i].begin) << "a task runs in one place at a time";
    }
    for (const auto& run : task.runs) EXPECT_TRUE(run.ended);
    // Each hop's counter, in order, on the task that made it, on the thread it ran on.
    ASSERT_EQ(task.notes.size(), size_t{kHops});
    for (int hop = 0; hop < kHops; ++hop) {
      EXPECT_EQ(task.notes[hop].text, fmt::format("hop = {}", hop));
      EXPECT_EQ(task.notes[hop].thread_id, task.runs[hop + 1].thread_id);
    }
    EXPECT_EQ(task.outcome, format::TaskOutcome::ok);
    EXPECT_TRUE(task.resolved.has_value());
  }
  EXPECT_FALSE(used_pool_threads.empty());
  // Idle time is a pool thread's wait for work. Whether a thread waited at all depends on the
  // timing (under load it can find work queued at each look, and the pool stopping at the last),
  // so only where and how the idle intervals lie is certain.
  for (const auto& idle : graph.idle()) {
    EXPECT_EQ(pool_threads.count(idle.thread_id), 1u) << "idle time on thread " << idle.thread_id;
    EXPECT_TRUE(idle.ended);
    EXPECT_LE(idle.begin, idle.end);
  }
}

// --- the plain API ----------------------------------------------------------------------------

TEST(TaskApi, APromiseResolvedByATaskOnAnotherThread) {
  TemporaryDirectory directory;
  const Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  TaskId main_task = 0;
  TaskId promise = 0;
  TaskId resolver = 0;
  {
    main_task = create_task(TaskKind::handler, "main");
    TaskRunScope run(main_task);
    promise = create_task(TaskKind::promise, "reply");
    label_task(promise, "B.read");
    std::thread other([&] {
      resolver = create_task(TaskKind::handler, "resolver", main_task);
      TaskRunScope resolver_run(resolver);
      EXPECT_EQ(current_task(), resolver);
      CHRONICLE_NOTE("test", "resolving {}", 1);
      resolve_task(promise, TaskOutcome::cancelled, "shutting down");
    });
    task_waits_for(main_task, promise);
    other.join();
  }
  EXPECT_EQ(current_task(), 0u);
  stop();

  reader::Trace trace(config.output);
  const model::TaskGraph graph = model::build_task_graph(trace);
  EXPECT_TRUE(graph.problems().empty()) << graph.problems().front();
  ASSERT_EQ(graph.tasks().size(), 3u);
  const auto& reply = *graph.find(promise);
  EXPECT_EQ(reply.kind, format::TaskKind::promise);
  EXPECT_EQ(reply.name, "reply");
  EXPECT_EQ(reply.label, "B.read");
  EXPECT_EQ(reply.parent, main_task);
  EXPECT_EQ(reply.outcome, format::TaskOutcome::cancelled);
  EXPECT_EQ(reply.outcome_text, "shutting down");
  EXPECT_EQ(reply.resolver, resolver);
  EXPECT_TRUE(reply.runs.empty());
  ASSERT_EQ(graph.find(resolver)->notes.size(), 1u);
  EXPECT_EQ(graph.find(resolver)->notes[0].text, "resolving 1");
  EXPECT_EQ(graph.find(resolver)->parent, main_task);
  std::set<std::tuple<EdgeKind, uint64_t, uint64_t>> edges;
  for (const auto& edge : graph.edges()) edges.insert({edge.kind, edge.from, edge.to});
  const std::set<std::tuple<EdgeKind, uint64_t, uint64_t>> expected = {
      {EdgeKind::created_by, promise, main_task},
      {EdgeKind::created_by, resolver, main_task},
      {EdgeKind::waits_on, main_task, promise},
      {EdgeKind::resolved_by, promise, resolver},
  };
  EXPECT_EQ(edges, expected);
  EXPECT_EQ(graph.edges().size(), 4u);
  // Ids: the thread's index above, its own counter below; two threads, two indexes.
  EXPECT_NE(resolver >> 40, main_task >> 40);
  EXPECT_EQ(promise, main_task + 1);
}

// --- the builder on bad input -----------------------------------------------------------------

reader::Event make(EventId type, uint64_t ticks, uint64_t task, uint64_t related = 0, uint32_t thread = 1) {
  reader::Event event;
  event.type = type;
  event.ticks = ticks;
  event.task = task;
  event.related_task = related;
  event.thread_id = thread;
  return event;
}

model::TaskGraph build(const std::vector<reader::Event>& events) {
  model::TaskGraphBuilder builder([](uint32_t id) { return "site" + std::to_string(id); });
  for (const auto& event : events) builder.add(event);
  return builder.finish();
}

bool any_problem_contains(const model::TaskGraph& graph, std::string_view words) {
  for (const auto& problem : graph.problems())
    if (problem.find(words) != std::string::npos) return true;
  return false;
}

static_assert(reader::kTaskIdCounterBits == detail::kTaskCounterBits, "the graph reads ids as the writer makes them");

constexpr uint64_t task_id(uint64_t maker, uint64_t counter) {
  return maker << 40 | counter;
}

TEST(TaskIdIndex, IdsAsWritersMakeThemAreFoundAtTheirPlaces) {
  reader::TaskIdIndex index;
  std::vector<uint64_t> ids;
  for (uint64_t counter = 1; counter <= 5000; ++counter)
    for (uint64_t maker : {1, 2, 7}) ids.push_back(task_id(maker, counter));
  std::reverse(ids.begin() + 100, ids.begin() + 400);  // some out of order, as threads interleave
  for (size_t place = 0; place < ids.size(); ++place) {
    const auto [given, added] = index.try_add(ids[place], place);
    ASSERT_TRUE(added);
    ASSERT_EQ(given, place);
  }
  for (size_t place = 0; place < ids.size(); ++place) ASSERT_EQ(index.find(ids[place]), place);
  EXPECT_EQ(index.size(), ids.size());
  EXPECT_EQ(index.find(task_id(1, 5001)), reader::TaskIdIndex::kNone);
  EXPECT_EQ(index.find(task_id(3, 1)), reader::TaskIdIndex::kNone);
  EXPECT_EQ(index.find(0), reader::TaskIdIndex::kNone);
  const auto [again, added_again] = index.try_add(ids[17], 99999);
  EXPECT_FALSE(added_again);
  EXPECT_EQ(again, 17u);
}

TEST(TaskIdIndex, AnyIdsAreFoundAndNoneMakesTheArraysLarge) {
  // Garbage, lost events and other writers: makers and counters far apart, all 64-bit values.
  reader::TaskIdIndex index;
  std::unordered_map<uint64_t, size_t> expected;
  std::mt19937_64 random(45);
  const uint64_t hostile[] = {~uint64_t{0}, task_id(1, (uint64_t{1} << 40) - 1), task_id((uint64_t{1} << 24) - 1, 1),
                              task_id(65535, 3), task_id(1, 1) + 100000000};
  for (uint64_t id : hostile) expected.try_emplace(id, expected.size());
  for (int k = 0; k < 200000; ++k) {
    const uint64_t id = k % 3 == 0 ? random() : task_id(random() % 70000, random() % (uint64_t{1} << (k % 41)));
    expected.try_emplace(id, expected.size());
  }
  for (const auto& [id, place] : expected) {
    const auto [given, added] = index.try_add(id, place);
    ASSERT_TRUE(added) << id;
    ASSERT_EQ(given, place);
  }
  for (const auto& [id, place] : expected) ASSERT_EQ(index.find(id), place) << id;
  EXPECT_EQ(index.size(), expected.size());
  EXPECT_LE(index.array_slots(), 4 * expected.size() + (size_t{1} << 18));
}

TEST(TaskIdIndex, ManyMakersOfOneIdEachClaimNoRoomOfTheirOwn) {
  reader::TaskIdIndex index;
  for (uint64_t maker = 1; maker < 60000; ++maker) index.try_add(task_id(maker, 4000), maker);
  for (uint64_t maker = 1; maker < 60000; ++maker) ASSERT_EQ(index.find(task_id(maker, 4000)), maker);
  EXPECT_LE(index.array_slots(), 4 * index.size() + (size_t{1} << 18));
}

TEST(TaskGraphBadInput, WaitsAndResolutionsOfUnknownTasksAreKeptAndReported) {
  const auto graph = build(
      {make(EventId::task_create, 1, 10), make(EventId::task_wait, 2, 10, 99), make(EventId::task_resolve, 3, 98, 97)});
  ASSERT_EQ(graph.tasks().size(), 4u);
  EXPECT_FALSE(graph.find(99)->seen_created);
  EXPECT_EQ(graph.find(98)->resolver, 97u);
  EXPECT_TRUE(any_problem_contains(graph, "task t?99 is never created"));
  EXPECT_TRUE(any_problem_contains(graph, "task t?98 is never created"));
  EXPECT_TRUE(any_problem_contains(graph, "task t?97 is never created"));
  EXPECT_EQ(graph.edges().size(), 2u);
}

TEST(TaskGraphBadInput, CyclesInWaitsAreReportedOnce) {
  std::vector<reader::Event> events;
  for (uint64_t id = 1; id <= 3; ++id) events.push_back(make(EventId::task_create, id, id));
  events.push_back(make(EventId::task_wait, 4, 1, 2));
  events.push_back(make(EventId::task_wait, 5, 2, 3));
  events.push_back(make(EventId::task_wait, 6, 3, 1));
  events.push_back(make(EventId::task_wait, 7, 3, 3));  // and one on itself
  const auto graph = build(events);
  size_t cycles = 0;
  for (const auto& problem : graph.problems()) cycles += problem.find("cycle") != std::string::npos;
  EXPECT_EQ(cycles, 2u);
  EXPECT_TRUE(any_problem_contains(graph, "t?1 -> t?2 -> t?3 -> t?1"));
  EXPECT_TRUE(any_problem_contains(graph, "t?3 -> t?3"));
}

TEST(TaskGraphBadInput, AVeryLongWaitChainNeitherOverflowsNorLoops) {
  std::vector<reader::Event> events;
  constexpr uint64_t kLength = 200'000;
  for (uint64_t id = 1; id <= kLength; ++id) events.push_back(make(EventId::task_create, id, id));
  for (uint64_t id = 1; id < kLength; ++id) events.push_back(make(EventId::task_wait, kLength + id, id, id + 1));
  const auto graph = build(events);
  EXPECT_TRUE(graph.problems().empty());
  EXPECT_EQ(graph.edges().size(), kLength - 1);
}

TEST(TaskGraphBadInput, MissingRunEndsAreMarkedIncomplete) {
  const auto graph = build({
      make(EventId::task_create, 1, 1),
      make(EventId::task_create, 2, 2),
      make(EventId::task_run_begin, 3, 1),
      make(EventId::task_run_begin, 4, 2),  // 2 runs inside 1 and never ends (a crash, say)
      make(EventId::task_run_end, 6, 1),
      make(EventId::task_run_begin, 7, 1, 0, 2),  // on another thread, until the trace ends
      make(EventId::task_run_end, 8, 2, 0, 3),    // ends a run that never began
      make(EventId::loop_suspend, 9, 0, 0, 4),
  });
  const auto& one = *graph.find(1);
  ASSERT_EQ(one.runs.size(), 2u);
  EXPECT_TRUE(one.runs[0].ended);
  EXPECT_EQ(one.runs[0].end, 6u);
  EXPECT_FALSE(one.runs[1].ended);
  EXPECT_EQ(one.runs[1].end, 9u);
  const auto& two = *graph.find(2);
  ASSERT_EQ(two.runs.size(), 1u);
  EXPECT_FALSE(two.runs[0].ended);
  EXPECT_EQ(two.runs[0].end, 6u);
  EXPECT_TRUE(any_problem_contains(graph, "task t?2 has no run end on thread 1"));
  EXPECT_TRUE(any_problem_contains(graph, "task t?1 was still running on thread 2 when the trace ended"));
  EXPECT_TRUE(any_problem_contains(graph, "task t?2 ends a run on thread 3 at tick 8 that never began"));
  ASSERT_EQ(graph.idle().size(), 1u);
  EXPECT_FALSE(graph.idle()[0].ended);
}

TEST(TaskGraphBadInput, DuplicatesAndTaskZeroAreReported) {
  const auto graph = build({
      make(EventId::task_create, 1, 1),
      make(EventId::task_create, 2, 1),
      make(EventId::task_resolve, 3, 1),
      make(EventId::task_resolve, 4, 1),
      make(EventId::task_run_begin, 5, 0),
      make(EventId::task_create, 6, 5, 5),
      make(EventId::loop_resume, 7, 0),  // the loop was idle when the trace began: fine
      make(EventId::loop_suspend, 8, 0),
      make(EventId::loop_resume, 9, 0),
      make(EventId::loop_resume, 10, 0),
  });
  EXPECT_TRUE(any_problem_contains(graph, "created twice"));
  EXPECT_TRUE(any_problem_contains(graph, "resolved again"));
  EXPECT_TRUE(any_problem_contains(graph, "names task 0"));
  EXPECT_TRUE(any_problem_contains(graph, "names itself as its parent"));
  EXPECT_TRUE(any_problem_contains(graph, "resumes without suspending (tick 10)"));
  EXPECT_FALSE(any_problem_contains(graph, "resumes without suspending (tick 7)"));
  ASSERT_EQ(graph.idle().size(), 1u);
  EXPECT_EQ(graph.idle()[0].begin, 8u);
  EXPECT_EQ(*graph.find(1)->resolved, 3u);
}

TEST(TaskGraphBadInput, RandomEventsNeverCrash) {
  std::mt19937 random(11);
  const EventId types[] = {EventId::task_create,  EventId::task_run_begin, EventId::task_run_end,
                           EventId::task_wait,    EventId::task_resolve,   EventId::task_label,
                           EventId::loop_suspend, EventId::loop_resume,    EventId::note};
  for (int round = 0; round < 50; ++round) {
    std::vector<reader::Event> events;
    uint64_t ticks = 0;
    for (int i = 0; i < 2000; ++i) {
      ticks += random() % 3;
      events.push_back(make(types[random() % std::size(types)], ticks, random() % 20, random() % 20,
                            static_cast<uint32_t>(random() % 3)));
    }
    const auto graph = build(events);
    EXPECT_LE(graph.problems().size(), 201u);
    for (const auto& task : graph.tasks())
      for (const auto& run : task.runs) EXPECT_LE(run.begin, run.end);
  }
}

}  // namespace
}  // namespace chronicle
