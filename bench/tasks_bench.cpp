// What the task layer costs: a co_await in chronicle::task<T> against the same await in a bare
// coroutine type with no trace points, and an Asio handler with and without the tracking
// header. Built twice: tasks_bench (Asio tracking on) and tasks_bench_untracked (plain Asio);
// compare the BM_AsioPost lines of the two. Figures: docs/performance-tasks.md.
#include <benchmark/benchmark.h>

#include <unistd.h>
#include <asio.hpp>
#include <atomic>
#include <chronicle/chronicle.hpp>
#include <chronicle/coro.hpp>
#include <coroutine>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include "scratch_shm.hpp"

namespace {

// A session that records into the flight recorder's rings in /dev/shm: the writer does all its
// work, and no collector thread competes for the machine's cores.
class Session {
 public:
  explicit Session(bool on) : on_(on) {
    if (!on) return;
    chronicle::Config config;
    config.mode = chronicle::Mode::flight;
    config.buffer_size = ring_bytes();
    if (!chronicle_bench::scratch_shm().path().empty()) config.shm_dir = chronicle_bench::scratch_shm().path();
    if (!chronicle::start(config)) throw std::runtime_error(chronicle::last_error());
    touch_ring(config.buffer_size);
  }
  ~Session() {
    chronicle::stop();
    if (on_) chronicle_bench::scratch_shm().empty();
  }

 private:
  // Each thread's ring: the size a user gets (Config's default) unless RING_MIB says otherwise.
  // The size matters: a ring larger than the core's L2 cache makes every line the loop writes a
  // miss (a 64 MiB ring cost a child task 6-10 ns more than the default 4 MiB on our Xeon VM).
  static size_t ring_bytes() {
    const char* mib = std::getenv("RING_MIB");
    return mib ? std::strtoull(mib, nullptr, 10) << 20 : chronicle::Config{}.buffer_size;
  }
  // Writes spans until this thread's flight ring has gone round once, so that its pages are first
  // touched here and not in the timed loop: on a VM a first touch costs microseconds, which the
  // loop would count against the events written into that page (16 bytes a span).
  static void touch_ring(size_t buffer_size) {
    for (size_t span = 0; span < buffer_size / 16 + 4096; ++span) {
      CHRONICLE_SPAN("bench", "touch");
      benchmark::ClobberMemory();
    }
  }

  bool on_;
};

// A thread that only waits for the end of the benchmark. A session starts one of its own (the
// control thread), and a process with a second thread is not the same to the C library: glibc's
// malloc takes its arena's lock in every call that misses the thread's cache, where a process of
// one thread skips it. The baselines with an idle thread have the thread census of a traced run,
// so that what tracing adds per handler is told apart from what a second thread does.
class IdleThread {
 public:
  explicit IdleThread(bool on) {
    if (on) thread_ = std::thread([this] { ended_.wait(false); });
  }
  ~IdleThread() {
    if (!thread_.joinable()) return;
    ended_ = true;
    ended_.notify_one();
    thread_.join();
  }

