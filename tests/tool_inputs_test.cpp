// The tools against hostile files and hostile neighbours: an output directory another user can
// write, strings that are not UTF-8, a FIFO or a link loop where a trace file should be,
// settings the recorder would refuse, a program that daemonizes, a full output disk.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "reader/trace_reader.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

namespace fs = std::filesystem;
using test::run;
using test::SecondUser;
using test::TemporaryDirectory;

// CHRONICLE_TEST_CLI runs these against another build of the CLI (an older one, to see them fail);
// CHRONICLE_TEST_EXAMPLE, the program that writes its own trace against another runtime.
const std::string kCli = std::getenv("CHRONICLE_TEST_CLI") ? std::getenv("CHRONICLE_TEST_CLI") : CHRONICLE_CLI;
const std::string kExample = THREADS_EXAMPLE;
const std::string kFlatOut = FLAT_OUT;
const std::string kOddBytes = ODD_BYTES;
constexpr uint64_t kExampleEvents = 3315;  // what threads_example writes (see cli_test.cpp)

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

using test::slurp;

// A tmpfs mounted for the test's life (root only).
class SmallMount {
 public:
  SmallMount(const std::string& directory, const std::string& options) : directory_(directory) {
    fs::create_directories(directory);
    if (geteuid() != 0) {
      why_not_ = "needs root (mount -t tmpfs)";
      return;
    }
    const auto result = run("mount -t tmpfs -o " + options + " chronicle-test " + directory);
    if (result.exit_code != 0) why_not_ = "mount -t tmpfs failed: " + result.err;
  }
  ~SmallMount() {
    if (why_not_.empty()) run("umount " + directory_);
  }
  const std::string& why_not() const { return why_not_; }

 private:
  std::string directory_;
  std::string why_not_;
};

// ---- item 4: output directories other users can write -----------------------------------

TEST(SharedOutput, RecordRefusesADirectoryOtherUsersMayWrite) {
  TemporaryDirectory directory;
  const std::string shared = directory / "shared";
  fs::create_directories(shared);
  fs::permissions(shared, fs::perms::all);  // 0777, no sticky bit
  const auto result =
      run(kCli + " record -q -o " + shared + " -- sh -c 'touch " + (directory / "ran") + "; exec " + kExample + "'");
  EXPECT_NE(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.err, "writable by every user")) << result.err;
  EXPECT_TRUE(contains(result.err, "--allow-shared-output")) << result.err;
  EXPECT_FALSE(fs::exists(directory / "ran")) << "the program ran though its trace could be tampered with";
}

// The directory becomes writable by another user once record has checked it (here the recorded
// program opens it up, then that user plants links where the collector used to put its
// temporary files): the collector writes through none of them.
TEST(SharedOutput, ACollectorFollowsNoLinkAnotherUserPlanted) {
  SecondUser other;
  if (!other.why_not().empty()) GTEST_SKIP() << "planted-link test skipped: " << other.why_not();
  TemporaryDirectory directory;
  fs::permissions(directory.path(), fs::perms::owner_all | fs::perms::others_exec | fs::perms::group_exec);
  const std::string victim = directory / "victim";
  std::ofstream(victim) << "precious\n";
  const std::string trace = directory / "trace";
  const std::string plant = "chmod 777 " + trace + "; " + other.as("ln -s " + victim + " " + trace + "/metadata.tmp") +
                            "; " + other.as("ln -s " + victim + " " + trace + "/strings.tmp") + "; exec " + kExample;
  const auto result = run(kCli + " record -q -o " + trace + " -- sh -c '" + plant + "'");
  EXPECT_EQ(slurp(victim), "precious\n") << "record wrote through a link another user planted";
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_TRUE(fs::is_symlink(trace + "/strings.tmp")) << "the other user could not plant the link";
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(trace + "/metadata")));
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(trace + "/strings")));
  fs::remove(trace + "/metadata.tmp");
  fs::remove(trace + "/strings.tmp");
  reader::Trace read(trace);
  EXPECT_EQ(test::read_all(read).size(), kExampleEvents);
}

