// The combinators of chronicle/coro.hpp (when_all, when_any, with_timeout, async_scope) and
// cancellation, recorded in-process: each test asserts the whole task graph (every task with its
// outcome and resolver, every edge), and that no task is resolved twice. Nothing here depends on
// timing: a task that must lose sleeps for a day and ends only by cancellation.
#include <gtest/gtest.h>

#include <chronicle/chronicle.hpp>
#include <chronicle/coro.hpp>
#include <set>
#include <stdexcept>
#include <string>

#include "model/task_graph.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using namespace std::chrono_literals;
using test::TemporaryDirectory;
using Lines = std::multiset<std::string>;

constexpr auto kForever = 24h;  // only a cancellation ends a sleep this long in a test

std::string outcome_name(format::TaskOutcome outcome) {
  switch (outcome) {
    case format::TaskOutcome::ok:
      return "ok";
    case format::TaskOutcome::failed:
      return "failed";
    case format::TaskOutcome::cancelled:
      return "cancelled";
  }
  return "?";
}

std::string name_of(const model::TaskGraph& graph, TaskId id) {
  const model::Task* task = graph.find(id);
  return task ? task->display_name() : "-";
}

// "name: outcome "text" by resolver" for each task ("self" when it resolved itself).
Lines describe_tasks(const model::TaskGraph& graph) {
  Lines lines;
  for (const model::Task& task : graph.tasks()) {
    std::string line = task.display_name() + ": ";
    if (!task.resolved) {
      lines.insert(line + "unresolved");
      continue;
    }
    line += outcome_name(task.outcome);
    if (!task.outcome_text.empty()) line += " \"" + task.outcome_text + "\"";
    line += " by " + (task.resolver == task.id ? std::string("self") : name_of(graph, task.resolver));
    lines.insert(line);
  }
  return lines;
}

// "from kind to" for each edge.
Lines describe_edges(const model::TaskGraph& graph) {
  Lines lines;
  for (const model::Edge& edge : graph.edges())
    lines.insert(name_of(graph, edge.from) + " " + std::string(model::edge_kind_name(edge.kind)) + " " +
                 name_of(graph, edge.to));
  return lines;
}

// Records what `body` does in a session of its own and gives the task graph.
template <typename Body>
model::TaskGraph record(Body&& body) {
  TemporaryDirectory directory;
  const Config config = test::test_config(directory);
  EXPECT_TRUE(start(config)) << last_error();
  body();
  stop();
  reader::Trace trace(config.output);
  model::TaskGraph graph = model::build_task_graph(trace);
  for (const std::string& problem : graph.problems()) ADD_FAILURE() << problem;  // "resolved again" among them
  return graph;
}

// --- the tasks the tests combine -----------------------------------------------------------------

// Each `co_await pool.schedule()` is a task "thread_pool.schedule" (resolved by no task, as a pool
// thread takes it), each `pool.sleep_for` a timer "thread_pool.sleep_for" (cancelled by no task
// here): created by the task that awaits it, which waits on it (tests/bridge_test.cpp). The
// graphs below list them with the rest.

task<int> value_on_pool(thread_pool& pool, int value) {
  co_await pool.schedule();
  co_return value;
}

task<void> nothing_on_pool(thread_pool& pool) {
  co_await pool.schedule();
}

task<int> sleep_forever(thread_pool& pool) {
  co_await pool.sleep_for(kForever);
  co_return -1;
}

task<int> fail_on_pool(thread_pool& pool) {
  co_await pool.schedule();
  throw std::runtime_error("disk on fire");
  co_return 0;
}

// Awaits a child that sleeps: cancelling this task cancels the child.
task<int> await_sleeper(thread_pool& pool) {
  co_return co_await sleep_forever(pool).named("grandchild");
}

// --- when_all ----------------------------------------------------------------------------------

