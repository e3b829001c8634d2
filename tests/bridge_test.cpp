// Bridges out of a chronicle::task: work an awaitable starts in its await_suspend (an Asio post, an
// Asio timer, a hop to a thread_pool, a sleep, a user's own queue) is created by the awaiting
// task, which waits on it; the completion that resumes the task resolves that work. And the
// critical path calls the time in between by its name: `queued` in a pool's queue, `waiting` on a
// timer. Recorded in-process; nothing here asserts a duration.
#include <gtest/gtest.h>

#include <asio.hpp>
#include <chronicle/chronicle.hpp>
#include <chronicle/context.hpp>
#include <chronicle/coro.hpp>
#include <condition_variable>
#include <coroutine>
#include <deque>
#include <functional>
#include <latch>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "analysis/critical_path.hpp"
#include "model/task_graph.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using namespace std::chrono_literals;
using test::TemporaryDirectory;
using Lines = std::multiset<std::string>;

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
  for (const std::string& problem : graph.problems()) ADD_FAILURE() << problem;
  return graph;
}

const model::Task& only_task_named(const model::TaskGraph& graph, const std::string& name) {
  const model::Task* found = nullptr;
  for (const model::Task& task : graph.tasks()) {
    if (task.display_name() != name) continue;
    EXPECT_EQ(found, nullptr) << "two tasks named " << name;
    found = &task;
  }
  if (!found) throw std::runtime_error("no task named " + name);
  return *found;
}

std::string name_of(const model::TaskGraph& graph, TaskId id) {
  const model::Task* task = graph.find(id);
  return task ? task->display_name() : "-";
}

// "created-by X", "waits-on X" for the edges from `task`; "resolved-by X" for the edges to it.
Lines edges_of(const model::TaskGraph& graph, const model::Task& task) {
  Lines lines;
  for (const model::Edge& edge : graph.edges()) {
    if (edge.from == task.id && edge.kind != model::EdgeKind::resolved_by)
      lines.insert(std::string(model::edge_kind_name(edge.kind)) + " " + name_of(graph, edge.to));
    if (edge.to == task.id && edge.kind == model::EdgeKind::created_by)
      lines.insert("creates " + name_of(graph, edge.from));
  }
  return lines;
}

// "task: state" for each step of the path, consecutive repeats collapsed.
std::vector<std::string> path_states(const model::TaskGraph& graph, const analysis::CriticalPath& path) {
  std::vector<std::string> states;
  for (const analysis::CriticalStep& step : path.steps) {
    if (step.from == step.to) continue;  // an instant (a resolution) says no state
    std::string line = name_of(graph, step.task) + ": " + std::string(analysis::step_state_name(step.state));
    if (states.empty() || states.back() != line) states.push_back(line);
  }
  return states;
}

bool says_suspended_between_runs(const analysis::CriticalPath& path) {
  for (const analysis::CriticalStep& step : path.steps)
    if (step.what.find("suspended between runs") != std::string::npos) return true;
  return false;
}

// An io_context run by a thread of its own for the test.
class IoThread {
 public:
  IoThread() : thread_([this] { io.run(); }) {}
  ~IoThread() {
    guard_.reset();
    thread_.join();
  }
  asio::io_context io;

 private:
  asio::executor_work_guard<asio::io_context::executor_type> guard_ = asio::make_work_guard(io);
  std::thread thread_;
};

// --- item 3: Asio work started in await_suspend ------------------------------------------------

// The usual bridges to Asio, written as a user writes them: post the coroutine's resumption,
// resume it from a timer's completion.
struct ResumeOnIoContext {
  asio::io_context& io;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> coroutine) const {
    asio::post(io, [coroutine] { coroutine.resume(); });
  }
  void await_resume() const noexcept {}
};

struct ResumeAfterTimer {
  asio::steady_timer& timer;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> coroutine) const {
    timer.expires_after(1ms);
    timer.async_wait([coroutine](const std::error_code&) { coroutine.resume(); });
  }
  void await_resume() const noexcept {}
};

task<void> through_asio(thread_pool& pool, asio::io_context& io) {
  co_await pool.schedule();  // on a pool thread no other task is current
  co_await ResumeOnIoContext{io};
  asio::steady_timer timer(io);
  co_await ResumeAfterTimer{timer};
}

