// A trace point never harms the program, and every event is either in the trace or counted as
// lost: nested events from signal handlers, thread churn past max_threads, thread_local
// destructors that trace after the thread's exit hook, sessions started and stopped while
// other threads trace, and many start/stop cycles.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chronicle/chronicle.hpp>
#include <chronicle/task.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "collector/collector.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using test::TemporaryDirectory;

using test::test_config;

size_t count_named(const reader::Trace& trace, const std::string& name) {
  size_t count = 0;
  trace.for_each_event([&](const reader::Event& event) {
    const auto* site = trace.site(event.name_id);
    if (site && site->name == name) ++count;
    return true;
  });
  return count;
}

// ---- signals --------------------------------------------------------------------------------

std::atomic<uint64_t> g_handler_calls{0};

void trace_from_handler(int) {
  CHRONICLE_INSTANT("signal", "tick");
  g_handler_calls.fetch_add(1, std::memory_order_relaxed);
}

// A CPU-time timer that interrupts this thread (and no other) every `interval_ns`.
timer_t start_thread_timer(long interval_ns) {
  sigevent event{};
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = SIGPROF;
  event._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
  timer_t timer{};
  EXPECT_EQ(timer_create(CLOCK_THREAD_CPUTIME_ID, &event, &timer), 0);
  itimerspec period{{0, interval_ns}, {0, interval_ns}};
  EXPECT_EQ(timer_settime(timer, 0, &period, nullptr), 0);
  return timer;
}

TEST(Signals, AHandlerThatInterruptsATracePointNeverTearsTheStream) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  config.max_threads = 4;
  config.buffer_size = size_t{64} << 20;  // every counter fits: only nesting can lose events
  config.packet_size = size_t{64} << 10;
  ASSERT_TRUE(start(config)) << last_error();
  struct sigaction action {};
  action.sa_handler = trace_from_handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  struct sigaction previous {};
  ASSERT_EQ(sigaction(SIGPROF, &action, &previous), 0);
  g_handler_calls = 0;
  // The handler's site and this thread are used once outside the handler: the first use of
  // each takes a lock and allocates (docs/guarantees.md, "Async-signal safety").
  trace_from_handler(0);

  constexpr int64_t kAtLeast = 1'000'000;
  constexpr int64_t kLimit = 3'000'000;  // what the buffer holds
  int64_t written = 0;
  timer_t timer = start_thread_timer(50'000);
  while (written < kLimit && (written < kAtLeast || g_handler_calls.load(std::memory_order_relaxed) < 100)) {
    CHRONICLE_COUNTER("signal", "sequence", written);
    ++written;
  }
  timer_delete(timer);
  sigaction(SIGPROF, &previous, nullptr);
  const uint64_t calls = g_handler_calls.load();
  stop();
  ASSERT_GE(calls, 1u) << "the timer never fired";

  reader::Trace trace(config.output);
  int64_t expected = 0;
  size_t instants = 0;
  trace.for_each_event([&](const reader::Event& event) {
    if (event.type == format::EventId::counter) {
      EXPECT_EQ(event.value, expected) << "counter out of order";
      expected = event.value + 1;
    } else if (event.type == format::EventId::instant) {
      ++instants;
    }
    return true;
  });
  EXPECT_EQ(expected, written) << "every counter is read back";
  EXPECT_EQ(instants + trace.events_discarded(), calls) << "instants read + discarded = handler calls";
}

// ---- thread churn ---------------------------------------------------------------------------

void ten_events() {
  for (int i = 0; i < 10; ++i) CHRONICLE_INSTANT("churn", "work");
}

TEST(ThreadChurn, AThousandShortLivedThreadsAreAllReadBackWithTheDefaults) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  for (int i = 0; i < 1000; ++i) std::thread(ten_events).join();
  stop();
  reader::Trace trace(config.output);
  EXPECT_EQ(count_named(trace, "work"), 10'000u);
  EXPECT_EQ(trace.events_discarded(), 0u);
}

TEST(ThreadChurn, WithTwoChannelsSequentialThreadsReuseThem) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  config.max_threads = 2;
  config.buffer_size = 64 << 10;
  config.packet_size = 4 << 10;
  ASSERT_TRUE(start(config)) << last_error();
  for (int i = 0; i < 1000; ++i) std::thread(ten_events).join();
  stop();
  reader::Trace trace(config.output);
  const uint64_t read = count_named(trace, "work");
  // Each thread fills one packet; two rings of 16 slots hold 32 threads' events even if the
  // collector never ran, where two channels used once would hold 2.
  EXPECT_GE(read, 320u);
  EXPECT_EQ(read + trace.events_discarded(), 10'000u);  // with the events of threads with no channel
}