task<int> fan_out(thread_pool& pool) {
  auto [one, two, three] = co_await when_all(value_on_pool(pool, 1).named("one"), value_on_pool(pool, 2).named("two"),
                                             nothing_on_pool(pool).named("three"));
  static_assert(std::is_same_v<decltype(three), std::monostate>);
  co_return one + two;
}

TEST(WhenAll, WaitsOnEachTaskAndGivesTheirResults) {
  thread_pool pool(2);
  const auto graph = record([&] { EXPECT_EQ(sync_wait(fan_out(pool).named("fan_out")), 3); });
  EXPECT_EQ(describe_tasks(graph), (Lines{
                                       "sync_wait: ok by self",
                                       "fan_out: ok by self",
                                       "chronicle::when_all: ok by self",
                                       "one: ok by self",
                                       "two: ok by self",
                                       "three: ok by self",
                                       "thread_pool.schedule: ok by -",
                                       "thread_pool.schedule: ok by -",
                                       "thread_pool.schedule: ok by -",
                                   }));
  EXPECT_EQ(describe_edges(graph), (Lines{
                                       "sync_wait waits-on fan_out",
                                       "one created-by fan_out",
                                       "two created-by fan_out",
                                       "three created-by fan_out",
                                       "chronicle::when_all created-by fan_out",
                                       "fan_out waits-on chronicle::when_all",
                                       "chronicle::when_all waits-on one",
                                       "chronicle::when_all waits-on two",
                                       "chronicle::when_all waits-on three",
                                       "thread_pool.schedule created-by one",
                                       "thread_pool.schedule created-by two",
                                       "thread_pool.schedule created-by three",
                                       "one waits-on thread_pool.schedule",
                                       "two waits-on thread_pool.schedule",
                                       "three waits-on thread_pool.schedule",
                                   }));
}

task<std::string> fan_out_with_failure(thread_pool& pool) {
  try {
    co_await when_all(sleep_forever(pool).named("sleeper"), fail_on_pool(pool).named("failing"),
                      value_on_pool(pool, 3).named("fine"));
  } catch (const std::runtime_error& error) {
    co_return error.what();
  }
  co_return "no failure";
}

TEST(WhenAll, AFailureCancelsTheOthersAndIsRethrownOnceAllHaveEnded) {
  thread_pool pool(2);
  const auto graph = record([&] { EXPECT_EQ(sync_wait(fan_out_with_failure(pool).named("caller")), "disk on fire"); });
  EXPECT_EQ(describe_tasks(graph), (Lines{
                                       "sync_wait: ok by self",
                                       "caller: ok by self",
                                       "chronicle::when_all: failed \"disk on fire\" by self",
                                       "sleeper: cancelled \"cancelled\" by failing",
                                       "failing: failed \"disk on fire\" by self",
                                       "fine: ok by self",
                                       "thread_pool.schedule: ok by -",
                                       "thread_pool.schedule: ok by -",
                                       "thread_pool.sleep_for: cancelled by -",
                                   }));
  EXPECT_EQ(describe_edges(graph), (Lines{
                                       "sync_wait waits-on caller",
                                       "sleeper created-by caller",
                                       "failing created-by caller",
                                       "fine created-by caller",
                                       "chronicle::when_all created-by caller",
                                       "caller waits-on chronicle::when_all",
                                       "chronicle::when_all waits-on sleeper",
                                       "chronicle::when_all waits-on failing",
                                       "chronicle::when_all waits-on fine",
                                       "sleeper resolved-by failing",
                                       "thread_pool.schedule created-by failing",
                                       "thread_pool.schedule created-by fine",
                                       "failing waits-on thread_pool.schedule",
                                       "fine waits-on thread_pool.schedule",
                                       "thread_pool.sleep_for created-by sleeper",
                                       "sleeper waits-on thread_pool.sleep_for",
                                   }));
}

task<int> fan_out_vector(thread_pool& pool) {
  std::vector<task<int>> tasks;
  for (int i = 1; i <= 3; ++i) tasks.push_back(value_on_pool(pool, i).named("part"));
  const std::vector<int> parts = co_await when_all(std::move(tasks));
  EXPECT_EQ(parts, (std::vector<int>{1, 2, 3}));
  co_return parts[0] + parts[1] + parts[2];
}

