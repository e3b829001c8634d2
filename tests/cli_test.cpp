// The tools end to end: record, snapshot, dump, and babeltrace2 reading what we write.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <csignal>

#include <chronicle/chronicle.hpp>
#include <filesystem>
#include <fstream>
#include <latch>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "reader/trace_directory.hpp"
#include "support.hpp"
#include "undrained_session.hpp"

namespace chronicle {
namespace {

using test::run;
using test::TemporaryDirectory;

const std::string kCli = CHRONICLE_CLI;
const std::string kCrashWriter = CRASH_WRITER;
const std::string kForkExec = FORK_EXEC;
const std::string kSequenceWriter = SEQUENCE_WRITER;
const std::string kMetricsWriter = METRICS_WRITER;
const std::string kExample = THREADS_EXAMPLE;
const std::string kBt2Check = BT2_CHECK;

// Values of the "sequence" counter per thread, in order.
std::map<uint32_t, std::vector<int64_t>> sequences(const reader::Trace& trace) {
  std::map<uint32_t, std::vector<int64_t>> out;
  trace.for_each_event([&](const reader::Event& event) {
    if (event.type == format::EventId::counter && trace.site(event.name_id)->name == "sequence")
      out[event.thread_id].push_back(event.value);
    return true;
  });
  return out;
}

void expect_contiguous_from(const std::vector<int64_t>& values, int64_t first) {
  ASSERT_FALSE(values.empty());
  EXPECT_EQ(values.front(), first);
  for (size_t i = 1; i < values.size(); ++i) ASSERT_EQ(values[i], values[i - 1] + 1) << "gap at index " << i;
}

TEST(Record, TracesAnUnmodifiedProgramAndReportsItsExit) {
  TemporaryDirectory directory;
  const auto result = run(kCli + " record -o " + (directory / "trace") + " -- " + kExample);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("exited with status 0"), std::string::npos) << result.err;
  reader::Trace trace(directory / "trace");
  EXPECT_EQ(trace.streams().size(), 3u);
  EXPECT_EQ(trace.events_discarded(), 0u);
  // 3 threads x 100 rounds x (round begin/end + counter + 4 work spans) + notes + done.
  EXPECT_EQ(test::read_all(trace).size(), 3u * 100 * (2 + 1 + 8) + 3 * 4 + 3);
  EXPECT_NE(result.err.find("3,315 events"), std::string::npos) << result.err;
}

// Its stderr closed under it (`chronicle record ... 2>&1 | head -1`): what it has to say cannot be
// shown, but the trace is finished, its directory in /dev/shm removed, and the exit code is the
// program's. Before, the first message killed it (SIGPIPE) and left the directory behind.
TEST(Record, AClosedStderrNeitherKillsItNorLeavesItsMappings) {
  TemporaryDirectory directory;
  const std::string output = directory / "trace";
  const auto result = test::run_with_broken_stderr(kCli + " record -o " + output + " -- " + kExample);
  EXPECT_FALSE(result.killed()) << "killed by signal " << WTERMSIG(result.status);
  EXPECT_EQ(result.exit_code(), 0) << "status " << result.status;
  const std::string mappings = "/dev/shm/chronicle-record-" + std::to_string(result.pid);
  EXPECT_FALSE(std::filesystem::exists(mappings)) << "its directory of mappings was left in /dev/shm";
  reader::Trace trace(output);
  EXPECT_EQ(trace.events_discarded(), 0u);
  EXPECT_EQ(test::read_all(trace).size(), 3u * 100 * (2 + 1 + 8) + 3 * 4 + 3);
  std::error_code ignored;
  std::filesystem::remove_all(mappings, ignored);
}

TEST(Record, RefusesANonEmptyDirectoryAndAMissingProgram) {
  TemporaryDirectory directory;
  std::ofstream(directory / "something") << "x";
  auto result = run(kCli + " record -o " + directory.path() + " -- " + kExample);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("not empty"), std::string::npos) << result.err;
  result = run(kCli + " record -o " + (directory / "t") + " -- /no/such/program");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("cannot run"), std::string::npos) << result.err;
  EXPECT_FALSE(std::filesystem::exists(directory / "t")) << "a failed record left its output directory behind";
}