TEST(ThreadChurn, ThreadsBeyondMaxThreadsAreCountedAsLost) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  config.max_threads = 2;
  config.buffer_size = 64 << 10;
  config.packet_size = 4 << 10;
  config.keep_shm = true;
  ASSERT_TRUE(start(config)) << last_error();
  const std::string shm = shm_path();
  constexpr int kThreads = 6;
  std::barrier all_attached(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      CHRONICLE_INSTANT("churn", "work");  // attaches, or finds no channel
      all_attached.arrive_and_wait();      // so that all six live at once
      for (int i = 1; i < 10; ++i) CHRONICLE_INSTANT("churn", "work");
    });
  for (auto& thread : threads) thread.join();
  stop();
  reader::Trace trace(config.output);
  collector::SessionMapping mapping(shm);
  const uint64_t read = count_named(trace, "work");
  // events_discarded() includes the events of threads with no channel.
  const uint64_t lost = trace.events_discarded();
  EXPECT_EQ(trace.description().losses.events_no_channel, mapping.header().events_no_channel.load());
  EXPECT_EQ(read + lost, uint64_t{kThreads} * 10);
  // Threads that found no channel take one released by a thread that ended, so only their
  // first events are certain to be lost.
  EXPECT_GE(lost, 4u) << "four threads had no channel while all six lived";
  ::unlink(shm.c_str());
}

// ---- lifecycle ------------------------------------------------------------------------------

struct TracesWhenDestroyed {
  ~TracesWhenDestroyed() { CHRONICLE_INSTANT("lifecycle", "destructor"); }
};

// The control thread writes the session's own counters on a channel of its own: a program using
// all max_threads rings loses nothing to it.
// The sampler's thread writes on a channel kept for it too, and start() returns with the sampler
// on; stop() ends it (its last round written) before the session retires.
TEST(ThreadChurn, TheSamplerTakesNoRingFromTheProgram) {
  SKIP_WITHOUT_PERF_EVENTS();
  TemporaryDirectory directory;
  Config config = test::test_config(directory);
  config.max_threads = 1;
  config.sample_frequency = 999;
  config.context_switches = true;
  ASSERT_TRUE(start(config)) << last_error();
  for (int i = 0; i < 101; ++i) {
    CHRONICLE_INSTANT("t", "more");
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // a context switch each
  }
  stop();

  reader::Trace trace(config.output);
  EXPECT_EQ(trace.description().losses.events_no_channel, 0u);
  EXPECT_EQ(trace.events_discarded(), 0u);
  size_t program_events = 0, my_switches = 0;
  const uint32_t me = static_cast<uint32_t>(syscall(SYS_gettid));
  trace.for_each_event([&](const reader::Event& event) {
    const reader::Site* site = trace.site(event.name_id);
    if (event.type == format::EventId::instant && site && site->category == "t") ++program_events;
    if (event.type == format::EventId::cpu_switch && event.sampled_tid == me) ++my_switches;
    return true;
  });
  EXPECT_EQ(program_events, 101u);
  EXPECT_GE(my_switches, 2 * 101u) << "each sleep leaves the CPU and comes back";
}

TEST(ThreadChurn, TheSessionsOwnCountersTakeNoRingFromTheProgram) {
  TemporaryDirectory directory;
  Config config = test::test_config(directory);
  config.max_threads = 1;
  config.self_stats_interval = std::chrono::milliseconds(5);
  ASSERT_TRUE(start(config)) << last_error();
  // The control thread takes its ring first; then this thread asks for the one max_threads allows.
  collector::SessionMapping mapping(shm_path());
  auto control_wrote = [&] {
    for (const auto& category : mapping.categories())
      if (category.name == "chronicle" && category.events > 0) return true;
    return false;
  };
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!control_wrote() && std::chrono::steady_clock::now() < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(control_wrote()) << "no sample of the session's own counters in 30 s";
  for (int i = 0; i < 101; ++i) CHRONICLE_INSTANT("t", "more");
  stop();

  reader::Trace trace(config.output);
  EXPECT_EQ(trace.description().losses.events_no_channel, 0u);
  EXPECT_EQ(trace.events_discarded(), 0u);
  size_t program_events = 0, own_counters = 0;
  trace.for_each_event([&](const reader::Event& event) {
    const reader::Site* site = trace.site(event.name_id);
    if (site && site->category == "t") ++program_events;
    if (site && site->category == "chronicle") ++own_counters;
    return true;
  });
  EXPECT_EQ(program_events, 101u);
  EXPECT_GT(own_counters, 0u);
}