TEST(SharedOutput, TraceFilesAndDirectoriesArePrivate) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  const auto result = run("umask 022; " + kCli + " record -q -o " + trace + " -- " + kExample);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  struct stat info {};
  ASSERT_EQ(::stat(trace.c_str(), &info), 0) << result.err;
  EXPECT_EQ(info.st_mode & 07777, 0700u) << trace;
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(trace)) {
    ASSERT_EQ(::stat(entry.path().c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 07777, 0600u) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 5u);  // metadata, strings, three threads
}

// The same for a program that writes its own trace (CHRONICLE_OUTPUT, no record).
TEST(SharedOutput, AProgramsOwnTraceIsPrivateToo) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  const auto result = run("umask 022; CHRONICLE_OUTPUT=" + trace + " CHRONICLE_SHM_DIR=" + directory.path() + " " +
                          (std::getenv("CHRONICLE_TEST_EXAMPLE") ? std::getenv("CHRONICLE_TEST_EXAMPLE") : kExample));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  struct stat info {};
  ASSERT_EQ(::stat(trace.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0700u) << trace;
  for (const auto& entry : fs::directory_iterator(trace)) {
    ASSERT_EQ(::stat(entry.path().c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 07777, 0600u) << entry.path();
  }
}

// ---- item 7: strings that are not UTF-8 ----------------------------------------------------

class OddBytes : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto result = run("CHRONICLE_OUTPUT=" + trace_ + " CHRONICLE_SHM_DIR=" + directory_.path() + " " + kOddBytes);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    ASSERT_EQ(run(kCli + " dump " + trace_).exit_code, 0);
  }
  TemporaryDirectory directory_;
  const std::string trace_ = directory_ / "trace";
};

TEST_F(OddBytes, StatsJsonReplacesThemAndExitsZero) {
  const auto result = run(kCli + " stats --json " + trace_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto parsed = nlohmann::json::parse(result.out);  // throws on invalid UTF-8
  EXPECT_TRUE(contains(result.out, "worker-\xEF\xBF\xBD\xEF\xBF\xBD")) << result.out;
}

TEST_F(OddBytes, ViewHtmlIsWritten) {
  const std::string html = directory_ / "page.html";
  const auto result = run(kCli + " view --html " + html + " " + trace_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(slurp(html), "caf\xEF\xBF\xBD span"));
}

TEST_F(OddBytes, TheViewersApiAnswers) {
  const std::string port_file = directory_ / "port";
  // The viewer prints its address; it runs until killed.
  const auto started = run("(" + kCli + " view --port 0 " + trace_ + " >" + port_file + " 2>/dev/null & echo $! >" +
                           (directory_ / "pid") + ")");
  ASSERT_EQ(started.exit_code, 0);
  std::string address;
  for (int attempt = 0; attempt < 600 && address.empty(); ++attempt) {
    const std::string text = slurp(port_file);
    if (const size_t at = text.find("http://"); at != std::string::npos && text.find('\n', at) != std::string::npos)
      address = text.substr(at, text.find('\n', at) - at);
    else
      usleep(50'000);
  }
  ASSERT_FALSE(address.empty()) << "the viewer never said where it listens";
  const auto summary = run("curl -s -w '\\n%{http_code}' " + address + "api/summary");
  const auto search = run("curl -s -w '\\n%{http_code}' '" + address + "api/search?q=caf&limit=10'");
  run("kill " + slurp(directory_ / "pid"));
  EXPECT_TRUE(summary.out.ends_with("\n200")) << summary.out;
  EXPECT_TRUE(contains(summary.out, "worker-\xEF\xBF\xBD\xEF\xBF\xBD")) << summary.out;
  EXPECT_TRUE(search.out.ends_with("\n200")) << search.out;
}

// ---- item 8: what is not a regular file ----------------------------------------------------

// Runs `chronicle dump` with a limit, for a reader that would wait forever.
test::CommandResult dump_with_limit(const std::string& trace) {
  return run("timeout 60 " + kCli + " dump " + trace);
}

TEST(NotAFile, AFifoNamedMetadataIsNamedNotWaitedOn) {
  TemporaryDirectory directory;
  ASSERT_EQ(::mkfifo((directory / "metadata").c_str(), 0600), 0);
  const auto result = dump_with_limit(directory.path());
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(contains(result.err, directory / "metadata")) << result.err;
  EXPECT_TRUE(contains(result.err, "FIFO")) << result.err;
}

TEST(NotAFile, ALinkLoopNamedMetadataIsNamedWithAnOffset) {
  TemporaryDirectory directory;
  fs::create_symlink("metadata", directory / "metadata");
  const auto result = dump_with_limit(directory.path());
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(contains(result.err, directory / "metadata" + ": offset 0")) << result.err;
}

// Among the streams, what is not a regular file of the trace's owner is named and skipped, the
// rest read (docs/guarantees.md); the definitions cannot be skipped.
TEST(NotAFile, ALinkLoopOrFifoAmongTheStreamsIsNamed) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_EQ(run(kCli + " record -q -o " + trace + " -- " + kExample).exit_code, 0);
  fs::create_symlink("thread-loop", trace + "/thread-loop");
  ASSERT_EQ(::mkfifo((trace + "/thread-fifo").c_str(), 0600), 0);
  auto result = dump_with_limit(trace);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.err, trace + "/thread-loop: offset 0: skipped")) << result.err;
  EXPECT_TRUE(contains(result.err, trace + "/thread-fifo: offset 0: skipped")) << result.err;
  EXPECT_TRUE(contains(result.err, "FIFO")) << result.err;
  fs::remove(trace + "/thread-fifo");
  fs::remove(trace + "/thread-loop");
  fs::remove(trace + "/strings");
  ASSERT_EQ(::mkfifo((trace + "/strings").c_str(), 0600), 0);
  result = dump_with_limit(trace);
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(contains(result.err, trace + "/strings: offset 0")) << result.err;
}