TEST(Record, EachProcessOfTheRunGetsItsTrace) {
  TemporaryDirectory directory;
  const auto result = run(kCli + " record -o " + (directory / "trace") + " -- " + kForkExec);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto traces = reader::find_traces(directory / "trace");
  ASSERT_EQ(traces.size(), 2u);
  std::map<std::string, size_t> counts;
  for (const auto& path : traces) {
    reader::Trace trace(path);
    for (const auto& event : test::read_all(trace)) ++counts[trace.site(event.name_id)->name];
  }
  EXPECT_EQ(counts["parent"], 100u);
  EXPECT_EQ(counts["child"], 100u);
}

// The events of each process of a run of fork_exec under `path`, by name, over all its traces.
std::map<std::string, size_t> counts_by_name(const std::string& path) {
  std::map<std::string, size_t> counts;
  for (const auto& each : reader::find_traces(path)) {
    reader::Trace trace(each);
    for (const auto& event : test::read_all(trace)) ++counts[trace.site(event.name_id)->name];
  }
  return counts;
}

// A child forked without exec of a program with threads holds their heap (its collector's
// buffers, say) but not the threads: LeakSanitizer, at the child's exit, counts that memory as the
// child's leak (it says "False leaks are possible"). The fork tests run their program without it.
const std::string kNoLeakCheckInForkedChildren = "ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 ";

// A child forked without exec traces into a session of its own, as an exec'd child does: under
// `record` its own sub-trace, whether it ends with exit() or _exit().
TEST(Record, AChildForkedWithoutExecGetsItsOwnTrace) {
  for (const std::string ending : {"exit", "_exit"}) {
    SCOPED_TRACE(ending);
    TemporaryDirectory directory;
    const auto result = run(kNoLeakCheckInForkedChildren + kCli + " record -o " + (directory / "trace") + " -- " +
                            kForkExec + " fork-only " + ending);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(reader::find_traces(directory / "trace").size(), 2u);
    const auto counts = counts_by_name(directory / "trace");
    EXPECT_EQ(counts.count("parent") ? counts.at("parent") : 0, 100u);
    EXPECT_EQ(counts.count("forked") ? counts.at("forked") : 0, 100u) << result.err;
  }
}

// The same for a program that collects its own trace (CHRONICLE_OUTPUT): the child's trace is
// a directory of its own in it, as an exec'd child's is.
TEST(Record, AChildForkedWithoutExecOfAProgramTracingItselfGetsItsOwnTrace) {
  TemporaryDirectory directory;
  const auto result = run(kNoLeakCheckInForkedChildren + "CHRONICLE_OUTPUT=" + (directory / "trace") +
                          " CHRONICLE_SHM_DIR=" + directory.path() + " " + kForkExec + " fork-only");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto counts = counts_by_name(directory / "trace");
  EXPECT_EQ(counts.count("parent") ? counts.at("parent") : 0, 100u);
  EXPECT_EQ(counts.count("forked") ? counts.at("forked") : 0, 100u) << result.err;
  EXPECT_EQ(run(kCli + " stats " + (directory / "trace")).out.find("was cut"), std::string::npos);
}

class Crash : public ::testing::TestWithParam<int> {};