TEST(Bridge, AsioWorkStartedInAwaitSuspendIsTheAwaitingTasksAndItWaitsOnIt) {
  const auto graph = record([&] {
    IoThread io;  // joined before the session stops: the last handler's run ends in the trace
    // Made after the io_context and so joined before it goes: a pool thread may still be inside
    // post() (signalling the io_context's condition variable) when the coroutine is done.
    thread_pool pool(1);
    sync_wait(through_asio(pool, io.io).named("bridged"));
  });
  const model::Task& bridged = only_task_named(graph, "bridged");
  EXPECT_EQ(edges_of(graph, bridged), (Lines{
                                          "creates thread_pool.schedule",
                                          "waits-on thread_pool.schedule",
                                          "creates io_context.execute",
                                          "waits-on io_context.execute",
                                          "creates deadline_timer.async_wait",
                                          "waits-on deadline_timer.async_wait",
                                      }));
  // Each completion is resolved as it runs, and resumed the task there.
  for (const char* name : {"io_context.execute", "deadline_timer.async_wait"}) {
    const model::Task& completion = only_task_named(graph, name);
    ASSERT_TRUE(completion.resolved.has_value()) << name;
    EXPECT_EQ(completion.outcome, format::TaskOutcome::ok) << name;
  }
  // The critical path goes through them: the post was queued on the io_context, the timer waited.
  const analysis::CriticalPath path = analysis::critical_path(graph, bridged.id);
  const std::vector<std::string> states = path_states(graph, path);
  const auto has = [&](const std::string& line) {
    return std::find(states.begin(), states.end(), line) != states.end();
  };
  EXPECT_TRUE(has("io_context.execute: queued")) << testing::PrintToString(states);
  EXPECT_TRUE(has("deadline_timer.async_wait: waiting")) << testing::PrintToString(states);
  EXPECT_FALSE(says_suspended_between_runs(path)) << testing::PrintToString(states);
}

// The trace context goes with the work too: a handler posted in await_suspend continues the
// awaiting coroutine's trace, with a session and with none (contexts propagate regardless).
task<TraceContext> context_seen_by_a_posted_handler(thread_pool& pool, asio::io_context& io) {
  co_await pool.schedule();  // nothing is in scope on a pool thread but the coroutine's own
  TraceContext seen;
  struct PostAndLook {
    asio::io_context& io;
    TraceContext& seen;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> coroutine) const {
      asio::post(io, [coroutine, &seen = seen] {
        seen = current_context();
        coroutine.resume();
      });
    }
    void await_resume() const noexcept {}
  };
  co_await PostAndLook{io, seen};
  co_return seen;
}

TEST(Bridge, AHandlerPostedInAwaitSuspendContinuesTheCoroutinesTrace) {
  const TraceContext request = TraceContext::new_trace();
  IoThread io;
  thread_pool pool(1);  // joined first: a pool thread may still be inside post() to `io`
  task<TraceContext> work = [&] {
    ReceiveScope scope(request.traceparent());  // the coroutine is made inside the request's trace
    return context_seen_by_a_posted_handler(pool, io.io);
  }();
  const TraceContext seen = sync_wait(std::move(work));
  EXPECT_TRUE(seen.valid()) << "the handler ran with no context";
  EXPECT_EQ(seen.trace_id, request.trace_id);
}

// --- a user's own executor: chronicle::resumption ----------------------------------------------

// An executor chronicle knows nothing of: a thread that runs the functions it is given.
class OwnLoop {
 public:
  OwnLoop() : thread_([this] { run(); }) {}
  ~OwnLoop() {
    push({});
    thread_.join();
  }
  void push(std::function<void()> work) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(work));
    }
    ready_.notify_one();
  }

 private:
  void run() {
    while (true) {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return !queue_.empty(); });
      std::function<void()> work = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      if (!work) return;
      work();
    }
  }
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  std::thread thread_;
};

struct ResumeOnOwnLoop {
  OwnLoop& loop;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> coroutine) const { loop.push(resumption(coroutine, "own loop")); }
  void await_resume() const noexcept {}
};

task<int> through_own_loop(OwnLoop& loop) {
  co_await ResumeOnOwnLoop{loop};
  co_return 1;
}

