// The narrow races of the runtime and of the tools that talk to it (issue 40, "Races"), each
// forced by stalling one thread at the named point (src/recorder/test_pause.hpp) instead of
// waiting for luck: a signal handler's nested drop against stop(), fork against the registries'
// locks. Each test failed before its fix; the fix and its protocol step are described beside the
// code they changed.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chronicle/chronicle.hpp>
#include <chronicle/metrics.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "collector/collector.hpp"
#include "metrics/snapshot.hpp"
#include "recorder/test_pause.hpp"
#include "shm/trace_source.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using recorder::TestPoint;
using test::TemporaryDirectory;

// Steps of a forced interleaving, shared by the test's threads and its pause hook.
std::atomic<int> g_step{0};

// Waits until g_step reaches `step`, or a generous limit (a test that went wrong must still end).
bool wait_for_step(int step) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (g_step.load(std::memory_order_acquire) < step) {
    if (std::chrono::steady_clock::now() > limit) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// The hook of the first race: the thread that counts a nested drop says it found the session
// (step 1) and stays there until stop() has returned (step 2).
void pause_in_nested_drop(TestPoint point) {
  if (point != TestPoint::nested_drop_counting) return;
  g_step.store(1, std::memory_order_release);
  wait_for_step(2);
}

// A signal handler's trace point on a thread that is inside a slow path (state "in slow path":
// it holds or waits for the registry lock) counts its event as a nested drop, in the mapping.
// Here it is stalled after it found the session, while stop() runs to its end on another thread;
// then it counts. Exit 0 if the process lived.
[[noreturn]] void count_a_nested_drop_across_stop(const Config& config) {
  if (!start(config)) _exit(10);
  recorder::g_test_pause.store(pause_in_nested_drop);
  std::thread handler_thread([] {
    CHRONICLE_INSTANT("race", "attach");  // the thread has its channel
    // What a signal handler finds when it interrupts this thread in a slow path.
    detail::t_writer.state.store(detail::kInSlowPath, std::memory_order_relaxed);
    CHRONICLE_INSTANT("race", "from a signal handler");
    detail::t_writer.state.store(detail::kOutsideTracePoint, std::memory_order_release);
  });
  if (!wait_for_step(1)) _exit(11);
  stop();
  g_step.store(2, std::memory_order_release);
  handler_thread.join();
  _exit(0);
}

TEST(Races, ANestedDropCountedDuringStopNeverTouchesAnUnmappedSession) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TemporaryDirectory directory;
  Config config = test::test_config(directory);
  config.crash_handler = false;  // the fault, if any, is the test's verdict
  EXPECT_EXIT(count_a_nested_drop_across_stop(config), ::testing::ExitedWithCode(0), "")
      << "the handler's count must wait for stop(), or stop() for it";
}

// ---- fork against the registries' locks ---------------------------------------------------