TEST_P(Crash, RecordRecoversEverySequenceNumberUpToTheKill) {
  std::mt19937 random(GetParam());
  const long kill_at = std::uniform_int_distribution<long>(1'000, 400'000)(random);
  TemporaryDirectory directory;
  const auto result = run(kCli + " record --buffer-size 64M -o " + (directory / "trace") + " -- " + kCrashWriter + " " +
                          std::to_string(kill_at) + " 3");
  EXPECT_EQ(result.exit_code, 128 + SIGKILL) << result.err;
  EXPECT_NE(result.err.find("killed by signal 9"), std::string::npos) << result.err;
  reader::Trace trace(directory / "trace");
  // The writers race the collector: on a loaded machine some events may be discarded, but each
  // one is counted. The killing thread wrote a span and a counter per step, and the last step's
  // span never ended.
  const uint64_t killer_wrote = 3 * static_cast<uint64_t>(kill_at) + 2;
  std::map<uint32_t, uint64_t> read, discarded;
  uint32_t killer = 0;
  trace.for_each_event([&](const reader::Event& event) {
    ++read[event.thread_id];
    if (event.type == format::EventId::span_begin) killer = event.thread_id;
    return true;
  });
  for (const auto& stream : trace.streams()) discarded[stream.thread_id] += stream.events_discarded;
  EXPECT_EQ(read[killer] + discarded[killer], killer_wrote);
  const auto by_thread = sequences(trace);
  ASSERT_EQ(by_thread.size(), 3u);
  for (const auto& [thread, values] : by_thread) {
    if (discarded[thread] == 0) {
      expect_contiguous_from(values, 0);
      if (thread == killer) {
        EXPECT_EQ(values.back(), kill_at);
      }
    } else {
      for (size_t i = 1; i < values.size(); ++i) ASSERT_GT(values[i], values[i - 1]) << "index " << i;
      EXPECT_LE(static_cast<uint64_t>(values.back()) + 1 - values.size(), discarded[thread])
          << "numbers missing before the last one read must be counted as discarded";
    }
  }
  // babeltrace2 reads the recovered trace too.
  const auto babeltrace = run("babeltrace2 " + (directory / "trace") + " | tail -1");
  EXPECT_EQ(babeltrace.exit_code, 0) << babeltrace.err;
  EXPECT_TRUE(babeltrace.err.empty()) << babeltrace.err;
}