TEST(WhenAll, OfAVectorGivesTheResultsInOrder) {
  thread_pool pool(2);
  const auto graph = record([&] { EXPECT_EQ(sync_wait(fan_out_vector(pool).named("caller")), 6); });
  EXPECT_EQ(describe_tasks(graph), (Lines{
                                       "sync_wait: ok by self",
                                       "caller: ok by self",
                                       "chronicle::when_all: ok by self",
                                       "part: ok by self",
                                       "part: ok by self",
                                       "part: ok by self",
                                       "thread_pool.schedule: ok by -",
                                       "thread_pool.schedule: ok by -",
                                       "thread_pool.schedule: ok by -",
                                   }));
  EXPECT_EQ(describe_edges(graph), (Lines{
                                       "sync_wait waits-on caller",
                                       "part created-by caller",
                                       "part created-by caller",
                                       "part created-by caller",
                                       "chronicle::when_all created-by caller",
                                       "caller waits-on chronicle::when_all",
                                       "chronicle::when_all waits-on part",
                                       "chronicle::when_all waits-on part",
                                       "chronicle::when_all waits-on part",
                                       "thread_pool.schedule created-by part",
                                       "thread_pool.schedule created-by part",
                                       "thread_pool.schedule created-by part",
                                       "part waits-on thread_pool.schedule",
                                       "part waits-on thread_pool.schedule",
                                       "part waits-on thread_pool.schedule",
                                   }));
}

// --- when_any ----------------------------------------------------------------------------------

task<int> race(thread_pool& pool) {
  // The loser starts first and is asleep before the winner starts.
  auto [index, value] = co_await when_any(await_sleeper(pool).named("loser"), value_on_pool(pool, 7).named("winner"));
  EXPECT_EQ(index, 1u);
  co_return value;
}

TEST(WhenAny, TheFirstToEndWinsAndTheOthersAndTheirChildrenAreCancelled) {
  thread_pool pool(2);
  const auto graph = record([&] { EXPECT_EQ(sync_wait(race(pool).named("caller")), 7); });
  EXPECT_EQ(describe_tasks(graph), (Lines{
                                       "sync_wait: ok by self",
                                       "caller: ok by self",
                                       "chronicle::when_any: ok by self",
                                       "winner: ok by self",
                                       "loser: cancelled \"cancelled\" by winner",
                                       // Cancelled through its parent's stop token.
                                       "grandchild: cancelled \"cancelled\" by self",
                                       "thread_pool.schedule: ok by -",
                                       "thread_pool.sleep_for: cancelled by -",
                                   }));
  EXPECT_EQ(describe_edges(graph), (Lines{
                                       "sync_wait waits-on caller",
                                       "loser created-by caller",
                                       "winner created-by caller",
                                       "chronicle::when_any created-by caller",
                                       "caller waits-on chronicle::when_any",
                                       "chronicle::when_any waits-on loser",
                                       "chronicle::when_any waits-on winner",
                                       "grandchild created-by loser",
                                       "loser waits-on grandchild",
                                       "loser resolved-by winner",
                                       "thread_pool.schedule created-by winner",
                                       "winner waits-on thread_pool.schedule",
                                       "thread_pool.sleep_for created-by grandchild",
                                       "grandchild waits-on thread_pool.sleep_for",
                                   }));
}

// --- with_timeout ------------------------------------------------------------------------------

task<std::string> bounded_sleep(thread_pool& pool) {
  try {
    co_await with_timeout(sleep_forever(pool).named("slow"), 10ms);
  } catch (const timeout_error& error) {
    co_return error.what();
  }
  co_return "no timeout";
}