 private:
  std::atomic<bool> ended_{false};
  std::thread thread_;
};

// The baseline: a lazy task with the same shape as chronicle::task<int> (continuation, value,
// symmetric transfer) and nothing else.
template <typename T>
class bare_task {
 public:
  struct promise_type {
    std::coroutine_handle<> continuation;
    std::optional<T> value;
    std::exception_ptr error;
    bare_task get_return_object() { return bare_task(std::coroutine_handle<promise_type>::from_promise(*this)); }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct Final {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        return h.promise().continuation ? h.promise().continuation : std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    Final final_suspend() noexcept { return {}; }
    void return_value(T v) { value.emplace(v); }
    void unhandled_exception() { error = std::current_exception(); }
  };
  bare_task(bare_task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  ~bare_task() {
    if (handle_) handle_.destroy();
  }
  bool await_ready() { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) {
    handle_.promise().continuation = awaiting;
    return handle_;
  }
  T await_resume() {
    if (handle_.promise().error) std::rethrow_exception(handle_.promise().error);
    return *handle_.promise().value;
  }
  void start() { handle_.resume(); }
  T result() { return *handle_.promise().value; }

 private:
  explicit bare_task(std::coroutine_handle<promise_type> handle) : handle_(handle) {}
  std::coroutine_handle<promise_type> handle_;
};

// Suspends and is resumed at once (await_suspend returns false): a suspension point with no
// scheduler behind it, so what is measured is the await machinery and its trace points.
struct Yield {
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<>) const noexcept { return false; }
  void await_resume() const noexcept {}
};

constexpr int kAwaitsPerTask = 1000;

chronicle::task<int> traced_yields() {
  for (int i = 0; i < kAwaitsPerTask; ++i) co_await Yield{};
  co_return 1;
}

bare_task<int> bare_yields() {
  for (int i = 0; i < kAwaitsPerTask; ++i) co_await Yield{};
  co_return 1;
}

chronicle::task<int> traced_leaf(int value) {
  co_return value;
}
chronicle::task<int> traced_awaits_children() {
  int sum = 0;
  for (int i = 0; i < kAwaitsPerTask; ++i) sum += co_await traced_leaf(i);
  co_return sum;
}

bare_task<int> bare_leaf(int value) {
  co_return value;
}
bare_task<int> bare_awaits_children() {
  int sum = 0;
  for (int i = 0; i < kAwaitsPerTask; ++i) sum += co_await bare_leaf(i);
  co_return sum;
}

// One suspending co_await (run end + run begin when traced).
void BM_AwaitYield_Bare(benchmark::State& state) {
  for (auto _ : state) {
    auto task = bare_yields();
    task.start();
    benchmark::DoNotOptimize(task.result());
  }
  state.SetItemsProcessed(state.iterations() * kAwaitsPerTask);
}
void BM_AwaitYield_Chronicle(benchmark::State& state) {
  Session session(state.range(0) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(chronicle::sync_wait(traced_yields()));
  state.SetItemsProcessed(state.iterations() * kAwaitsPerTask);
}
BENCHMARK(BM_AwaitYield_Bare);
BENCHMARK(BM_AwaitYield_Chronicle)->ArgName("tracing")->Arg(0)->Arg(1);

// Creating a child task and awaiting it to its end (create, wait, run end/begin of the parent,
// run begin/end and resolve of the child when traced).
void BM_AwaitChildTask_Bare(benchmark::State& state) {
  const IdleThread idle(state.range(0) != 0);
  for (auto _ : state) {
    auto task = bare_awaits_children();
    task.start();
    benchmark::DoNotOptimize(task.result());
  }
  state.SetItemsProcessed(state.iterations() * kAwaitsPerTask);
}
void BM_AwaitChildTask_Chronicle(benchmark::State& state) {
  const IdleThread idle(state.range(1) != 0);
  Session session(state.range(0) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(chronicle::sync_wait(traced_awaits_children()));
  state.SetItemsProcessed(state.iterations() * kAwaitsPerTask);
}
BENCHMARK(BM_AwaitChildTask_Bare)->ArgName("idle_thread")->Arg(0)->Arg(1);
BENCHMARK(BM_AwaitChildTask_Chronicle)->ArgNames({"tracing", "idle_thread"})->Args({0, 0})->Args({0, 1})->Args({1, 0});

// when_all of two tasks that end at once, awaited kAwaitsPerTask times by one task: the
// combinator's own task and its two children (creations, waits, runs and resolutions when traced),
// against the same with tracing off. Both children run on the awaiting thread: the figure is the
// combinator's bookkeeping, not a pool's hand-off.
chronicle::task<int> traced_when_all_of_two() {
  int sum = 0;
  for (int i = 0; i < kAwaitsPerTask; ++i) {
    auto [first, second] = co_await chronicle::when_all(traced_leaf(i), traced_leaf(1));
    sum += first + second;
  }
  co_return sum;
}
void BM_WhenAllOfTwo_Chronicle(benchmark::State& state) {
  Session session(state.range(0) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(chronicle::sync_wait(traced_when_all_of_two()));
  state.SetItemsProcessed(state.iterations() * kAwaitsPerTask);
}
BENCHMARK(BM_WhenAllOfTwo_Chronicle)->ArgName("tracing")->Arg(0)->Arg(1);

// --- each combinator, traced over untraced (docs/performance.md, "Combinators and bridges") ---
// Every child ends at once on the awaiting thread, so each figure is the combinator's own work
// (its task, its children's starts, waits and resolutions, its allocations), not a pool's hand-off.

chronicle::task<int> traced_when_all_of_vector() {
  int sum = 0;
  for (int i = 0; i < kAwaitsPerTask; ++i) {
    std::vector<chronicle::task<int>> children;
    children.reserve(4);
    for (int child = 0; child < 4; ++child) children.push_back(traced_leaf(child));
    for (int value : co_await chronicle::when_all(std::move(children))) sum += value;
  }
  co_return sum;
}

chronicle::task<int> traced_when_any_of_two() {
  int sum = 0;
  for (int i = 0; i < kAwaitsPerTask; ++i) {
    auto [index, value] = co_await chronicle::when_any(traced_leaf(i), traced_leaf(1));
    sum += static_cast<int>(index) + value;
  }
  co_return sum;
}

// A deadline that never passes: the timer is armed and disarmed each time.
chronicle::task<int> traced_with_timeout() {
  int sum = 0;
  for (int i = 0; i < kAwaitsPerTask; ++i)
    sum += co_await chronicle::with_timeout(traced_leaf(i), std::chrono::hours(1));
  co_return sum;
}

chronicle::task<int> traced_spawn_and_join() {
  for (int i = 0; i < kAwaitsPerTask; ++i) {
    chronicle::async_scope scope;
    scope.spawn(traced_leaf(i));
    scope.spawn(traced_leaf(1));
    co_await scope.join();
  }
  co_return 1;
}

// A hop to a pool of one thread from that thread: the post, the queue and the resumption, with
// no thread woken (the worker finds the coroutine queued as it looks again).
chronicle::task<int> traced_hops(chronicle::thread_pool& pool) {
  co_await pool.schedule();
  for (int i = 0; i < kAwaitsPerTask; ++i) co_await pool.schedule();
  co_return 1;
}

template <typename Work>
void run_traced(benchmark::State& state, Work work) {
  Session session(state.range(0) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(chronicle::sync_wait(work()));
  state.SetItemsProcessed(state.iterations() * kAwaitsPerTask);
}
void BM_WhenAllOfVector_Chronicle(benchmark::State& state) {
  run_traced(state, traced_when_all_of_vector);
}
void BM_WhenAnyOfTwo_Chronicle(benchmark::State& state) {
  run_traced(state, traced_when_any_of_two);
}
void BM_WithTimeout_Chronicle(benchmark::State& state) {
  run_traced(state, traced_with_timeout);
}
void BM_ScopeSpawnJoin_Chronicle(benchmark::State& state) {
  run_traced(state, traced_spawn_and_join);
}
void BM_ScheduleHop_Chronicle(benchmark::State& state) {
  chronicle::thread_pool pool(1, "bench");
  run_traced(state, [&pool] { return traced_hops(pool); });
}
BENCHMARK(BM_WhenAllOfVector_Chronicle)->ArgName("tracing")->Arg(0)->Arg(1);
BENCHMARK(BM_WhenAnyOfTwo_Chronicle)->ArgName("tracing")->Arg(0)->Arg(1);
// The CPU of every thread: with_timeout's timer thread wakes as deadlines are armed, and the hops
// run on the pool's thread while the benchmark's thread waits in sync_wait.
BENCHMARK(BM_WithTimeout_Chronicle)->ArgName("tracing")->Arg(0)->Arg(1)->MeasureProcessCPUTime();
BENCHMARK(BM_ScopeSpawnJoin_Chronicle)->ArgName("tracing")->Arg(0)->Arg(1);
BENCHMARK(BM_ScheduleHop_Chronicle)->ArgName("tracing")->Arg(0)->Arg(1)->MeasureProcessCPUTime();

// A plain CHRONICLE_SPAN in flight mode, traced: the trace point the bridges must leave as it was
// (compare two builds with tasks_rounds.sh's BEFORE).
void BM_Span(benchmark::State& state) {
  Session session(true);
  constexpr int kSpans = 1000;
  for (auto _ : state)
    for (int i = 0; i < kSpans; ++i) {
      CHRONICLE_SPAN("bench", "span");
      benchmark::ClobberMemory();
    }
  state.SetItemsProcessed(state.iterations() * kSpans);
}
BENCHMARK(BM_Span);

// A posted handler run by io_context: with the tracking header, create + resolve + run
// begin/end when traced.
constexpr int kHandlersPerBatch = 1000;
void BM_AsioPost(benchmark::State& state) {
  const IdleThread idle(state.range(1) != 0);
  Session session(state.range(0) != 0);
  asio::io_context io(1);
  int64_t calls = 0;
  for (auto _ : state) {
    for (int i = 0; i < kHandlersPerBatch; ++i) asio::post(io, [&calls] { ++calls; });
    io.run();
    io.restart();
  }
  benchmark::DoNotOptimize(calls);
  state.SetItemsProcessed(state.iterations() * kHandlersPerBatch);
}
#ifdef ASIO_CUSTOM_HANDLER_TRACKING
BENCHMARK(BM_AsioPost)
    ->Name("BM_AsioPost_Tracked")
    ->ArgNames({"tracing", "idle_thread"})
    ->Args({0, 0})
    ->Args({0, 1})
    ->Args({1, 0});
#else
BENCHMARK(BM_AsioPost)->Name("BM_AsioPost_Untracked")->ArgNames({"tracing", "idle_thread"})->Args({0, 0})->Args({0, 1});
#endif

// A co_spawn of an asio::awaitable that co_awaits a nested awaitable suspending once on the
// executor (asio::post with use_awaitable): with the tracking header and a session, a coroutine
// task, its wait on the post's handler, its resumption, its end. Compare the
// BM_AsioCoSpawn lines of tasks_bench and tasks_bench_untracked.
asio::awaitable<void> hop_onto_executor() {
  co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
}
asio::awaitable<void> spawned_coroutine(int64_t& ended) {
  co_await hop_onto_executor();
  ++ended;
}

void BM_AsioCoSpawn(benchmark::State& state) {
  const IdleThread idle(state.range(1) != 0);
  Session session(state.range(0) != 0);
  asio::io_context io(1);
  int64_t ended = 0;
  for (auto _ : state) {
    for (int i = 0; i < kHandlersPerBatch; ++i) asio::co_spawn(io, spawned_coroutine(ended), asio::detached);
    io.run();
    io.restart();
  }
  if (ended != state.iterations() * kHandlersPerBatch) state.SkipWithError("a coroutine did not end");
  state.SetItemsProcessed(state.iterations() * kHandlersPerBatch);
}
#ifdef ASIO_CUSTOM_HANDLER_TRACKING
BENCHMARK(BM_AsioCoSpawn)
    ->Name("BM_AsioCoSpawn_Tracked")
    ->ArgNames({"tracing", "idle_thread"})
    ->Args({0, 0})
    ->Args({0, 1})
    ->Args({1, 0});
#else
BENCHMARK(BM_AsioCoSpawn)
    ->Name("BM_AsioCoSpawn_Untracked")
    ->ArgNames({"tracing", "idle_thread"})
    ->Args({0, 0})
    ->Args({0, 1});
#endif

// One read of the session's clock (the TSC where it is usable), back to back: the floor under
// each instant a task's events record. A child task's and an Asio handler's happen at three.
void BM_ClockRead(benchmark::State& state) {
  const Session session(true);
  constexpr int kReads = 1000;
  for (auto _ : state)
    for (int i = 0; i < kReads; ++i) benchmark::DoNotOptimize(chronicle::detail::read_ticks());
  state.SetItemsProcessed(state.iterations() * kReads);
}
BENCHMARK(BM_ClockRead);

}  // namespace

BENCHMARK_MAIN();