TEST(Lifecycle, AThreadLocalDestructorThatTracesLeavesNoChannelActive) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  config.keep_shm = true;
  ASSERT_TRUE(start(config)) << last_error();
  const std::string shm = shm_path();
  for (int i = 0; i < 4; ++i)
    std::thread([] {
      // Constructed before the thread's first event: destroyed after chronicle's own
      // thread_local exit hook, as C++ destroys thread_locals in reverse order.
      thread_local TracesWhenDestroyed traces_at_exit;
      (void)&traces_at_exit;
      CHRONICLE_INSTANT("lifecycle", "running");
    }).join();
  {
    collector::SessionMapping mapping(shm);
    const auto& header = mapping.header();
    const auto* table = format::channel_table(mapping.base(), header);
    for (uint32_t channel = 0; channel < header.channel_count.load(); ++channel)
      if (table[channel].thread_id != static_cast<int32_t>(syscall(SYS_gettid))) {
        EXPECT_NE(table[channel].state.load(), static_cast<uint32_t>(format::ChannelState::active))
            << "channel " << channel << " of exited thread " << table[channel].thread_id << " is still active";
      }
  }
  stop();
  reader::Trace trace(config.output);
  EXPECT_EQ(count_named(trace, "running"), 4u);
  EXPECT_EQ(count_named(trace, "destructor"), 4u);
  ::unlink(shm.c_str());
}

TEST(Lifecycle, StartAndStopWhileOtherThreadsTrace) {
  TemporaryDirectory directory;
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&] {
      while (!done.load(std::memory_order_relaxed)) {
        CHRONICLE_SPAN("lifecycle", "busy");
        CHRONICLE_COUNTER("lifecycle", "value", 1);
        CHRONICLE_NOTE("lifecycle", "note {}", 2);
      }
    });
  for (int cycle = 0; cycle < 30; ++cycle) {
    Config config = test_config(directory);
    config.output = directory / ("trace-" + std::to_string(cycle));
    config.buffer_size = 64 << 10;
    config.packet_size = 4 << 10;
    ASSERT_TRUE(start(config)) << last_error();
    std::this_thread::yield();
    stop();
    reader::Trace trace(config.output);  // every trace is whole
  }
  done = true;
  for (auto& thread : threads) thread.join();
}

size_t address_space_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) * 1024;
  return 0;
}

TEST(Lifecycle, AThousandStartStopCyclesKeepTheAddressSpaceBounded) {
  TemporaryDirectory directory;
  std::atomic<bool> done{false};
  std::thread other([&] {
    while (!done.load(std::memory_order_relaxed)) CHRONICLE_INSTANT("lifecycle", "other");
  });
  const size_t before = address_space_bytes();
  for (int cycle = 0; cycle < 1000; ++cycle) {
    Config config;
    config.shm_dir = directory.path();
    config.buffer_size = 256 << 10;
    config.packet_size = 16 << 10;
    ASSERT_TRUE(start(config)) << last_error();
    const std::string shm = shm_path();
    CHRONICLE_INSTANT("lifecycle", "cycle");
    stop();
    ::unlink(shm.c_str());
  }
  const size_t after = address_space_bytes();
  done = true;
  other.join();
  // One session maps 256 threads x 256 KiB + 4 MiB; a leak of one per cycle would be 68 GB.
  EXPECT_LT(after, before + (size_t{512} << 20))
      << "address space grew by " << (after - before) / (1 << 20) << " MiB over 1000 cycles";
}

// ---- programs: fork, a small /dev/shm -------------------------------------------------------

bool process_alive(pid_t pid) {
  return kill(pid, 0) == 0;
}

TEST(Lifecycle, AForkedChildDoesNotKeepItsDeadParentLookingAlive) {
  TemporaryDirectory directory;
  FILE* output = popen((std::string(FORK_HOLDER) + " " + directory.path()).c_str(), "r");
  ASSERT_NE(output, nullptr);
  char path[4096] = {};
  int child = 0;
  ASSERT_EQ(std::fscanf(output, "%4095s %d", path, &child), 2);
  // popen's shell execs the program, so its pid is the shell's child: find it by the file name.
  const std::string name = std::filesystem::path(path).filename().string();  // chronicle-PID-N.shm
  const pid_t parent = static_cast<pid_t>(std::stol(name.substr(name.find('-') + 1)));
  {
    collector::SessionMapping mapping(path);
    EXPECT_TRUE(mapping.writer_alive());
  }
  ASSERT_EQ(kill(parent, SIGKILL), 0);
  pclose(output);  // reaps the parent
  ASSERT_TRUE(process_alive(child)) << "the forked child lives on";
  collector::SessionMapping mapping(path);
  EXPECT_FALSE(mapping.writer_alive()) << "the child holds its dead parent's lock on " << path;
  kill(child, SIGKILL);
  ::unlink(path);
}