size_t line_count(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

// A trace's sub-traces (one per further process) and chunks are directories of the trace: a link
// planted where one would be leads to a trace its reader may read and the trace's owner may not.
// It is named and skipped like a linked stream file, and a directory with nothing else is refused.
TEST(NotAFile, ALinkToADirectoryIsNeverASubTraceOrAChunk) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace", other = directory / "other";
  ASSERT_EQ(run(kCli + " record -q -o " + trace + " -- " + kExample).exit_code, 0);
  ASSERT_EQ(run(kCli + " record -q -o " + other + " -- " + kExample).exit_code, 0);
  const size_t alone = line_count(dump_with_limit(trace).out);
  ASSERT_GT(alone, kExampleEvents - 1);

  fs::create_symlink(other, trace + "/planted");
  auto result = dump_with_limit(trace);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(line_count(result.out), alone) << "the linked trace was read";
  EXPECT_TRUE(contains(result.err, trace + "/planted")) << result.err;
  EXPECT_TRUE(contains(result.err, "symbolic link")) << result.err;

  const std::string folder = directory / "folder";
  fs::create_directory(folder);
  fs::create_symlink(other, folder + "/planted");
  result = dump_with_limit(folder);
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(contains(result.err, folder + "/planted")) << result.err;
  EXPECT_TRUE(result.out.empty());
}

TEST(NotAFile, ALinkAmongARotatedTracesChunksIsNamedAndSkipped) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace", other = directory / "other";
  ASSERT_EQ(run(kCli + " record -q --rotate 16K -o " + trace + " -- " + kExample).exit_code, 0);
  ASSERT_EQ(run(kCli + " record -q --rotate 16K -o " + other + " -- " + kExample).exit_code, 0);
  ASSERT_TRUE(fs::is_directory(other + "/chunk-000001"));
  const size_t alone = line_count(dump_with_limit(trace).out);
  fs::create_symlink(other + "/chunk-000001", trace + "/chunk-999999");
  const auto result = dump_with_limit(trace);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(line_count(result.out), alone) << "the linked chunk was read";
  EXPECT_TRUE(contains(result.err, trace + "/chunk-999999")) << result.err;
  EXPECT_TRUE(contains(result.err, "symbolic link")) << result.err;
}