TEST_P(Crash, FlightRecorderMappingLeftBehindIsReadBySnapshot) {
  std::mt19937 random(GetParam());
  const long kill_at = std::uniform_int_distribution<long>(50'000, 400'000)(random);
  TemporaryDirectory directory;
  const auto killed = run("CHRONICLE_OUTPUT=" + (directory / "unused") +
                          " CHRONICLE_MODE=flight CHRONICLE_SHM_DIR=" + directory.path() +
                          " CHRONICLE_BUFFER_SIZE=256K " + kCrashWriter + " " + std::to_string(kill_at) + " 2");
  EXPECT_EQ(killed.exit_code, 128 + SIGKILL);
  std::string mapping;
  for (const auto& entry : std::filesystem::directory_iterator(directory.path()))
    if (entry.path().extension() == ".shm") mapping = entry.path().string();
  ASSERT_FALSE(mapping.empty()) << "the killed process left no mapping";
  const auto result = run(kCli + " snapshot " + mapping + " -o " + (directory / "snapshot"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("not running"), std::string::npos) << result.err;
  reader::Trace trace(directory / "snapshot");
  const auto by_thread = sequences(trace);
  ASSERT_EQ(by_thread.size(), 2u);
  bool found_killer = false;
  for (const auto& [thread, values] : by_thread) {
    expect_contiguous_from(values, values.front());
    if (values.back() != kill_at) continue;
    found_killer = true;
    EXPECT_GT(values.front(), 0) << "a 256 KiB flight ring cannot hold everything; the oldest must be gone";
  }
  EXPECT_TRUE(found_killer);
}

TEST_P(Crash, RecordInFlightModeKeepsTheLastWindow) {
  std::mt19937 random(GetParam() + 1000);
  const long kill_at = std::uniform_int_distribution<long>(50'000, 200'000)(random);
  TemporaryDirectory directory;
  const auto result = run(kCli + " record --mode flight --buffer-size 256K -o " + (directory / "trace") + " -- " +
                          kCrashWriter + " " + std::to_string(kill_at) + " 1");
  EXPECT_EQ(result.exit_code, 128 + SIGKILL) << result.err;
  reader::Trace trace(directory / "trace");
  const auto by_thread = sequences(trace);
  ASSERT_EQ(by_thread.size(), 1u);
  const auto& values = by_thread.begin()->second;
  expect_contiguous_from(values, values.front());
  EXPECT_EQ(values.back(), kill_at);
}

INSTANTIATE_TEST_SUITE_P(RandomKillPoints, Crash, ::testing::Values(1, 2, 3));

TEST(Snapshot, ReadsARunningProcessByPid) {
  TemporaryDirectory directory;
  Config config;
  config.mode = Mode::flight;
  config.buffer_size = 64 << 10;
  config.packet_size = 4 << 10;
  ASSERT_TRUE(start(config)) << last_error();
  for (int i = 0; i < 10'000; ++i) CHRONICLE_COUNTER("snap", "sequence", i);
  const auto result = run(kCli + " snapshot " + std::to_string(getpid()) + " -o " + (directory / "snapshot"));
  stop();
  // A session with no output keeps its file after stop(), for a reader that has not yet come
  // (chronicle record finds sessions by their files): this test is the only reader.
  for (const auto& entry : std::filesystem::directory_iterator(config.shm_dir))
    if (entry.path().filename().string().starts_with("chronicle-" + std::to_string(getpid()) + "-"))
      std::filesystem::remove(entry.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("running"), std::string::npos) << result.err;
  reader::Trace trace(directory / "snapshot");
  const auto by_thread = sequences(trace);
  ASSERT_EQ(by_thread.size(), 1u);
  EXPECT_EQ(by_thread.begin()->second.back(), 9'999);
  expect_contiguous_from(by_thread.begin()->second, by_thread.begin()->second.front());
}

// A program started with its standard input on a pipe; closing the pipe asks it to end.
class PipedProgram {
 public:
  explicit PipedProgram(const std::string& command) : pipe_(popen(command.c_str(), "w")) {}
  ~PipedProgram() { close(); }
  bool started() const { return pipe_ != nullptr; }
  int close() {
    if (!pipe_) return -1;
    const int status = pclose(pipe_);
    pipe_ = nullptr;
    return status;
  }

 private:
  FILE* pipe_;
};

bool wait_for_file(const std::string& path, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Events a snapshot says it lacks, per thread: its stream's events_discarded.
std::map<uint32_t, uint64_t> reported_losses(const reader::Trace& trace) {
  std::map<uint32_t, uint64_t> out;
  for (const auto& stream : trace.streams()) out[stream.thread_id] += stream.events_discarded;
  return out;
}

// The text of `path`, or "" while it does not exist.
std::string read_text(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

// `record` puts a program's sessions in a directory of its own under /dev/shm: the readers of a
// live process by pid (top, snapshot) must look there too.
TEST(LiveReaders, FindTheSessionOfAProgramUnderRecord) {
  TemporaryDirectory directory;
  // The shell prints its pid, then becomes the writer (same pid, same environment); the writer
  // runs until its standard input, our pipe, closes.
  PipedProgram recording(kCli + " record -q -o " + (directory / "trace") + " -- sh -c 'echo $$ > " +
                         (directory / "pid") + "; exec " + kMetricsWriter + " 1 > " + (directory / "ready") + "'");
  ASSERT_TRUE(recording.started());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!read_text(directory / "ready").starts_with("ready") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(read_text(directory / "ready").starts_with("ready")) << "the writer never became ready";
  const std::string pid = std::to_string(std::stoi(read_text(directory / "pid")));

  const auto top = run(kCli + " top " + pid + " --once --interval 100ms");
  EXPECT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("/s written"), std::string::npos) << top.out;
  EXPECT_EQ(top.out.find("trace session: none"), std::string::npos) << top.out;

  const auto snapshot = run(kCli + " snapshot " + pid + " -o " + (directory / "snapshot"));
  EXPECT_EQ(snapshot.exit_code, 0) << snapshot.err;
  EXPECT_NE(snapshot.err.find("running"), std::string::npos) << snapshot.err;

  EXPECT_EQ(recording.close(), 0);
}

TEST(Snapshot, LiveFlightSnapshotsAreContiguousOrCountWhatTheyLack) {
  TemporaryDirectory directory;
  PipedProgram writer(kSequenceWriter + " " + directory.path() + " 2");
  ASSERT_TRUE(writer.started());
  ASSERT_TRUE(wait_for_file(directory / "ready", std::chrono::seconds(60))) << "the writer never got going";
  std::string mapping;
  for (const auto& entry : std::filesystem::directory_iterator(directory.path()))
    if (entry.path().extension() == ".shm") mapping = entry.path().string();
  ASSERT_FALSE(mapping.empty());
  constexpr int kSnapshots = 20;
  for (int round = 0; round < kSnapshots; ++round) {
    const std::string output = directory / ("snapshot-" + std::to_string(round));
    const auto result = run(kCli + " snapshot " + mapping + " -o " + output);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    reader::Trace trace(output);
    const auto by_thread = sequences(trace);
    const auto losses = reported_losses(trace);
    std::string streams;
    for (const auto& stream : trace.streams())
      streams += " " + stream.path + " (thread " + std::to_string(stream.thread_id) + ", " +
                 std::to_string(stream.packets) + " packets)";
    EXPECT_EQ(by_thread.size(), 2u) << "snapshot " << round << ": a thread has no events; streams:" << streams << "\n"
                                    << result.err;
    uint64_t snapshot_loss = 0;
    for (const auto& [thread, values] : by_thread) {
      const uint64_t lacking = static_cast<uint64_t>(values.back() - values.front() + 1) - values.size();
      const uint64_t reported = losses.count(thread) ? losses.at(thread) : 0;
      EXPECT_EQ(lacking, reported) << "snapshot " << round << ", thread " << thread << ": values " << values.front()
                                   << ".." << values.back() << ", " << values.size() << " read";
      snapshot_loss += reported;
    }
    // babeltrace2 reads it, and warns of discarded events or packets only when the snapshot says so.
    const auto babeltrace = run("babeltrace2 " + output);  // the text sink reports discards
    EXPECT_EQ(babeltrace.exit_code, 0) << babeltrace.err;
    if (snapshot_loss == 0) {
      EXPECT_EQ(babeltrace.err.find("discarded"), std::string::npos) << "snapshot " << round << ": " << babeltrace.err;
    }
  }
  EXPECT_EQ(writer.close(), 0);
}

TEST(Losses, EventsOfThreadsWithoutAChannelAreCountedByEveryReader) {
  TemporaryDirectory directory;
  Config config;
  config.output = directory / "trace";
  config.shm_dir = directory.path();
  config.max_threads = 2;
  ASSERT_TRUE(start(config)) << last_error();
  constexpr int kThreads = 5;
  constexpr int kEventsPerThread = 10;
  // No thread ends before all have written: a channel freed by an ending thread could be reused.
  std::latch all_written(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&all_written] {
      for (int i = 0; i < kEventsPerThread; ++i) CHRONICLE_COUNTER("loss", "sequence", i);
      all_written.arrive_and_wait();
    });
  for (auto& thread : threads) thread.join();
  stop();

  constexpr uint64_t kLost = (kThreads - 2) * kEventsPerThread;
  reader::Trace trace(config.output);
  EXPECT_EQ(trace.description().losses.events_no_channel, kLost);
  EXPECT_EQ(trace.events_discarded(), kLost);
  // The program's events; the session's own counters (category "chronicle") come on top.
  EXPECT_EQ(test::read_category(trace, "loss").size(), 2u * kEventsPerThread);

  const auto stats = run(kCli + " stats --json " + config.output);
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const auto json = nlohmann::json::parse(stats.out);
  EXPECT_EQ(json["losses"]["events_no_channel"].get<uint64_t>(), kLost) << stats.out;
  EXPECT_EQ(json["discarded"].get<uint64_t>(), kLost) << stats.out;

  const auto babeltrace = run("babeltrace2 " + config.output);  // the text sink reports discards
  EXPECT_EQ(babeltrace.exit_code, 0) << babeltrace.err;
  EXPECT_NE(babeltrace.err.find("discarded " + std::to_string(kLost) + " events"), std::string::npos) << babeltrace.err;
  EXPECT_EQ(babeltrace.err.find("ERROR"), std::string::npos) << babeltrace.err;
}

TEST(Dump, PrintsResolvedNamesAndFiltersThem) {
  TemporaryDirectory directory;
  ASSERT_EQ(run(kCli + " record -q -o " + (directory / "trace") + " -- " + kExample).exit_code, 0);
  auto result = run(kCli + " dump " + (directory / "trace"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(test::count_lines(result.out), 3315u);
  EXPECT_NE(result.out.find("span_begin app/round"), std::string::npos);
  EXPECT_NE(result.out.find("text=\"thread 1 reached round 25\""), std::string::npos);
  EXPECT_NE(result.out.find("worker-2"), std::string::npos);
  result = run(kCli + " dump --category compute --limit 10 " + (directory / "trace"));
  EXPECT_EQ(test::count_lines(result.out), 10u);
  EXPECT_EQ(result.out.find("app/"), std::string::npos);
  result = run(kCli + " dump --name 'thread*' " + (directory / "trace"));
  EXPECT_EQ(test::count_lines(result.out), 12u);
}

// --- the tools themselves ------------------------------------------------------------------

// The tools read traces; they never record one of their own, whatever the environment says.
TEST(Tools, DoNotTraceThemselvesWhenTheEnvironmentAsksForTracing) {
  TemporaryDirectory directory;
  ASSERT_EQ(run(kCli + " record -q -o " + (directory / "trace") + " -- " + kExample).exit_code, 0);
  std::filesystem::create_directory(directory / "shm");
  const std::string environment = "CHRONICLE_OUTPUT=" + (directory / "should-not-exist") +
                                  " CHRONICLE_SHM_DIR=" + (directory / "shm") + " CHRONICLE_KEEP_SHM=1 ";
  for (const std::string command : {" dump ", " stats "}) {
    const auto result = run(environment + kCli + command + (directory / "trace"));
    EXPECT_EQ(result.exit_code, 0) << command << result.err;
    EXPECT_FALSE(std::filesystem::exists(directory / "should-not-exist")) << command;
    EXPECT_TRUE(std::filesystem::is_empty(directory / "shm")) << command;
  }
}

// The same, checked on the binary: the auto-start path is not linked in at all.
TEST(Tools, BinaryDoesNotContainTheRecorderRuntime) {
  const auto result = run("nm -C " + kCli);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.find("StartFromEnvironment"), std::string::npos);
  EXPECT_EQ(result.out.find("chronicle::start("), std::string::npos);
}

TEST(Usage, UnknownFlagAndMissingArgumentExitWithTwo) {
  auto result = run(kCli + " dump --no-such-flag x");
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("no-such-flag"), std::string::npos) << result.err;
  result = run(kCli + " dump");
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("required"), std::string::npos) << result.err;
  result = run(kCli + " --no-such-flag");
  EXPECT_EQ(result.exit_code, 2) << result.err;
}

TEST(Usage, HelpExitsWithZero) {
  const auto result = run(kCli + " --help");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("dump"), std::string::npos) << result.out;
}

TEST(Usage, VersionPrintsTheProjectVersion) {
  const auto result = run(kCli + " --version");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "chronicle " CHRONICLE_VERSION "\n");
}