TEST(WithTimeout, WhenTheDeadlinePassesFirstTheTaskIsCancelledByTheTimer) {
  thread_pool pool(2);
  const auto graph = record([&] { EXPECT_EQ(sync_wait(bounded_sleep(pool).named("caller")), "timed out"); });
  EXPECT_EQ(describe_tasks(graph), (Lines{
                                       "sync_wait: ok by self",
                                       "caller: ok by self",
                                       "chronicle::with_timeout: failed \"timed out\" by self",
                                       "timeout: ok by self",
                                       "slow: cancelled \"cancelled\" by timeout",
                                       "thread_pool.sleep_for: cancelled by -",
                                   }));
  EXPECT_EQ(describe_edges(graph), (Lines{
                                       "sync_wait waits-on caller",
                                       "slow created-by caller",
                                       "chronicle::with_timeout created-by caller",
                                       "caller waits-on chronicle::with_timeout",
                                       "timeout created-by chronicle::with_timeout",
                                       "chronicle::with_timeout waits-on timeout",
                                       "chronicle::with_timeout waits-on slow",
                                       "slow resolved-by timeout",
                                       "thread_pool.sleep_for created-by slow",
                                       "slow waits-on thread_pool.sleep_for",
                                   }));
}

task<int> quick_within_a_minute(thread_pool& pool) {
  co_return co_await with_timeout(value_on_pool(pool, 5).named("quick"), 60s);
}

TEST(WithTimeout, WhenTheTaskEndsFirstTheTimerIsCancelled) {
  thread_pool pool(2);
  const auto graph = record([&] { EXPECT_EQ(sync_wait(quick_within_a_minute(pool).named("caller")), 5); });
  EXPECT_EQ(describe_tasks(graph), (Lines{
                                       "sync_wait: ok by self",
                                       "caller: ok by self",
                                       "chronicle::with_timeout: ok by self",
                                       "timeout: cancelled by chronicle::with_timeout",
                                       "quick: ok by self",
                                       "thread_pool.schedule: ok by -",
                                   }));
  EXPECT_EQ(describe_edges(graph), (Lines{
                                       "sync_wait waits-on caller",
                                       "quick created-by caller",
                                       "chronicle::with_timeout created-by caller",
                                       "caller waits-on chronicle::with_timeout",
                                       "timeout created-by chronicle::with_timeout",
                                       "chronicle::with_timeout waits-on timeout",
                                       "chronicle::with_timeout waits-on quick",
                                       "timeout resolved-by chronicle::with_timeout",
                                       "thread_pool.schedule created-by quick",
                                       "quick waits-on thread_pool.schedule",
                                   }));
}

task<std::string> bounded_fan_out(thread_pool& pool) {
  try {
    co_await with_timeout(when_all(sleep_forever(pool).named("a"), sleep_forever(pool).named("b")), 10ms);
  } catch (const timeout_error& error) {
    co_return error.what();
  }
  co_return "no timeout";
}

TEST(WithTimeout, ACancelledCombinatorCancelsTheTasksItStarted) {
  thread_pool pool(2);
  const auto graph = record([&] { EXPECT_EQ(sync_wait(bounded_fan_out(pool).named("caller")), "timed out"); });
  EXPECT_EQ(describe_tasks(graph), (Lines{
                                       "sync_wait: ok by self",
                                       "caller: ok by self",
                                       "chronicle::with_timeout: failed \"timed out\" by self",
                                       "timeout: ok by self",
                                       "chronicle::when_all: cancelled \"cancelled\" by timeout",
                                       "a: cancelled \"cancelled\" by chronicle::when_all",
                                       "b: cancelled \"cancelled\" by chronicle::when_all",
                                       "thread_pool.sleep_for: cancelled by -",
                                       "thread_pool.sleep_for: cancelled by -",
                                   }));
  EXPECT_EQ(describe_edges(graph), (Lines{
                                       "sync_wait waits-on caller",
                                       "a created-by caller",
                                       "b created-by caller",
                                       "chronicle::when_all created-by caller",
                                       "chronicle::with_timeout created-by caller",
                                       "caller waits-on chronicle::with_timeout",
                                       "timeout created-by chronicle::with_timeout",
                                       "chronicle::with_timeout waits-on timeout",
                                       "chronicle::with_timeout waits-on chronicle::when_all",
                                       "chronicle::when_all waits-on a",
                                       "chronicle::when_all waits-on b",
                                       "chronicle::when_all resolved-by timeout",
                                       "a resolved-by chronicle::when_all",
                                       "b resolved-by chronicle::when_all",
                                       "thread_pool.sleep_for created-by a",
                                       "thread_pool.sleep_for created-by b",
                                       "a waits-on thread_pool.sleep_for",
                                       "b waits-on thread_pool.sleep_for",
                                   }));
}

