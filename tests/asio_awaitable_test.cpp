// A program written with Asio's own coroutines (tests/programs/awaitable_requests.cpp), recorded
// by `chronicle record`: every co_spawned coroutine is a task created by the coroutine that
// spawned it, every co_await of an operation or of a spawned coroutine is a wait, the awaitable
// operators' coroutines are waited on, the loser of `||` ends cancelled, a throwing coroutine
// failed, and a span at the top of a coroutine pairs.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "model/task_graph.hpp"
#include "reader/trace_reader.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using format::TaskKind;
using format::TaskOutcome;
using model::Task;
using model::TaskId;
using test::run;
using test::TemporaryDirectory;

const std::string kCli = CHRONICLE_CLI;

std::vector<const Task*> created_by(const model::TaskGraph& graph, TaskId parent, TaskKind kind) {
  std::vector<const Task*> out;
  for (const Task& task : graph.tasks())
    if (task.parent == parent && task.kind == kind) out.push_back(&task);
  std::sort(out.begin(), out.end(), [](const Task* a, const Task* b) { return *a->created < *b->created; });
  return out;
}

size_t edges_of(const model::TaskGraph& graph, model::EdgeKind kind) {
  size_t count = 0;
  for (const model::Edge& edge : graph.edges()) count += edge.kind == kind;
  return count;
}

struct Recorded {
  std::string directory;
  model::TaskGraph graph;
};

// A child coroutine of `&&` or `||`: it waited on its one timer, which it created.
void expect_waits_on_its_own_timer(const model::TaskGraph& graph, const Task& child, TaskOutcome timer_outcome) {
  const auto timers = created_by(graph, child.id, TaskKind::timer);
  ASSERT_EQ(timers.size(), 1u);
  EXPECT_EQ(timers[0]->name, "deadline_timer.async_wait");
  EXPECT_EQ(timers[0]->outcome, timer_outcome);
  EXPECT_EQ(child.waits_on, std::vector<TaskId>{timers[0]->id});
  EXPECT_EQ(child.runs.size(), 2u) << "started, then resumed by its timer";
}

void expect_request_graph(const model::TaskGraph& graph, const Task& request, bool fails) {
  SCOPED_TRACE(model::task_id_text(request.id));
  // Its own timer, then look_up's (a nested awaitable is part of the request's coroutine).
  const auto timers = created_by(graph, request.id, TaskKind::timer);
  ASSERT_EQ(timers.size(), 2u);
  // a && b, then work || timeout: four coroutines spawned by the operators, in the order the
  // request waits on them (the order of their creation is the compiler's order of arguments).
  auto children = created_by(graph, request.id, TaskKind::coroutine);
  ASSERT_EQ(children.size(), 4u);
  ASSERT_EQ(request.waits_on.size(), 6u);
  EXPECT_EQ(request.waits_on[0], timers[0]->id);
  EXPECT_EQ(request.waits_on[1], timers[1]->id);
  const auto wait_position = [&](const Task* child) {
    return std::find(request.waits_on.begin(), request.waits_on.end(), child->id) - request.waits_on.begin();
  };
  std::sort(children.begin(), children.end(),
            [&](const Task* a, const Task* b) { return wait_position(a) < wait_position(b); });
  for (size_t index = 0; index < children.size(); ++index)
    EXPECT_EQ(wait_position(children[index]), static_cast<long>(index + 2));
  for (const Task* timer : timers) EXPECT_EQ(timer->outcome, TaskOutcome::ok);
  EXPECT_EQ(children[0]->outcome, TaskOutcome::ok);
  EXPECT_EQ(children[1]->outcome, TaskOutcome::ok);
  EXPECT_EQ(children[2]->outcome, TaskOutcome::cancelled) << "the hour-long work lost to the timeout";
  EXPECT_EQ(children[2]->resolver, children[3]->id) << "resolved by the winner, the timeout";
  EXPECT_EQ(children[3]->outcome, TaskOutcome::ok);
  expect_waits_on_its_own_timer(graph, *children[0], TaskOutcome::ok);
  expect_waits_on_its_own_timer(graph, *children[1], TaskOutcome::ok);
  expect_waits_on_its_own_timer(graph, *children[2], TaskOutcome::cancelled);
  expect_waits_on_its_own_timer(graph, *children[3], TaskOutcome::ok);
  // Started inside serve's run, then resumed after each of its four waits: its own timer,
  // look_up's, the && (by its last child's end) and the || (by its cancelled loser's end).
  EXPECT_EQ(request.runs.size(), 5u);
  ASSERT_TRUE(request.resolved.has_value());
  if (fails) {
    EXPECT_EQ(request.outcome, TaskOutcome::failed);
    EXPECT_EQ(request.outcome_text, "backend refused record 20");
  } else {
    EXPECT_EQ(request.outcome, TaskOutcome::ok);
  }
}