// --- babeltrace2 ------------------------------------------------------------------------------

TEST(Babeltrace, ReadsOurTraceWithoutWarningAndCountsEveryEvent) {
  TemporaryDirectory directory;
  ASSERT_EQ(run(kCli + " record -q -o " + (directory / "trace") + " -- " + kExample).exit_code, 0);
  const auto result = run("babeltrace2 " + (directory / "trace"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  reader::Trace trace(directory / "trace");
  // Our events, plus the definitions stream: 5 sites and 3 threads.
  EXPECT_EQ(test::count_lines(result.out), 3315u + trace.sites().size() + 3);
}

TEST(Babeltrace, PythonBindingsSeeTheSameFieldsTimesAndDiscards) {
  TemporaryDirectory directory;
  const std::string output = directory / "trace";
  const reader::Trace trace = test::record_with_no_collector(directory, [] {
    for (int i = 0; i < 50'000; ++i) {
      CHRONICLE_COUNTER("bt", "sequence", i * 3);
      if (i % 1000 == 0) CHRONICLE_NOTE("bt", "note {}", i);
    }
  });
  const auto ours = test::read_all(trace);
  ASSERT_GT(trace.events_discarded(), 0u);

  const auto result = run("/usr/bin/python3 " + kBt2Check + " " + output);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto theirs = nlohmann::json::parse(result.out);
  EXPECT_EQ(theirs["discarded"].get<uint64_t>(), trace.events_discarded());
  std::vector<nlohmann::json> events;
  for (const auto& event : theirs["events"])
    if (event["event"] != "site_definition" && event["event"] != "thread_definition") events.push_back(event);
  ASSERT_EQ(events.size(), ours.size());
  // The session's own counters are in it too (counter and counter_float, category "chronicle").
  auto event_name = [](format::EventId type) {
    return type == format::EventId::note            ? "note"
           : type == format::EventId::counter_float ? "counter_float"
                                                    : "counter";
  };
  for (size_t i = 0; i < ours.size(); ++i) {
    ASSERT_EQ(events[i]["event"], event_name(ours[i].type)) << "event " << i;
    // babeltrace2 converts through a double and truncates: allow it one nanosecond.
    ASSERT_LE(std::llabs(events[i]["ns"].get<int64_t>() - trace.to_unix_ns(ours[i].ticks)), 1) << "event " << i;
    ASSERT_EQ(events[i]["fields"]["name_id"].get<uint32_t>(), ours[i].name_id);
    ASSERT_EQ(events[i]["thread_id"].get<uint32_t>(), ours[i].thread_id);
    if (ours[i].type == format::EventId::counter) {
      ASSERT_EQ(events[i]["fields"]["value"].get<int64_t>(), ours[i].value);
    } else if (ours[i].type == format::EventId::counter_float) {
      ASSERT_EQ(events[i]["fields"]["value"].get<double>(), ours[i].value_float);
    } else {
      ASSERT_EQ(events[i]["fields"]["text"].get<std::string>(), ours[i].text);
    }
  }
}

// --- bad input --------------------------------------------------------------------------------

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(run(kCli + " record -q --buffer-size 256K -o " + (directory_ / "good") + " -- " + kExample).exit_code, 0);
    for (const auto& entry : std::filesystem::directory_iterator(directory_ / "good"))
      if (entry.path().filename().string().starts_with("thread-")) stream_ = entry.path().filename().string();
  }
  // A copy of the good trace to spoil.
  std::string copy() {
    const std::string target = directory_ / ("bad" + std::to_string(copies_++));
    std::filesystem::copy(directory_ / "good", target);
    return target;
  }
  void patch(const std::string& file, size_t offset, const void* data, size_t size) {
    int fd = ::open(file.c_str(), O_WRONLY);
    ASSERT_EQ(::pwrite(fd, data, size, static_cast<off_t>(offset)), static_cast<ssize_t>(size));
    ::close(fd);
  }
  void expect_error(const std::string& trace, const std::string& file, const std::string& words) {
    const auto result = run(kCli + " dump " + trace);
    EXPECT_EQ(result.exit_code, 2) << result.err;
    EXPECT_NE(result.err.find(file), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("offset"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(words), std::string::npos) << result.err;
  }
  // The damage costs only its packets: dump and stats read the rest, exit 0 and warn on
  // standard error, naming the file and the skipped packet's offset.
  void expect_skipped(const std::string& trace, const std::string& file, const std::string& words) {
    const auto dump = run(kCli + " dump " + trace);
    EXPECT_EQ(dump.exit_code, 0) << dump.err;
    EXPECT_NE(dump.err.find("warning"), std::string::npos) << dump.err;
    EXPECT_NE(dump.err.find(file), std::string::npos) << dump.err;
    EXPECT_NE(dump.err.find("offset"), std::string::npos) << dump.err;
    EXPECT_NE(dump.err.find(words), std::string::npos) << dump.err;
    const size_t readable = test::read_all(reader::Trace(trace)).size();
    EXPECT_LT(readable, 3315u);
    EXPECT_EQ(test::count_lines(dump.out), readable);
    const auto stats = run(kCli + " stats " + trace);
    EXPECT_EQ(stats.exit_code, 0) << stats.err;
    EXPECT_NE(stats.err.find("warning"), std::string::npos) << stats.err;
    EXPECT_NE(stats.err.find(file), std::string::npos) << stats.err;
  }
  TemporaryDirectory directory_;
  std::string stream_;
  int copies_ = 0;
};

TEST_F(BadInput, TruncatedStream) {
  const std::string trace = copy();
  const std::string file = trace + "/" + stream_;
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 7);
  expect_skipped(trace, file, "runs past the end");
}