// A sparse 4 GiB metadata or definitions file costs no disk and would cost its reader 8 GB: each
// has a cap, and a file past it is refused before it is read.
TEST(HostileSizes, AMetadataOrStringsFilePastItsCapIsRefused) {
  TemporaryDirectory directory;
  const std::string recorded = directory / "recorded";
  ASSERT_EQ(run(kCli + " record -q -o " + recorded + " -- " + kExample).exit_code, 0);
  for (const auto& [name, cap] : {std::pair{"metadata", "16 MiB"}, std::pair{"strings", "256 MiB"}}) {
    const std::string trace = directory / name;
    fs::copy(recorded, trace);
    fs::resize_file(trace + "/" + name, uint64_t{4} << 30);
    // The address-space limit keeps the unfixed reader from taking the machine's memory.
    const auto result = run(test::address_space_cap(3000000) + "timeout 60 " + kCli + " stats " + trace);
    EXPECT_EQ(result.exit_code, 2) << name << ": " << result.err;
    EXPECT_TRUE(contains(result.err, trace + "/" + name + ": offset 0: 4294967296 bytes, more than the " + cap))
        << result.err;
  }
}

// ---- item 11: record's settings and endings -------------------------------------------------

TEST(RecordSettings, ABufferTheRecorderWouldRefuseIsRefusedBeforeTheProgramRuns) {
  TemporaryDirectory directory;
  const auto result = run(kCli + " record -q --buffer-size 64K -o " + (directory / "trace") + " -- sh -c 'touch " +
                          (directory / "ran") + "; exec " + kExample + "'");
  EXPECT_NE(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.err, "must hold at least two packets")) << result.err;
  EXPECT_FALSE(fs::exists(directory / "ran")) << "the program ran untraced";
  EXPECT_FALSE(fs::exists(directory / "trace"));
}

TEST(RecordSettings, KeepShmKeepsTheMappingsAndSaysWhere) {
  TemporaryDirectory directory;
  const auto result = run(kCli + " record -q --keep-shm -o " + (directory / "trace") + " -- " + kExample);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string marker = "shared mappings kept in ";
  const size_t at = result.err.find(marker);
  ASSERT_NE(at, std::string::npos) << result.err;
  const size_t from = at + marker.size();
  const std::string kept = result.err.substr(from, result.err.find('\n', from) - from);
  size_t mappings = 0;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(kept, error)) mappings += entry.path().extension() == ".shm";
  fs::remove_all(kept, error);
  EXPECT_EQ(mappings, 1u) << kept;
}

TEST(RecordSettings, AnUnwritableOutputFailsBeforeTheProgramRuns) {
  TemporaryDirectory directory;
  const std::string output = directory / "read-only";
  SmallMount mount(output, "ro,size=1m,mode=0700");
  if (!mount.why_not().empty()) GTEST_SKIP() << "read-only output test skipped: " << mount.why_not();
  const auto result =
      run(kCli + " record -q -o " + output + " -- sh -c 'touch " + (directory / "ran") + "; exec " + kExample + "'");
  EXPECT_NE(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.err, "cannot write into " + output)) << result.err;
  EXPECT_FALSE(fs::exists(directory / "ran")) << "the program ran with nowhere to write its trace";
}

TEST(RecordSettings, AProgramThatDaemonizesKeepsItsTrace) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  const auto result = run(kCli + " record -q -o " + trace + " -- sh -c '" + kExample + " &'");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_TRUE(fs::exists(trace + "/metadata")) << result.err;
  reader::Trace read(trace);
  EXPECT_EQ(test::read_all(read).size(), kExampleEvents) << result.err;
}

// A process left behind that never ends (here an untraced sleep): Ctrl-C ends the wait, with
// the trace of what ended before it, and the summary says so.
TEST(RecordSettings, ASignalEndsTheWaitForProcessesLeftRunning) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  const std::string left = directory / "left.pid";
  const std::string script =
      kCli + " record -q -o " + trace + " -- sh -c '" + kExample + "; sleep 300 & echo $! >" + left + "' 2>" +
      (directory / "err") + " & record=$!; tries=0; while [ ! -s " + left +
      " ] && [ $tries -lt 1200 ]; do sleep 0.05; tries=$((tries + 1)); done; kill -INT $record; " +
      "wait $record; echo $?; kill $(cat " + left + ")";
  const auto result = run("{ " + script + "; }");
  const std::string err = slurp(directory / "err");
  EXPECT_EQ(result.out, "0\n") << err;
  EXPECT_TRUE(contains(err, "stopped waiting for the processes sh left running")) << err;
  reader::Trace read(trace);
  EXPECT_EQ(test::read_all(read).size(), kExampleEvents) << err;
}