TEST(AsioAwaitable, EveryCoroutineIsATaskWithItsWaitsAndOutcome) {
  constexpr int kRequests = 4;
  TemporaryDirectory directory;
  const auto result = run(kCli + " record -q -o " + (directory / "trace") + " -- " + AWAITABLE_REQUESTS + " " +
                          std::to_string(kRequests));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_NE(result.out.find("4 requests served"), std::string::npos) << result.out;
  reader::Trace trace(directory / "trace");
  ASSERT_EQ(trace.events_discarded(), 0u);
  const model::TaskGraph graph = model::build_task_graph(trace);
  EXPECT_TRUE(graph.problems().empty()) << graph.problems().front();

  std::map<TaskKind, int> kinds;
  for (const Task& task : graph.tasks()) ++kinds[task.kind];
  // serve, 4 requests, 4 coroutines of the operators per request; 6 timers per request; one
  // handler: co_spawn's call of serve's completion handler, posted as serve never suspended (the
  // others call theirs inline). co_spawn's own hop onto the executor is the coroutine's
  // queueing, not a task.
  EXPECT_EQ(kinds,
            (std::map<TaskKind, int>{
                {TaskKind::coroutine, 1 + kRequests * 5}, {TaskKind::timer, kRequests * 6}, {TaskKind::handler, 1}}));

  const auto roots = created_by(graph, 0, TaskKind::coroutine);
  ASSERT_EQ(roots.size(), 1u) << "serve, spawned from main";
  const Task& serve = *roots[0];
  EXPECT_EQ(serve.name, "co_spawn");
  EXPECT_EQ(serve.outcome, TaskOutcome::ok);
  EXPECT_TRUE(serve.waits_on.empty()) << "it spawned its requests detached";
  EXPECT_EQ(serve.runs.size(), size_t{1 + kRequests})
      << "each request it spawns runs at once, inline, until it suspends";
  const auto completions = created_by(graph, serve.id, TaskKind::handler);
  ASSERT_EQ(completions.size(), 1u);
  EXPECT_EQ(completions[0]->name, "io_context.execute");
  const auto requests = created_by(graph, serve.id, TaskKind::coroutine);
  ASSERT_EQ(requests.size(), size_t{kRequests});
  for (int number = 0; number < kRequests; ++number) expect_request_graph(graph, *requests[number], number == 2);

  // Per request: 6 waits of its own and one of each of its 4 children; the loser of its ||
  // resolved by the winner.
  EXPECT_EQ(edges_of(graph, model::EdgeKind::waits_on), size_t{kRequests * 10});
  EXPECT_EQ(edges_of(graph, model::EdgeKind::resolved_by), size_t{kRequests});
  EXPECT_EQ(edges_of(graph, model::EdgeKind::created_by), graph.tasks().size() - 1);

  // The span at the top of each request pairs in its task: no warning.
  const auto stats = run(kCli + " stats " + (directory / "trace"));
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_EQ(stats.out.find("matched no open span"), std::string::npos) << stats.out;
  EXPECT_EQ(stats.err.find("matched no open span"), std::string::npos) << stats.err;
}

