// The tools end to end: record, snapshot, dump, and babeltrace2 reading what we write.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <chronicle/chronicle.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "reader/trace_directory.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using test::run;
using test::TemporaryDirectory;

const std::string kCli = CHRONICLE_CLI;
const std::string kCrashWriter = CRASH_WRITER;
const std::string kForkExec = FORK_EXEC;
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

TEST(Record, RefusesANonEmptyDirectoryAndAMissingProgram) {
  TemporaryDirectory directory;
  std::ofstream(directory / "something") << "x";
  auto result = run(kCli + " record -o " + directory.path() + " -- " + kExample);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("not empty"), std::string::npos) << result.err;
  result = run(kCli + " record -o " + (directory / "t") + " -- /no/such/program");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("cannot run"), std::string::npos) << result.err;
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
  ASSERT_EQ(trace.events_discarded(), 0u);
  const auto by_thread = sequences(trace);
  ASSERT_EQ(by_thread.size(), 3u);
  bool found_killer = false;
  for (const auto& [thread, values] : by_thread) {
    expect_contiguous_from(values, 0);
    if (values.back() == kill_at) found_killer = true;
  }
  EXPECT_TRUE(found_killer) << "the killing thread's last value " << kill_at << " is missing";
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
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("running"), std::string::npos) << result.err;
  reader::Trace trace(directory / "snapshot");
  const auto by_thread = sequences(trace);
  ASSERT_EQ(by_thread.size(), 1u);
  EXPECT_EQ(by_thread.begin()->second.back(), 9'999);
  expect_contiguous_from(by_thread.begin()->second, by_thread.begin()->second.front());
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
  Config config;
  config.output = directory / "trace";
  config.shm_dir = directory.path();
  config.buffer_size = 16 << 10;
  config.packet_size = 4 << 10;
  config.drain_interval = std::chrono::milliseconds(200);
  ASSERT_TRUE(start(config)) << last_error();
  for (int i = 0; i < 50'000; ++i) {
    CHRONICLE_COUNTER("bt", "sequence", i * 3);
    if (i % 1000 == 0) CHRONICLE_NOTE("bt", "note {}", i);
  }
  stop();
  reader::Trace trace(config.output);
  const auto ours = test::read_all(trace);
  ASSERT_GT(trace.events_discarded(), 0u);

  const auto result = run("/usr/bin/python3 " + kBt2Check + " " + config.output);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto theirs = nlohmann::json::parse(result.out);
  EXPECT_EQ(theirs["discarded"].get<uint64_t>(), trace.events_discarded());
  std::vector<nlohmann::json> events;
  for (const auto& event : theirs["events"])
    if (event["event"] != "site_definition" && event["event"] != "thread_definition") events.push_back(event);
  ASSERT_EQ(events.size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    ASSERT_EQ(events[i]["event"], ours[i].type == format::EventId::note ? "note" : "counter");
    // babeltrace2 converts through a double and truncates: allow it one nanosecond.
    ASSERT_LE(std::llabs(events[i]["ns"].get<int64_t>() - trace.to_unix_ns(ours[i].ticks)), 1) << "event " << i;
    ASSERT_EQ(events[i]["fields"]["name_id"].get<uint32_t>(), ours[i].name_id);
    ASSERT_EQ(events[i]["thread_id"].get<uint32_t>(), ours[i].thread_id);
    if (ours[i].type == format::EventId::counter) {
      ASSERT_EQ(events[i]["fields"]["value"].get<int64_t>(), ours[i].value);
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
  TemporaryDirectory directory_;
  std::string stream_;
  int copies_ = 0;
};

TEST_F(BadInput, TruncatedStream) {
  const std::string trace = copy();
  const std::string file = trace + "/" + stream_;
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 7);
  expect_error(trace, file, "runs past the end");
}

TEST_F(BadInput, WrongPacketMagic) {
  const std::string trace = copy();
  const uint32_t magic = 0xdeadbeef;
  patch(trace + "/" + stream_, 0, &magic, 4);
  expect_error(trace, trace + "/" + stream_, "bad packet magic");
}

TEST_F(BadInput, ContentLargerThanPacket) {
  const std::string trace = copy();
  const uint64_t bits = uint64_t{1} << 40;
  patch(trace + "/" + stream_, 48, &bits, 8);
  expect_error(trace, trace + "/" + stream_, "content size");
}

TEST_F(BadInput, UnknownEventId) {
  const std::string trace = copy();
  const uint8_t id = 29;
  patch(trace + "/" + stream_, format::kPacketHeaderSize, &id, 1);
  expect_error(trace, trace + "/" + stream_, "unknown event id 29");
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

// Random damage anywhere: the reader either reads the trace or names the file and offset;
// it never crashes or hangs.
TEST_F(BadInput, RandomCorruptionNeverCrashes) {
  const std::string file = directory_ / ("good/" + stream_);
  const auto size = std::filesystem::file_size(file);
  std::mt19937 random(7);
  const std::string trace = copy();
  std::vector<char> original(size);
  std::ifstream(file, std::ios::binary).read(original.data(), static_cast<std::streamsize>(size));
  int errors = 0;
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
    } catch (const reader::TraceError& error) {
      ++errors;
      EXPECT_NE(std::string(error.what()).find(stream_), std::string::npos) << error.what();
    }
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace chronicle