// A child forked without exec from a session started in code (chronicle::start) has no session
// of its own: its events are counted as events with no channel in its parent's session (the
// count its collector writes into the trace, where `stats` shows it: SmallShm tests).
TEST(Lifecycle, AForkedChildOfASessionStartedInCodeCountsItsEvents) {
  TemporaryDirectory directory;
  FILE* output = popen((std::string(FORK_HOLDER) + " " + directory.path()).c_str(), "r");
  ASSERT_NE(output, nullptr);
  char path[4096] = {};
  int child = 0;
  ASSERT_EQ(std::fscanf(output, "%4095s %d", path, &child), 2);
  const std::string name = std::filesystem::path(path).filename().string();  // chronicle-PID-N.shm
  const pid_t parent = static_cast<pid_t>(std::stol(name.substr(name.find('-') + 1)));
  {
    collector::SessionMapping mapping(path);
    EXPECT_EQ(mapping.header().events_no_channel.load(), 100u) << "the child's 100 events, counted";
  }
  kill(parent, SIGKILL);
  pclose(output);
  kill(child, SIGKILL);
  ::unlink(path);
}

// Mounts a tmpfs of `size` at `directory`; false (and why) when this process may not.
bool mount_small_tmpfs(const std::string& directory, const std::string& size, std::string& why) {
  if (geteuid() != 0) {
    why = "needs root (mount -t tmpfs)";
    return false;
  }
  const auto result = test::run("mount -t tmpfs -o size=" + size + " chronicle-test " + directory);
  if (result.exit_code != 0) {
    why = "mount -t tmpfs failed: " + result.err;
    return false;
  }
  return true;
}

void flat_out_on_a_small_shm(const std::string& mode) {
  TemporaryDirectory directory;
  const std::string shm = directory / "shm";
  std::filesystem::create_directories(shm);
  std::string why;
  if (!mount_small_tmpfs(shm, "8m", why)) GTEST_SKIP() << "small /dev/shm test skipped: " << why;
  const auto result = test::run("CHRONICLE_OUTPUT=" + (directory / "trace") + " CHRONICLE_SHM_DIR=" + shm +
                                " CHRONICLE_MODE=" + mode + " CHRONICLE_BUFFER_SIZE=2M " + FLAT_OUT + " 4 1000000");
  test::run("umount " + shm);
  ASSERT_EQ(result.exit_code, 0) << "the program must survive a full /dev/shm: " << result.err;
  const uint64_t written = std::stoull(result.out);
  EXPECT_EQ(written, 4'000'000u);
  reader::Trace trace(directory / "trace");
  const uint64_t read = count_named(trace, "out");
  EXPECT_LT(read, written) << "an 8 MiB /dev/shm cannot hold four 2 MiB rings and the strings";
  // Four threads alive at once: the fixed part (~4.1 MiB) and one 2 MiB ring fill 8 MiB.
  EXPECT_GT(trace.description().losses.events_no_channel, 0u) << "the trace says what was lost";
  // In stream mode every event is read or counted (events_discarded includes those with no
  // channel); in flight mode the oldest packets are overwritten, which is the mode's promise.
  if (mode == "stream") {
    EXPECT_EQ(read + trace.events_discarded(), written);
  }
}

TEST(SmallShm, FourThreadsFlatOutInStreamModeSurviveAndCountTheLoss) {
  flat_out_on_a_small_shm("stream");
}

TEST(SmallShm, FourThreadsFlatOutInFlightModeSurviveAndCountTheLoss) {
  flat_out_on_a_small_shm("flight");
}

// ---- event groups (several events at one instant, written as one) -----------------------------

// One hand-over, as coroutines write it: the wait, the waiter's run end, the awaited's run begin.
void write_hand_over(uint64_t waiter, uint64_t awaited) {
  detail::TaskEventBatch batch;
  batch.wait(waiter, awaited);
  batch.task_event(format::EventId::task_run_end, waiter);
  batch.task_event(format::EventId::task_run_begin, awaited);
}

bool is_task_event(const reader::Event& event) {
  return event.type >= format::EventId::task_create && event.type <= format::EventId::task_label;
}