// make_parallel_group(...).async_wait(wait_for_one(), use_awaitable): a wait on each coroutine of
// the group, the slow one cancelled when the fast one ends; a coroutine spawned with a
// cancellation_signal's slot ends cancelled when the signal is emitted.
TEST(AsioAwaitable, AParallelGroupAndACancellationSignal) {
  TemporaryDirectory directory;
  const auto result = run(kCli + " record -q -o " + (directory / "trace") + " -- " + AWAITABLE_REQUESTS + " group");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_NE(result.out.find("gathered"), std::string::npos) << result.out;
  reader::Trace trace(directory / "trace");
  const model::TaskGraph graph = model::build_task_graph(trace);
  EXPECT_TRUE(graph.problems().empty()) << graph.problems().front();
  std::map<TaskKind, int> kinds;
  for (const Task& task : graph.tasks()) ++kinds[task.kind];
  EXPECT_EQ(kinds, (std::map<TaskKind, int>{{TaskKind::coroutine, 4}, {TaskKind::timer, 4}}));

  const auto roots = created_by(graph, 0, TaskKind::coroutine);
  ASSERT_EQ(roots.size(), 1u);
  const Task& gather = *roots[0];
  EXPECT_EQ(gather.outcome, TaskOutcome::ok);
  const auto spawned = created_by(graph, gather.id, TaskKind::coroutine);
  ASSERT_EQ(spawned.size(), 3u) << "the group's two, then the one the signal cancels";
  const auto timers = created_by(graph, gather.id, TaskKind::timer);
  ASSERT_EQ(timers.size(), 1u);
  // The group's coroutines are the first two it waits on (in the group's order), its own sleep
  // the last; the signalled coroutine was spawned detached: not waited on.
  ASSERT_EQ(gather.waits_on.size(), 3u);
  EXPECT_EQ(gather.waits_on[2], timers[0]->id);
  const Task* fast = graph.find(gather.waits_on[0]);
  const Task* slow = graph.find(gather.waits_on[1]);
  ASSERT_TRUE(fast && slow);
  EXPECT_EQ(fast->parent, gather.id);
  EXPECT_EQ(slow->parent, gather.id);
  EXPECT_EQ(fast->outcome, TaskOutcome::ok);
  EXPECT_EQ(slow->outcome, TaskOutcome::cancelled);
  EXPECT_EQ(slow->resolver, fast->id) << "the group cancelled it when the fast one ended";
  expect_waits_on_its_own_timer(graph, *fast, TaskOutcome::ok);
  expect_waits_on_its_own_timer(graph, *slow, TaskOutcome::cancelled);
  const Task* signalled = spawned[2];
  EXPECT_NE(signalled->id, fast->id);
  EXPECT_NE(signalled->id, slow->id);
  EXPECT_EQ(signalled->outcome, TaskOutcome::cancelled);
  EXPECT_EQ(signalled->resolver, signalled->id) << "who emitted the signal is not known";
  EXPECT_EQ(edges_of(graph, model::EdgeKind::resolved_by), 1u);
  expect_waits_on_its_own_timer(graph, *signalled, TaskOutcome::cancelled);
  // Its first run, then: resumed by the group's last end, interrupted while the signalled
  // coroutine runs inline, resumed by its own timer.
  EXPECT_EQ(gather.runs.size(), 4u);
}

// The same requests on an io_context run by two threads: a coroutine resumes on either, and the
// coroutines of && and || end on either. The tasks and outcomes are the same. A coroutine's
// resumption by the end of the coroutines it awaited is recorded only when they all ended on one
// thread (docs/tasks.md): otherwise what it does until its end is not its own, so a request
// records its first four waits always, the last two (the ||) only then.
TEST(AsioAwaitable, OnTwoThreadsTheTasksAndOutcomesAreTheSame) {
  constexpr int kRequests = 40;
  TemporaryDirectory directory;
  const auto result = run(kCli + " record -q -o " + (directory / "trace") + " -- " + AWAITABLE_REQUESTS + " pool " +
                          std::to_string(kRequests));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  reader::Trace trace(directory / "trace");
  ASSERT_EQ(trace.events_discarded(), 0u);
  const model::TaskGraph graph = model::build_task_graph(trace);
  EXPECT_TRUE(graph.problems().empty()) << graph.problems().front();
  std::map<TaskKind, int> kinds;
  for (const Task& task : graph.tasks()) ++kinds[task.kind];
  EXPECT_EQ(kinds[TaskKind::coroutine], 1 + kRequests * 5);
  EXPECT_EQ(kinds[TaskKind::timer], kRequests * 6);
  const auto roots = created_by(graph, 0, TaskKind::coroutine);
  ASSERT_FALSE(roots.empty());  // serve first; then the || coroutines of requests not followed
  const auto requests = created_by(graph, roots[0]->id, TaskKind::coroutine);
  ASSERT_EQ(requests.size(), size_t{kRequests});
  size_t followed = 0;
  for (int number = 0; number < kRequests; ++number) {
    SCOPED_TRACE(model::task_id_text(requests[number]->id));
    const size_t waits = requests[number]->waits_on.size();
    EXPECT_TRUE(waits == 4 || waits == 6) << waits;
    followed += waits == 6;
    for (const auto& each : requests[number]->runs) EXPECT_TRUE(each.ended);
    EXPECT_EQ(requests[number]->outcome, number == 2 ? TaskOutcome::failed : TaskOutcome::ok);
    for (const Task* child : created_by(graph, requests[number]->id, TaskKind::coroutine))
      EXPECT_EQ(child->waits_on.size(), 1u) << "its timer";
  }
  EXPECT_EQ(roots.size() - 1, 2 * (kRequests - followed)) << "the || coroutines of the requests not followed";
}