TEST_F(BadInput, WrongPacketMagic) {
  const std::string trace = copy();
  const uint32_t magic = 0xdeadbeef;
  patch(trace + "/" + stream_, 0, &magic, 4);
  expect_skipped(trace, trace + "/" + stream_ + ": offset 0", "bad packet magic");
}

TEST_F(BadInput, ContentLargerThanPacket) {
  const std::string trace = copy();
  const uint64_t bits = uint64_t{1} << 40;
  patch(trace + "/" + stream_, 48, &bits, 8);
  expect_skipped(trace, trace + "/" + stream_ + ": offset 0", "content size");
}

TEST_F(BadInput, UnknownEventId) {
  const std::string trace = copy();
  ASSERT_TRUE(test::write_unknown_event(trace + "/" + stream_, format::kPacketHeaderSize));
  expect_skipped(trace, trace + "/" + stream_ + ": offset 0", "unknown event id 99");
}

TEST_F(BadInput, StatsJsonListsTheSkippedPackets) {
  const std::string trace = copy();
  ASSERT_TRUE(test::write_unknown_event(trace + "/" + stream_, format::kPacketHeaderSize));
  const auto result = run(kCli + " stats --json " + trace);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto damage = nlohmann::json::parse(result.out)["damage"];
  ASSERT_EQ(damage.size(), 1u) << result.out;
  EXPECT_EQ(damage[0]["file"], trace + "/" + stream_);
  EXPECT_EQ(damage[0]["offset"], 0);
  EXPECT_GT(damage[0]["bytes"].get<uint64_t>(), 0u);
  EXPECT_TRUE(damage[0]["events_lost"].is_null()) << "unknown for a packet that does not decode";
  EXPECT_NE(damage[0]["reason"].get<std::string>().find("unknown event id 99"), std::string::npos);
}