// A writer flat out into small rings: record loses events to it, and when it does it says so and
// why, whether or not its stderr is a terminal (issue 44: `record --compress` lost events under a
// busy machine's load and said only how many). When nothing is lost it says nothing of the kind.
TEST(RecordSettings, SaysWhyItFellBehindWhenTheRingsOverflowed) {
  TemporaryDirectory directory;
  for (const std::string compress : {"", "--compress "}) {
    SCOPED_TRACE(compress);
    const std::string trace = directory / ("trace" + std::to_string(compress.size()));
    const auto result =
        run(kCli + " record " + compress + "--buffer-size 256K -o " + trace + " -- " + kFlatOut + " 2 2000000");
    ASSERT_EQ(result.exit_code, 0) << result.err;
    reader::Trace read(trace);
    const bool lost = read.events_discarded() > 0;
    ::testing::Test::RecordProperty(compress.empty() ? "lost_plain" : "lost_compressed", lost ? "yes" : "no");
    const bool said = contains(result.err, "record fell behind the program; at the worst, falling behind: ");
    EXPECT_EQ(said, lost) << result.err;
    if (lost) {
      EXPECT_TRUE(contains(result.err, "% of a core: copying") || contains(result.err, "the machine is busy"))
          << result.err;
    }
  }
}

TEST(RecordSettings, AFullDiskLeavesAReadableTraceAndSaysWhatWasLost) {
  TemporaryDirectory directory;
  const std::string disk = directory / "disk";
  SmallMount mount(disk, "size=2m");
  if (!mount.why_not().empty()) GTEST_SKIP() << "full disk test skipped: " << mount.why_not();
  const std::string trace = disk + "/trace";
  const std::string pid_file = directory / "record.pid";
  // exec keeps the shell's pid: record's, which names its /dev/shm directory. Packets of 4 KiB
  // (tmpfs's page) fill the disk to its last page: nothing is left for the last files.
  const auto result = run("CHRONICLE_PACKET_SIZE=4K sh -c 'echo $$ >" + pid_file + "; exec " + kCli + " record -q -o " +
                          trace + " -- " + kFlatOut + " 2 400000'");
  const std::string shm_dir = "/dev/shm/chronicle-record-" + slurp(pid_file).substr(0, slurp(pid_file).find('\n'));
  const bool leaked = fs::exists(shm_dir);
  std::error_code ignored;
  fs::remove_all(shm_dir, ignored);
  EXPECT_FALSE(leaked) << "record left " << shm_dir;
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.err, "not written")) << result.err;
  ASSERT_TRUE(fs::exists(trace + "/strings")) << result.err;
  reader::Trace read(trace);
  size_t named = 0;
  const auto events = test::read_all(read);
  for (const auto& event : events) {
    const auto* site = read.site(event.name_id);
    named += site && site->name == "out";
  }
  EXPECT_GT(events.size(), 0u);
  EXPECT_EQ(named, events.size()) << "every event written has its definition";
  EXPECT_GT(read.description().losses.packets_unwritten, 0u) << "the trace says what it lacks";
  EXPECT_EQ(named + read.events_discarded() + read.description().losses.events_unwritten, 800'000u)
      << "every event is in the trace or counted in it";
}

// The same with --compress and --rotate (a chunk per unit: each takes a few pages, and the disk
// fills with chunks): a chunk that cannot begin (no room for it and its last
// files) leaves the current one going on, and every event the program wrote is in the trace or
// counted, in the trace itself.
TEST(RecordSettings, AFullDiskUnderRotationAndCompressionLosesNothingUncounted) {
  TemporaryDirectory directory;
  const std::string disk = directory / "disk";
  SmallMount mount(disk, "size=512k");
  if (!mount.why_not().empty()) GTEST_SKIP() << "full disk test skipped: " << mount.why_not();
  const std::string trace = disk + "/trace";
  const auto result = run(kCli + " record -q --compress --rotate 1K -o " + trace + " -- " + kFlatOut + " 2 4000000");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.err, "could not begin")) << "the disk should fill: " << result.err;
  reader::Trace read(trace);
  uint64_t out = 0;
  const auto events = test::read_all(read);
  for (const auto& event : events) {
    const auto* site = read.site(event.name_id);
    ASSERT_NE(site, nullptr) << "every event written has its definition";
    out += site->name == "out";
  }
  EXPECT_GT(out, 0u);
  EXPECT_EQ(out + read.events_discarded() + read.description().losses.events_unwritten, 8'000'000u)
      << "in the trace: " << out << ", discarded: " << read.events_discarded()
      << ", unwritten: " << read.description().losses.events_unwritten;
}