#ifdef BOOST_AWAITABLE_REQUESTS
// Boost.Asio (Debian's Boost 1.74: no awaitable operators): the same rules with its define.
TEST(AsioAwaitable, BoostAsioCoroutinesAreTasksToo) {
  constexpr int kRequests = 4;
  TemporaryDirectory directory;
  const auto result = run(kCli + " record -q -o " + (directory / "trace") + " -- " + BOOST_AWAITABLE_REQUESTS + " " +
                          std::to_string(kRequests));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  reader::Trace trace(directory / "trace");
  const model::TaskGraph graph = model::build_task_graph(trace);
  EXPECT_TRUE(graph.problems().empty()) << graph.problems().front();
  std::map<TaskKind, int> kinds;
  for (const Task& task : graph.tasks()) ++kinds[task.kind];
  // serve, each request and the coroutine it co_spawns with use_awaitable; three timers per
  // request (its own, look_up's, fetch's). Boost 1.74 posts co_spawn's hop and dispatches the
  // completion (inline): no handler.
  EXPECT_EQ(kinds,
            (std::map<TaskKind, int>{{TaskKind::coroutine, 1 + 2 * kRequests}, {TaskKind::timer, 3 * kRequests}}));
  const auto roots = created_by(graph, 0, TaskKind::coroutine);
  ASSERT_EQ(roots.size(), 1u);
  const Task& serve = *roots[0];
  EXPECT_EQ(serve.runs.size(), 1u) << "Boost 1.74's co_spawn posts: the requests do not run inline";
  const auto requests = created_by(graph, serve.id, TaskKind::coroutine);
  ASSERT_EQ(requests.size(), size_t{kRequests});
  for (int number = 0; number < kRequests; ++number) {
    const Task& request = *requests[number];
    SCOPED_TRACE(model::task_id_text(request.id));
    const auto timers = created_by(graph, request.id, TaskKind::timer);
    const auto fetches = created_by(graph, request.id, TaskKind::coroutine);
    ASSERT_EQ(timers.size(), 2u);
    ASSERT_EQ(fetches.size(), 1u);
    EXPECT_EQ(request.waits_on, (std::vector<TaskId>{timers[0]->id, timers[1]->id, fetches[0]->id}));
    expect_waits_on_its_own_timer(graph, *fetches[0], TaskOutcome::ok);
    EXPECT_EQ(fetches[0]->outcome, TaskOutcome::ok);
    // Its first run, then resumed by each timer and by the end of the coroutine it awaited.
    EXPECT_EQ(request.runs.size(), 4u);
    if (number == 2) {
      EXPECT_EQ(request.outcome, TaskOutcome::failed);
      EXPECT_EQ(request.outcome_text, "backend refused record 21");
    } else {
      EXPECT_EQ(request.outcome, TaskOutcome::ok);
    }
  }
  const auto stats = run(kCli + " stats " + (directory / "trace"));
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_EQ(stats.err.find("matched no open span"), std::string::npos) << stats.err;
}
#endif

}  // namespace
}  // namespace chronicle