TEST(Bridge, AResumptionIsTheAwaitingTasksWorkAndItsCallResolvesIt) {
  const auto graph = record([&] {
    OwnLoop loop;
    EXPECT_EQ(sync_wait(through_own_loop(loop).named("user")), 1);
  });
  const model::Task& user = only_task_named(graph, "user");
  EXPECT_EQ(edges_of(graph, user), (Lines{"creates own loop", "waits-on own loop"}));
  const model::Task& resumed = only_task_named(graph, "own loop");
  EXPECT_EQ(resumed.kind, format::TaskKind::handler);
  ASSERT_TRUE(resumed.resolved.has_value());
  ASSERT_EQ(user.runs.size(), 2u);
  EXPECT_EQ(*resumed.created, user.runs[0].end) << "made at the instant the awaiting task's run ended";
  EXPECT_LE(*resumed.resolved, user.runs[1].begin) << "resolved as it resumed the task";
  const analysis::CriticalPath path = analysis::critical_path(graph, user.id);
  const std::vector<std::string> states = path_states(graph, path);
  EXPECT_NE(std::find(states.begin(), states.end(), "own loop: queued"), states.end())
      << testing::PrintToString(states);
  EXPECT_FALSE(says_suspended_between_runs(path)) << testing::PrintToString(states);
}

TEST(Bridge, WithoutASessionAResumptionOnlyResumes) {
  ASSERT_FALSE(active());
  OwnLoop loop;
  EXPECT_EQ(sync_wait(through_own_loop(loop)), 1);
  std::coroutine_handle<> none = std::noop_coroutine();
  EXPECT_EQ(resumption(none).id(), 0u);
}

// --- item 4: a hop to a busy pool is queued, a sleep waits on its timer -------------------------

// Releases `posted` once the inner awaiter has queued the coroutine: the pool's only thread, held
// until then, takes the hop only after it was posted, so the hop always spends time in the queue.
template <typename Inner>
struct ReleaseAfterPost {
  Inner inner;
  std::latch& posted;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> coroutine) {
    std::latch& release = posted;  // the frame holding this awaiter may be gone after the post
    inner.await_suspend(coroutine);
    release.count_down();
  }
  void await_resume() {}
};

task<void> hold_the_pool(thread_pool& pool, std::latch& holding, std::latch& posted) {
  co_await pool.schedule();
  holding.count_down();
  posted.wait();
}

task<void> hop(thread_pool& pool, std::latch& posted) {
  co_await ReleaseAfterPost<thread_pool::ScheduleAwaiter>{pool.schedule(), posted};
}

// Whether the steps of `path` cover [from, to] in `state` only.
bool covered_only_in(const analysis::CriticalPath& path, analysis::StepState state, uint64_t from, uint64_t to) {
  uint64_t covered = 0;
  for (const analysis::CriticalStep& step : path.steps) {
    const uint64_t begin = std::max(step.from, from), end = std::min(step.to, to);
    if (end <= begin) continue;
    if (step.state != state) return false;
    covered += end - begin;
  }
  return covered == to - from;
}

TEST(Bridge, AHopToABusyPoolIsQueuedOnTheCriticalPath) {
  thread_pool pool(1);
  std::latch holding(1), posted(1);
  const auto graph = record([&] {
    std::thread holder([&] { sync_wait(hold_the_pool(pool, holding, posted).named("holder")); });
    holding.wait();  // the pool's only thread is held
    sync_wait(hop(pool, posted).named("hop"));
    holder.join();
  });
  const model::Task& hopping = only_task_named(graph, "hop");
  ASSERT_EQ(hopping.runs.size(), 2u);
  const uint64_t posted_at = hopping.runs[0].end, ran_at = hopping.runs[1].begin;
  ASSERT_LT(posted_at, ran_at);
  const analysis::CriticalPath path = analysis::critical_path(graph, hopping.id);
  const std::vector<std::string> states = path_states(graph, path);
  EXPECT_TRUE(covered_only_in(path, analysis::StepState::queued, posted_at, ran_at))
      << "the time in the pool's queue is queued: " << testing::PrintToString(states);
  EXPECT_NE(std::find(states.begin(), states.end(), "thread_pool.schedule: queued"), states.end())
      << testing::PrintToString(states);
  EXPECT_FALSE(says_suspended_between_runs(path)) << testing::PrintToString(states);
  uint64_t total = 0;
  for (const analysis::CriticalStep& step : path.steps) total += step.to - step.from;
  EXPECT_EQ(total, path.end - path.start) << "the steps add up to the path";
}