// A chunk that cannot begin (the disk has no room for it) loses nothing: the chunk being written
// goes on. It is not told as a loss, and it is not tried again at every packet: each try makes a
// directory, asks for room and removes the directory, and the collector tried at every packet
// (strace on main: 196 mkdir and 192 refused fallocate in this run's 0.47 s). After a failure it
// tries again a second later at the earliest; the summary says how often it tried.
TEST(RecordSettings, AChunkThatCannotBeginIsToldApartFromLossesAndTriedAtMostOnceASecond) {
  TemporaryDirectory directory;
  const std::string disk = directory / "disk";
  SmallMount mount(disk, "size=512k");
  if (!mount.why_not().empty()) GTEST_SKIP() << "full disk test skipped: " << mount.why_not();
  const auto began = std::chrono::steady_clock::now();
  const auto result =
      run(kCli + " record -q --compress --rotate 1K -o " + disk + "/trace -- " + kFlatOut + " 2 4000000");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_FALSE(contains(result.err, "lost: cannot begin")) << "not a loss:\n" << result.err;
  std::smatch tries;
  ASSERT_TRUE(std::regex_search(result.err, tries, std::regex(R"(could not begin: tried (\d+) times?)")))
      << "the summary says a chunk could not begin, and how often it was tried:\n"
      << result.err;
  EXPECT_GE(std::stoull(tries[1]), 1u);
  EXPECT_LE(std::stoull(tries[1]), 1 + static_cast<uint64_t>(seconds))
      << "tried more than once a second in the " << seconds << " s of the run:\n"
      << result.err;
}

// ---- a session with no memory for its rings says so, once ------------------------------------

// A tmpfs of 5 MiB holds a session's fixed part (about 4.2 MiB: the header, the tables and the
// 4 MiB strings packet; with less, start() fails and says why) but no 2 MiB ring: every thread
// gets no channel and every event is counted as lost (no_channel).
constexpr std::string_view kRoomForNoRing = "size=5m";
constexpr std::string_view kNoMemoryMessage = "no memory for";

size_t occurrences(const std::string& text, std::string_view what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

TEST(SmallShm, ASessionStartedByTheEnvironmentWithNoMemoryForItsRingsSaysSoOnce) {
  TemporaryDirectory directory;
  const std::string shm = directory / "shm";
  SmallMount mount(shm, std::string(kRoomForNoRing));
  if (!mount.why_not().empty()) GTEST_SKIP() << mount.why_not();
  const auto result = run("CHRONICLE_OUTPUT=" + (directory / "trace") + " CHRONICLE_SHM_DIR=" + shm +
                          " CHRONICLE_BUFFER_SIZE=2M " + kFlatOut + " 4 1000");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(reader::Trace(directory / "trace").description().losses.events_no_channel, 4000u);
  EXPECT_EQ(occurrences(result.err, kNoMemoryMessage), 1u) << result.err;
}

// Under `record`, the program says nothing of it (record collects its session) and record says it
// once. /dev/shm is a small tmpfs in a mount namespace of the command's own.
TEST(SmallShm, RecordSaysOnceThatAProgramHasNoMemoryForItsRings) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (unshare -m, mount -t tmpfs)";
  TemporaryDirectory directory;
  const auto result =
      run("unshare -m sh -c 'mount -t tmpfs -o " + std::string(kRoomForNoRing) + " chronicle-test /dev/shm && exec " +
          kCli + " record -q --buffer-size 2M -o " + (directory / "trace") + " -- " + kFlatOut + " 4 1000'");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(reader::Trace(directory / "trace").description().losses.events_no_channel, 4000u);
  EXPECT_EQ(occurrences(result.err, kNoMemoryMessage), 1u) << result.err;
}

// ---- files the tools write (issue 40) -------------------------------------------------------