TEST(EventGroups, GroupsCutAtEveryPlaceInAPacketAreReadBackWholeAndInOrder) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  config.packet_size = 1024;              // a group meets a packet's end every few dozen events
  config.buffer_size = size_t{64} << 20;  // the ring holds all of it: nothing may be lost
  ASSERT_TRUE(start(config)) << last_error();
  constexpr uint64_t kGroups = 20'000;
  for (uint64_t k = 1; k <= kGroups; ++k) {
    // Counters of 1 to 3 between the groups move where each group starts within its packet.
    for (uint64_t filler = 0; filler < k % 4; ++filler) CHRONICLE_COUNTER("group", "filler", static_cast<int64_t>(k));
    write_hand_over(2 * k, 2 * k + 1);
  }
  stop();

  reader::Trace trace(config.output);
  EXPECT_EQ(trace.events_discarded(), 0u);
  std::vector<reader::Event> tasks;
  trace.for_each_event([&](const reader::Event& event) {
    if (is_task_event(event)) tasks.push_back(event);
    return true;
  });
  ASSERT_EQ(tasks.size(), 3 * kGroups);
  for (uint64_t k = 1; k <= kGroups; ++k) {
    const reader::Event* group = &tasks[3 * (k - 1)];
    SCOPED_TRACE("group " + std::to_string(k));
    EXPECT_EQ(group[0].type, format::EventId::task_wait);
    EXPECT_EQ(group[0].task, 2 * k);
    EXPECT_EQ(group[0].related_task, 2 * k + 1);
    EXPECT_EQ(group[1].type, format::EventId::task_run_end);
    EXPECT_EQ(group[1].task, 2 * k);
    EXPECT_EQ(group[2].type, format::EventId::task_run_begin);
    EXPECT_EQ(group[2].task, 2 * k + 1);
    EXPECT_EQ(group[0].ticks, group[1].ticks);
    EXPECT_EQ(group[1].ticks, group[2].ticks);
    if (k > 1) {
      EXPECT_GE(group[0].ticks, tasks[3 * (k - 1) - 1].ticks);
    }
    if (::testing::Test::HasFailure()) break;
  }
}

// A hand-over written inside a trace point (as a signal handler interrupting one finds its
// thread), between two written outside: returns the trace's discarded count, or -1 when the
// groups outside are not read back whole.
int64_t discarded_by_a_nested_group(bool task_site_used_before) {
  TemporaryDirectory directory;
  const Config config = test_config(directory);
  if (!start(config)) return -1;
  CHRONICLE_INSTANT("group", "before");  // this thread's channel and packet
  if (task_site_used_before) write_hand_over(8, 9);
  detail::t_writer.state.store(detail::kWritingEvents, std::memory_order_relaxed);
  write_hand_over(10, 11);
  detail::t_writer.state.store(detail::kOutsideTracePoint, std::memory_order_relaxed);
  write_hand_over(12, 13);
  stop();
  reader::Trace trace(config.output);
  size_t outside = 0, inside = 0;
  trace.for_each_event([&](const reader::Event& event) {
    if (is_task_event(event)) ++(event.task == 10 || event.task == 11 ? inside : outside);
    return true;
  });
  if (inside != 0 || outside != (task_site_used_before ? 6u : 3u)) return -1;
  return static_cast<int64_t>(trace.events_discarded());
}

TEST(EventGroups, AGroupInsideATracePointIsDroppedAndEachOfItsEventsCounted) {
  EXPECT_EQ(discarded_by_a_nested_group(true), 3) << "the dropped group, event by event";
}

// The first task event of the process inside a trace point: the lookup of the task events' site
// cannot take its lock there, so the group is dropped before it has a writer. Run in a process of
// its own (a death test's), where no task event came before.
TEST(EventGroups, AGroupThatIsTheProcesssFirstUseOfTheTaskSiteIsCountedEventByEvent) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(static_cast<int>(discarded_by_a_nested_group(false) + 100)), ::testing::ExitedWithCode(103), "")
      << "exit code 100 + the discarded count (99: a group outside was not read back whole)";
}

TEST(EventGroups, AGroupOfAThreadWithNoChannelIsCountedEventByEvent) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  config.max_threads = 1;
  ASSERT_TRUE(start(config)) << last_error();
  CHRONICLE_INSTANT("group", "the main thread holds the only channel");
  std::thread([] {
    write_hand_over(20, 21);
    write_hand_over(22, 23);
  }).join();
  stop();

  reader::Trace trace(config.output);
  trace.for_each_event([&](const reader::Event& event) {
    EXPECT_FALSE(is_task_event(event)) << "no channel: nothing written";
    return true;
  });
  EXPECT_EQ(trace.events_discarded(), 6u) << "two groups of three, counted with no channel";
}

}  // namespace
}  // namespace chronicle