TEST_F(BadInput, NothingReadableLeft) {
  const std::string trace = copy();
  for (const auto& entry : std::filesystem::directory_iterator(trace))
    if (entry.path().filename().string().starts_with("thread-") && entry.path().filename() != stream_)
      std::filesystem::remove(entry.path());
  const std::string file = trace + "/" + stream_;
  const std::string garbage(std::filesystem::file_size(file), 'x');
  patch(file, 0, garbage.data(), garbage.size());
  expect_error(trace, file, "bad packet magic");
  const auto stats = run(kCli + " stats " + trace);
  EXPECT_EQ(stats.exit_code, 2) << stats.err;
}

TEST_F(BadInput, MetadataNotOurs) {
  const std::string trace = copy();
  std::ofstream(trace + "/metadata") << "hello";
  expect_error(trace, trace + "/metadata", "CTF 1.8");
}

TEST_F(BadInput, MetadataMissing) {
  const std::string trace = copy();
  std::filesystem::remove(trace + "/metadata");
  const auto result = run(kCli + " dump " + trace);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("no trace here"), std::string::npos) << result.err;
}

TEST_F(BadInput, TruncatedDefinitions) {
  const std::string trace = copy();
  std::filesystem::resize_file(trace + "/strings", 40);
  expect_error(trace, trace + "/strings", "cut short");
}