mode_t mode_of(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(::lstat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

// A directory others may write (mode `mode`, 01777 or 0777) inside a root-only temporary one that
// the second user may pass through, and a root-only file there the tools must never touch.
class PlantedLinks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!other_.why_not().empty()) GTEST_SKIP() << "planted-link tests need a second user: " << other_.why_not();
    fs::permissions(directory_.path(), fs::perms::owner_all | fs::perms::others_exec | fs::perms::group_exec);
    std::ofstream(victim_) << "precious\n";
    fs::permissions(victim_, fs::perms::owner_read | fs::perms::owner_write);
    fs::create_directories(root_only_);
    fs::permissions(root_only_, fs::perms::owner_all);
    const auto recorded = run(kCli + " record -q -o " + trace_ + " -- " + kExample);
    ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  }
  std::string shared(mode_t mode) {
    const std::string path = directory_ / fmt_mode(mode);
    fs::create_directories(path);
    ::chmod(path.c_str(), mode);
    return path;
  }
  static std::string fmt_mode(mode_t mode) { return "shared-" + std::to_string(mode); }
  // The second user puts a symbolic link to `target` at `at`.
  void plant(const std::string& target, const std::string& at) {
    const auto planted = run(other_.as("ln -s " + target + " " + at));
    ASSERT_EQ(planted.exit_code, 0) << planted.err;
    ASSERT_TRUE(fs::is_symlink(at));
  }
  test::SecondUser other_;
  TemporaryDirectory directory_;
  const std::string victim_ = directory_ / "victim";
  const std::string root_only_ = directory_ / "root-only";
  const std::string trace_ = directory_ / "trace";
};

TEST_F(PlantedLinks, ViewHtmlNeverWritesThroughALinkAtItsOutput) {
  for (const mode_t mode : {mode_t{01777}, mode_t{0777}}) {
    const std::string page = shared(mode) + "/page.html";
    plant(victim_, page);
    const auto result = run(kCli + " view --no-cache " + trace_ + " --html " + page);
    EXPECT_TRUE(slurp(victim_) == "precious\n")
        << "view --html wrote through a link in a directory of mode " << std::oct << mode << ":\n"
        << result.err;
    if (result.exit_code == 0) {
      EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(page))) << page;
      EXPECT_EQ(mode_of(page), 0600u) << page;
    }
  }
}

TEST_F(PlantedLinks, ExportNeverWritesThroughALinkAtItsOutput) {
  for (const std::string format : {"chrome", "otlp", "sqlite"}) {
    const std::string output = shared(01777) + "/out." + format;
    plant(victim_, output);
    const auto result = run(kCli + " export " + trace_ + " --force --format " + format + " -o " + output);
    EXPECT_TRUE(slurp(victim_) == "precious\n") << format << " wrote through a link:\n" << result.err;
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(output))) << output;
  }
}

// Record, snapshot, merge and convert never follow a directory link another user planted at the
// output's name (here to a directory of root's alone), in a sticky directory every user may write.
TEST_F(PlantedLinks, NoOutputDirectoryFollowsALinkAnotherUserPlanted) {
  const std::string sticky = shared(01777);
  const auto kept = run(kCli + " record -q --keep-shm -o " + (directory_ / "kept") + " -- " + kExample);
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  const std::string marker = "shared mappings kept in ";
  const size_t from = kept.err.find(marker) + marker.size();
  ASSERT_NE(from, std::string::npos + marker.size()) << kept.err;
  const std::string kept_dir = kept.err.substr(from, kept.err.find('\n', from) - from);
  std::string mapping;
  for (const auto& entry : fs::directory_iterator(kept_dir)) mapping = entry.path();
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"record", kCli + " record -q -o OUT -- " + kExample},
      {"snapshot", kCli + " snapshot " + mapping + " -o OUT"},
      {"merge", kCli + " merge -o OUT " + trace_},
      {"convert", kCli + " convert " + trace_ + " OUT"},
  };
  for (const auto& [name, command] : commands) {
    const std::string output = sticky + "/" + name;
    plant(root_only_, output);
    const auto result = run(std::regex_replace(command, std::regex("OUT"), output));
    EXPECT_TRUE(fs::is_empty(root_only_)) << name << " wrote into the directory a planted link named:\n" << result.err;
    EXPECT_EQ(result.exit_code, 2) << name << ":\n" << result.err;
    EXPECT_TRUE(contains(result.err, output)) << name << ":\n" << result.err;
    for (const auto& entry : fs::directory_iterator(root_only_)) fs::remove_all(entry.path());
  }
  fs::remove_all(kept_dir);
}