task<void> nap(thread_pool& pool) {
  co_await pool.schedule();
  co_await pool.sleep_for(1ms);
}

TEST(Bridge, ASleepWaitsOnItsNamedTimerOnTheCriticalPath) {
  thread_pool pool(1);
  const auto graph = record([&] { sync_wait(nap(pool).named("nap")); });
  const model::Task& napping = only_task_named(graph, "nap");
  EXPECT_EQ(edges_of(graph, napping), (Lines{
                                          "creates thread_pool.schedule",
                                          "waits-on thread_pool.schedule",
                                          "creates thread_pool.sleep_for",
                                          "waits-on thread_pool.sleep_for",
                                      }));
  const model::Task& timer = only_task_named(graph, "thread_pool.sleep_for");
  EXPECT_EQ(timer.kind, format::TaskKind::timer);
  EXPECT_EQ(timer.outcome, format::TaskOutcome::ok);
  const analysis::CriticalPath path = analysis::critical_path(graph, napping.id);
  const std::vector<std::string> states = path_states(graph, path);
  // The timer is on the path when it fired after the coroutine began to wait for it; a slow run
  // (TSan) can fire it first, and then the coroutine's own wait to be resumed decides.
  uint64_t wait_began = 0;
  for (const model::Edge& edge : graph.edges())
    if (edge.kind == model::EdgeKind::waits_on && edge.from == napping.id && edge.to == timer.id)
      wait_began = edge.ticks;
  ASSERT_NE(wait_began, 0u);
  ASSERT_TRUE(timer.resolved.has_value());
  if (*timer.resolved > wait_began) {
    EXPECT_NE(std::find(states.begin(), states.end(), "thread_pool.sleep_for: waiting"), states.end())
        << testing::PrintToString(states);
  }
  EXPECT_FALSE(says_suspended_between_runs(path)) << testing::PrintToString(states);
}

task<void> naps(thread_pool& pool, int count) {
  co_await pool.schedule();
  for (int i = 0; i < count; ++i) co_await pool.sleep_for(0ns);
}

// A sleep whose timer fires while the sleeper is still arming it does not suspend the sleeper,
// which goes on at once: the timer's end must be recorded before that, or the trace shows the
// sleeper going on while its timer still runs (and the critical path says the sleep was released
// before it finished). Deadlines already passed make the timer thread fire at once, racing the
// arming; each sleep's end must come before the sleeper's next step (its next run, its next
// wait, or its end).
TEST(Bridge, ASleeperNeverGoesOnBeforeItsTimersEndIsRecorded) {
  thread_pool pool(1);
  constexpr int kSleeps = 300;
  const auto graph = record([&] { sync_wait(naps(pool, kSleeps).named("naps")); });
  const model::Task& napper = only_task_named(graph, "naps");
  ASSERT_TRUE(napper.resolved.has_value());
  std::vector<uint64_t> waits;
  std::vector<const model::Task*> timers;
  for (const model::Edge& edge : graph.edges()) {
    const model::Task* awaited = graph.find(edge.to);
    if (edge.kind != model::EdgeKind::waits_on || edge.from != napper.id || !awaited ||
        awaited->kind != format::TaskKind::timer)
      continue;
    waits.push_back(edge.ticks);
    timers.push_back(awaited);
  }
  ASSERT_EQ(waits.size(), static_cast<size_t>(kSleeps));
  int early = 0;
  for (size_t i = 0; i < waits.size(); ++i) {
    uint64_t next_step = i + 1 < waits.size() ? waits[i + 1] : *napper.resolved;
    for (const model::RunInterval& run : napper.runs)
      if (run.begin >= waits[i]) next_step = std::min(next_step, run.begin);
    ASSERT_TRUE(timers[i]->resolved.has_value());
    early += *timers[i]->resolved > next_step;
  }
  EXPECT_EQ(early, 0) << "sleeps whose sleeper went on before their timer's end was recorded, of " << kSleeps;
}

}  // namespace
}  // namespace chronicle