// --- async_scope -------------------------------------------------------------------------------

task<void> spawn_and_join(thread_pool& pool) {
  async_scope scope;
  for (int i = 0; i < 3; ++i) scope.spawn(value_on_pool(pool, i).named("spawned"));
  co_await scope.join();
}

TEST(AsyncScope, JoinWaitsForEverySpawnedTask) {
  thread_pool pool(2);
  const auto graph = record([&] { sync_wait(spawn_and_join(pool).named("joiner")); });
  EXPECT_EQ(describe_tasks(graph), (Lines{
                                       "sync_wait: ok by self",
                                       "joiner: ok by self",
                                       "spawned: ok by self",
                                       "spawned: ok by self",
                                       "spawned: ok by self",
                                       "thread_pool.schedule: ok by -",
                                       "thread_pool.schedule: ok by -",
                                       "thread_pool.schedule: ok by -",
                                   }));
  EXPECT_EQ(describe_edges(graph), (Lines{
                                       "sync_wait waits-on joiner",
                                       "spawned created-by joiner",
                                       "spawned created-by joiner",
                                       "spawned created-by joiner",
                                       "joiner waits-on spawned",
                                       "joiner waits-on spawned",
                                       "joiner waits-on spawned",
                                       "thread_pool.schedule created-by spawned",
                                       "thread_pool.schedule created-by spawned",
                                       "thread_pool.schedule created-by spawned",
                                       "spawned waits-on thread_pool.schedule",
                                       "spawned waits-on thread_pool.schedule",
                                       "spawned waits-on thread_pool.schedule",
                                   }));
  // The joiner ends after every spawned task.
  uint64_t joiner_end = 0;
  for (const model::Task& task : graph.tasks())
    if (task.display_name() == "joiner") joiner_end = *task.resolved;
  for (const model::Task& task : graph.tasks()) {
    if (task.display_name() == "spawned") {
      EXPECT_LE(*task.resolved, joiner_end);
    }
  }
}

task<std::string> spawn_one_failing(thread_pool& pool) {
  async_scope scope;
  scope.spawn(sleep_forever(pool).named("sleeper"));
  scope.spawn(fail_on_pool(pool).named("failing"));
  try {
    co_await scope.join();
  } catch (const std::runtime_error& error) {
    co_return error.what();
  }
  co_return "no failure";
}

TEST(AsyncScope, AFailureCancelsTheOtherTasksAndJoinRethrowsIt) {
  thread_pool pool(2);
  const auto graph = record([&] { EXPECT_EQ(sync_wait(spawn_one_failing(pool).named("joiner")), "disk on fire"); });
  EXPECT_EQ(describe_tasks(graph), (Lines{
                                       "sync_wait: ok by self",
                                       "joiner: ok by self",
                                       "sleeper: cancelled \"cancelled\" by failing",
                                       "failing: failed \"disk on fire\" by self",
                                       "thread_pool.schedule: ok by -",
                                       "thread_pool.sleep_for: cancelled by -",
                                   }));
  EXPECT_EQ(describe_edges(graph), (Lines{
                                       "sync_wait waits-on joiner",
                                       "sleeper created-by joiner",
                                       "failing created-by joiner",
                                       "joiner waits-on sleeper",
                                       "joiner waits-on failing",
                                       "sleeper resolved-by failing",
                                       "thread_pool.schedule created-by failing",
                                       "failing waits-on thread_pool.schedule",
                                       "thread_pool.sleep_for created-by sleeper",
                                       "sleeper waits-on thread_pool.sleep_for",
                                   }));
}