// A program started with CHRONICLE_OUTPUT claims its output directory with a marker file: never
// through a directory link another user planted at that name.
TEST_F(PlantedLinks, AnEnvironmentSessionClaimsNoDirectoryThroughALink) {
  const std::string output = shared(01777) + "/env";
  plant(root_only_, output);
  const auto result = run("CHRONICLE_OUTPUT=" + output + " " + kExample);
  EXPECT_TRUE(fs::is_empty(root_only_)) << "the session wrote into the directory a planted link named:\n" << result.err;
  EXPECT_EQ(result.exit_code, 0) << "a trace point never harms the program:\n" << result.err;
  EXPECT_TRUE(contains(result.err, output)) << result.err;
}

TEST(FilesTheToolsWrite, SnapshotRefusesADirectoryOtherUsersMayWrite) {
  TemporaryDirectory directory;
  const auto kept = run(kCli + " record -q --keep-shm -o " + (directory / "kept") + " -- " + kExample);
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  const std::string marker = "shared mappings kept in ";
  const size_t at = kept.err.find(marker);
  ASSERT_NE(at, std::string::npos) << kept.err;
  const std::string kept_dir = kept.err.substr(at + marker.size(), kept.err.find('\n', at) - at - marker.size());
  std::string mapping;
  for (const auto& entry : fs::directory_iterator(kept_dir)) mapping = entry.path();
  const std::string shared = directory / "shared";
  fs::create_directories(shared);
  fs::permissions(shared, fs::perms::all);  // 0777, no sticky bit
  const auto result = run(kCli + " snapshot " + mapping + " -o " + shared);
  fs::remove_all(kept_dir);
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(contains(result.err, "writable by every user")) << result.err;
  EXPECT_TRUE(fs::is_empty(shared));
}

// Exports and pages hold what the trace holds (names, notes, arguments): as private as it is.
TEST(FilesTheToolsWrite, OutputsArePrivateWhateverTheUmask) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_EQ(run(kCli + " record -q -o " + trace + " -- " + kExample).exit_code, 0);
  for (const std::string format : {"chrome", "otlp", "sqlite"}) {
    const std::string output = directory / ("out." + format);
    const auto result = run("umask 022; " + kCli + " export " + trace + " --format " + format + " -o " + output);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(mode_of(output), 0600u) << output;
  }
  const std::string page = directory / "page.html";
  const auto viewed = run("umask 022; " + kCli + " view --no-cache " + trace + " --html " + page);
  ASSERT_EQ(viewed.exit_code, 0) << viewed.err;
  EXPECT_EQ(mode_of(page), 0600u) << page;
}

// `record` never removes a directory it did not make, even one of the name it would use.
TEST(FilesTheToolsWrite, RecordLeavesAShmDirectoryOfItsNameThatItDidNotMake) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  // exec keeps the shell's pid: the directory is planted under the name of record's pid.
  // A shell whose pid names a directory already there (a record killed earlier) cannot plant one:
  // another shell, of another pid, tries.
  const std::string planted = "/dev/shm/chronicle-record-$$";
  test::CommandResult result;
  std::string name;
  for (int attempt = 0; attempt < 20 && name.empty(); ++attempt) {
    result =
        run("sh -c 'mkdir " + planted + " || exit 0; echo theirs > " + planted + "/precious && echo " + planted +
            " > " + (directory / "planted") + " && exec " + kCli + " record -q -o " + trace + " -- " + kExample + "'");
    name = slurp(directory / "planted");
    name = name.substr(0, name.find('\n'));
  }
  ASSERT_FALSE(name.empty()) << "every shell's pid named a directory already in /dev/shm";
  const std::string precious = slurp(name + "/precious");
  std::error_code ignored;
  fs::remove_all(name, ignored);
  EXPECT_EQ(precious, "theirs\n") << "record removed " << name << ":\n" << result.err;
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(test::read_all(reader::Trace(trace)).size(), kExampleEvents);
}

}  // namespace
}  // namespace chronicle