TEST_F(BadInput, GarbageMappingForSnapshot) {
  const std::string path = directory_ / "garbage.shm";
  std::ofstream(path) << std::string(8192, 'x');
  const auto result = run(kCli + " snapshot " + path + " -o " + (directory_ / "out"));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(path), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("bad magic"), std::string::npos) << result.err;
}

// Random damage anywhere: the reader reads the trace, skipping damaged packets and naming the
// file, or (nothing readable left) names it in an error; it never crashes or hangs.
TEST_F(BadInput, RandomCorruptionNeverCrashes) {
  const std::string file = directory_ / ("good/" + stream_);
  const auto size = std::filesystem::file_size(file);
  std::mt19937 random(7);
  const std::string trace = copy();
  std::vector<char> original(size);
  std::ifstream(file, std::ios::binary).read(original.data(), static_cast<std::streamsize>(size));
  int noticed = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<char> damaged = original;
    for (int flips = 0; flips < 1 + round % 4; ++flips)
      damaged[std::uniform_int_distribution<size_t>(0, size - 1)(random)] ^= static_cast<char>(1 + random() % 255);
    if (round % 10 == 0) damaged.resize(std::uniform_int_distribution<size_t>(0, size)(random));
    std::ofstream(trace + "/" + stream_, std::ios::binary | std::ios::trunc)
        .write(damaged.data(), static_cast<std::streamsize>(damaged.size()));
    try {
      reader::Trace opened(trace);
      test::read_all(opened);
      noticed += !opened.damage().empty();
      for (const auto& damage : opened.damage()) EXPECT_NE(damage.file.find(stream_), std::string::npos);
    } catch (const reader::TraceError& error) {
      ++noticed;
      EXPECT_NE(std::string(error.what()).find(stream_), std::string::npos) << error.what();
    }
  }
  EXPECT_GT(noticed, 0);
}

}  // namespace
}  // namespace chronicle