// The hook of the fork races: the first thread that reaches `g_fork_point` (holding a registry's
// lock halfway through an update, or a recorder thread at a step of its life) says so (step 1)
// and stays there until the parent returned from fork (step 2), or a few seconds: a fork that
// waits for this thread waits for it, and it then has to go on by itself. A child copied
// meanwhile finds g_thread_paused set.
std::atomic<TestPoint> g_fork_point{TestPoint::site_interning};
std::atomic<bool> g_thread_paused{false};
void pause_until_forked(TestPoint point) {
  if (point != g_fork_point.load() || g_step.load(std::memory_order_acquire) != 0) return;
  g_thread_paused.store(true);
  g_step.store(1, std::memory_order_release);
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (g_step.load(std::memory_order_acquire) < 2 && std::chrono::steady_clock::now() < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  g_thread_paused.store(false);
}

void pause_at(TestPoint point) {
  g_step.store(0);
  g_fork_point.store(point);
  recorder::g_test_pause.store(pause_until_forked);
}

// Forks while another thread, stalled at `point`, is halfway through `update`; the child's exit
// status is `child_verdict()`: 0 when its copy of the registry is whole.
int fork_during(TestPoint point, void (*update)(), int (*child_verdict)()) {
  pause_at(point);
  std::thread updating(update);
  if (!wait_for_step(1)) {
    updating.join();
    return -1;
  }
  const pid_t child = fork();
  if (child == 0) {
    recorder::g_test_pause.store(nullptr);  // only the parent's thread was to stall
    // exit_group, not _exit: ThreadSanitizer's exit hook would report the parent's stalled thread
    // (which this child never had) as leaked and exit 66 instead of the verdict.
    syscall(SYS_exit_group, child_verdict());
  }
  g_step.store(2, std::memory_order_release);
  updating.join();
  recorder::g_test_pause.store(nullptr);
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A site never interned before (each run of the test makes its own: the registry keeps it for
// the process's life).
detail::Site* g_forked_site = nullptr;

TEST(Races, AChildForkedWhileASiteIsInternedSeesItWholeOrNotAtAll) {
  TemporaryDirectory directory;
  g_forked_site = new detail::Site{"race", "interned across fork", __FILE__, __LINE__,
                                   static_cast<uint8_t>(format::SiteKind::instant)};
  ASSERT_TRUE(start(test::test_config(directory))) << last_error();
  const int verdict = fork_during(
      TestPoint::site_interning, [] { detail::intern_site(*g_forked_site); },
      [] { return g_forked_site->id.load() != 0 ? 0 : 1; });
  stop();
  EXPECT_EQ(verdict, 0) << "1: the child's registry lists the site without its id, a copy taken mid-update";
}

// A series never registered before (each run of the test names its own).
std::string g_forked_metric;

// How many series named g_forked_metric this process's metrics mapping holds.
int forked_metric_entries() {
  int entries = 0;
  for (const metrics::MetricSample& sample : metrics::read_own_metrics().metrics)
    entries += sample.name == g_forked_metric;
  return entries;
}

TEST(Races, AChildForkedWhileAMetricIsRegisteredSeesItWholeOrNotAtAll) {
  TemporaryDirectory directory;
  setenv("CHRONICLE_METRICS_DIR", directory.path().c_str(), 1);  // a forked child's own file goes there
  static int runs = 0;
  g_forked_metric = "race_forked_total_" + std::to_string(++runs);
  const int verdict = fork_during(
      TestPoint::metric_registering, [] { Counter{g_forked_metric}.add(1); },
      [] {
        Counter{g_forked_metric}.add(1);  // the same series again: it must be found, not made twice
        return forked_metric_entries() == 1 ? 0 : 1;
      });
  EXPECT_EQ(verdict, 0) << "1: the child registered the series a second time: its registry was copied "
                           "after the entry was in the mapping and before the registry knew it";
}

// ---- fork against the recorder's own threads -----------------------------------------------

// Forks once a recorder thread is paused (step 1); the child's exit code says whether it was
// copied while that thread was paused (1) or not (0).
int fork_while_paused() {
  if (!wait_for_step(1)) {
    recorder::g_test_pause.store(nullptr);
    return -1;
  }
  const pid_t child = fork();
  if (child == 0) syscall(SYS_exit_group, g_thread_paused.load() ? 1 : 0);  // see fork_during
  g_step.store(2, std::memory_order_release);
  recorder::g_test_pause.store(nullptr);
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// A drain allocates; an allocator that is not fork-safe (GCC 12's AddressSanitizer takes no lock
// around fork) leaves a child copied mid-drain with its allocator's lock held forever. The child
// must be copied between drains (src/recorder/fork_gate.hpp).
TEST(Races, AForkNeverCopiesTheCollectorHalfwayThroughADrain) {
  TemporaryDirectory directory;
  pause_at(TestPoint::collector_draining);
  ASSERT_TRUE(start(test::test_config(directory))) << last_error();
  const int verdict = fork_while_paused();
  stop();
  EXPECT_EQ(verdict, 0) << "1: the child was copied while the collector was inside a drain";
}

// The same for a recorder thread that is still being set up (the sanitizer's allocations before
// its first step): a CI run under load hung in such a child's first malloc (fork_gate.hpp, step 4).
TEST(Races, AForkWaitsForARecorderThreadThatIsStillStarting) {
  TemporaryDirectory directory;
  pause_at(TestPoint::recorder_thread_starting);
  ASSERT_TRUE(start(test::test_config(directory))) << last_error();
  const int verdict = fork_while_paused();
  stop();
  EXPECT_EQ(verdict, 0) << "1: the child was copied while a recorder thread was starting";
}

// And for one that has ended and is being torn down while stop() joins it on another thread.
TEST(Races, AForkWaitsUntilAnEndedRecorderThreadIsJoined) {
  TemporaryDirectory directory;
  ASSERT_TRUE(start(test::test_config(directory))) << last_error();
  pause_at(TestPoint::recorder_thread_ending);
  std::thread stopper([] { stop(); });
  const int verdict = fork_while_paused();
  stopper.join();
  EXPECT_EQ(verdict, 0) << "1: the child was copied while a recorder thread was ending";
}

// And for the sampler thread, whose rounds allocate (names, modules, the records it keeps).
TEST(Races, AForkNeverCopiesTheSamplerHalfwayThroughARound) {
  TemporaryDirectory directory;
  Config config = test::test_config(directory);
  config.sample_frequency = 999;
  config.sample_method = SampleMethod::timer;  // where perf events are refused too
  pause_at(TestPoint::sampler_draining);
  ASSERT_TRUE(start(config)) << last_error();
  const int verdict = fork_while_paused();
  stop();
  EXPECT_EQ(verdict, 0) << "1: the child was copied while the sampler was inside a round";
}

// ---- liveness by pid -----------------------------------------------------------------------------

// A session's collector is named by pid; a pid that is alive is not proof that its process
// collects (the `record` that claimed the rings died, and the pid went to another process).
// Here the session names pid 1, which lives and collects nothing: the rings must be claimable.
TEST(Races, ACollectorPidNamingALiveProcessThatCollectsNothingIsNoClaim) {
  TemporaryDirectory directory;
  Config config = test::test_config(directory);
  config.output.clear();  // no collector in this process: the rings wait for `chronicle record`
  ASSERT_TRUE(start(config)) << last_error();
  {
    collector::SessionMapping mapping(shm_path());
    mapping.header().collector_pid.store(1);  // as left by a `record` that died, its pid since reused by init
    uint32_t holder = 0;
    EXPECT_TRUE(collector::claim_session(mapping, holder)) << "refused: collected by process " << holder;
    // A claim that lives is respected, even by another mapping of this process.
    collector::SessionMapping second(shm_path());
    uint32_t other = 0;
    EXPECT_FALSE(collector::claim_session(second, other));
    EXPECT_EQ(other, static_cast<uint32_t>(getpid()));
  }
  {
    // The claimant is gone (its mapping closed): the rings are free again.
    collector::SessionMapping third(shm_path());
    uint32_t holder = 0;
    EXPECT_TRUE(collector::claim_session(third, holder)) << "refused: collected by process " << holder;
  }
  stop();
}

// The hook of the last race: the in-process collector's thread, before it writes the trace's
// first files, waits until the test has looked for them (step 1), or gives up after a while, when
// start() is waiting for those files.
void pause_collector_until_looked_at(TestPoint point) {
  if (point != TestPoint::collector_starting) return;
  // Well within start()'s own bound on its wait (5 s), so that start() sees the files written.
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (g_step.load(std::memory_order_acquire) < 1 && std::chrono::steady_clock::now() < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// A program killed by SIGKILL at any moment after start() returned leaves a trace that `chronicle
// recover` completes: its directory, metadata and the name of its mapping are written before
// start() returns. They were written when the collector's thread got to them: on a loaded machine
// after the program had committed 50,000 values and been killed (CI's
// Crash.RecoverAppendsToACompressedTraceCutBySigkill found no metadata.ctfz).
TEST(Races, ATracesMetadataAndMappingAreNamedOnceStartReturns) {
  TemporaryDirectory directory;
  const Config config = test::test_config(directory);
  g_step.store(0);
  recorder::g_test_pause.store(pause_collector_until_looked_at);
  ASSERT_TRUE(start(config)) << last_error();
  const bool metadata = std::filesystem::exists(config.output + "/metadata");
  const bool source = std::filesystem::exists(config.output + "/" + std::string(shm::kTraceSourceName));
  g_step.store(1, std::memory_order_release);
  recorder::g_test_pause.store(nullptr);
  stop();
  EXPECT_TRUE(metadata) << "no metadata in " << config.output << " when start() returned";
  EXPECT_TRUE(source) << "the trace does not name its mapping when start() returned";
}

}  // namespace
}  // namespace chronicle