TEST(AsyncScope, ATaskOutlivingItsScopeIsReportedAndCancelled) {
  std::string warnings;
  const auto graph = record([&] {
    thread_pool pool(1);
    testing::internal::CaptureStderr();
    {
      async_scope scope;
      scope.spawn(sleep_forever(pool).named("leaked"));
    }
    warnings = testing::internal::GetCapturedStderr();
  });  // the pool, destroyed here, runs the cancelled task to its end
  // The line is printed once per process (so --gtest_repeat sees it only the first time).
  static bool first_run = true;
  if (std::exchange(first_run, false)) {
    EXPECT_NE(warnings.find("1 task(s) outlived their async_scope"), std::string::npos) << warnings;
  }
  EXPECT_EQ(describe_tasks(graph), (Lines{
                                       "leaked: cancelled \"cancelled\" by async_scope outlived",
                                       "async_scope outlived: failed \"1 task(s) outlived their async_scope\" by self",
                                       "thread_pool.sleep_for: cancelled by -",
                                   }));
  EXPECT_EQ(describe_edges(graph), (Lines{
                                       "async_scope outlived waits-on leaked",
                                       "leaked resolved-by async_scope outlived",
                                       "thread_pool.sleep_for created-by leaked",
                                       "leaked waits-on thread_pool.sleep_for",
                                   }));
}

// --- every combinator in one trace -------------------------------------------------------------

task<int> everything(thread_pool& pool) {
  int total = co_await fan_out(pool);
  total += (co_await fan_out_with_failure(pool)).size();
  total += co_await fan_out_vector(pool);
  total += co_await race(pool);
  total += (co_await bounded_sleep(pool)).size();
  total += co_await quick_within_a_minute(pool);
  co_await spawn_and_join(pool);
  total += (co_await spawn_one_failing(pool)).size();
  co_return total;
}

TEST(Combinators, ATraceUsingEachResolvesEveryTaskExactlyOnce) {
  thread_pool pool(3);
  const auto graph = record([&] { EXPECT_EQ(sync_wait(everything(pool)), 3 + 12 + 6 + 7 + 9 + 5 + 12); });
  EXPECT_EQ(graph.tasks().size(), 55u);  // 37, and the 18 hops and sleeps
  for (const model::Task& task : graph.tasks()) {
    SCOPED_TRACE(task.display_name());
    EXPECT_TRUE(task.seen_created);
    EXPECT_TRUE(task.resolved.has_value());
  }
  // record() failed the test for any problem, "task ... is resolved again" included.
}

TEST(Combinators, BehaveTheSameWithoutASession) {
  ASSERT_FALSE(active());
  thread_pool pool(2);
  EXPECT_EQ(sync_wait(fan_out(pool)), 3);
  EXPECT_EQ(sync_wait(fan_out_with_failure(pool)), "disk on fire");
  EXPECT_EQ(sync_wait(race(pool)), 7);
  EXPECT_EQ(sync_wait(bounded_sleep(pool)), "timed out");
  EXPECT_EQ(sync_wait(bounded_fan_out(pool)), "timed out");
  EXPECT_EQ(sync_wait(quick_within_a_minute(pool)), 5);
  EXPECT_EQ(sync_wait(spawn_one_failing(pool)), "disk on fire");
}

// --- cancellation by hand ------------------------------------------------------------------------

task<bool> sees_its_stop_token() {
  const std::stop_token token = co_await current_stop_token();
  co_return token.stop_possible();
}

TEST(Cancellation, ATaskStartedByACombinatorHasAStopToken) {
  auto [alone] = sync_wait(when_all(sees_its_stop_token()));
  EXPECT_TRUE(alone);
  EXPECT_FALSE(sync_wait(sees_its_stop_token())) << "sync_wait gives no stop token";
}

}  // namespace
}  // namespace chronicle
