// The viewer's index cache: the first view of a trace builds the index and keeps it beside the
// trace, the next one reads it (told by OpenedIndex::from_cache and by view's log line, never by
// a time), and what the read index answers is what the built one answers, window for window.
// A changed trace, a cache cut short or of another kind is not used: the index is built again.
#include <gtest/gtest.h>
#include <httplib.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <malloc.h>

#include <csignal>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "reader/trace_reader.hpp"
#include "support.hpp"
#include "viewer/index_cache.hpp"
#include "viewer/json_api.hpp"
#include "viewer/spill.hpp"
#include "viewer/timeline_index.hpp"

namespace chronicle {
namespace {

namespace fs = std::filesystem;
using test::run;
using test::TemporaryDirectory;
using viewer::IndexCache;
using viewer::OpenedIndex;
using viewer::TimelineIndex;

const std::string kCli = CHRONICLE_CLI;
const std::string kDemo = TIMELINE_DEMO;

std::string record_demo(const TemporaryDirectory& directory, const std::string& arguments = "120 3") {
  const std::string trace = directory / "trace";
  const auto result = run(kCli + " record -q -o " + trace + " -- " + kDemo + " " + arguments);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return trace;
}

// A large demo trace with room for every event (the figures the tests expect need them all).
std::string record_whole_demo(const TemporaryDirectory& directory, const std::string& arguments) {
  const std::string trace = directory / "trace";
  const auto result = run(kCli + " record -q --buffer-size 64M -o " + trace + " -- " + kDemo + " " + arguments);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find(" 0 discarded"), std::string::npos) << result.err;
  return trace;
}

uint64_t events_in(const std::string& directory) {
  uint64_t events = 0;
  const reader::Trace trace(directory);
  for (size_t stream = 0; stream < trace.streams().size(); ++stream)
    trace.for_each_in_stream(stream, [&](const reader::Event&) { return ++events, true; });
  return events;
}

std::string cache_of(const std::string& trace) {
  return (fs::path(trace) / IndexCache::kFileName).string();
}

// Every answer the page asks for, over windows from the whole trace to a thousandth of it, and
// each task's details (with its critical path).
nlohmann::json answers(const TimelineIndex& index) {
  nlohmann::json out;
  out["summary"] = viewer::summary_json(index, "t");
  const uint64_t duration = index.duration();
  for (uint64_t parts : {1, 10, 1000})
    for (uint64_t at : {uint64_t{0}, parts / 2, parts - 1}) {
      const uint64_t length = duration / parts;
      out["windows"].push_back(viewer::window_json(index, at * length, at * length + length, 800));
      out["flames"].push_back(viewer::flame_json(index, at * length, at * length + length));
      out["stats"].push_back(viewer::stats_json(index, at * length, at * length + length));
    }
  for (uint32_t task = 0; task < index.task_lines().size(); ++task)
    out["tasks"].push_back(viewer::task_details_json(index, task));
  out["search"] = viewer::search_json(index, "job", 1000);
  for (uint32_t counter = 0; counter < index.counters().size(); ++counter)
    out["counters"].push_back(viewer::counter_json(index, counter, 0, duration));
  return out;
}

TEST(IndexCache, TheSecondOpenReadsTheIndexTheFirstKept) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory);
  ASSERT_FALSE(fs::exists(cache_of(trace)));

  const OpenedIndex first = viewer::open_index(trace);
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(first.cache_path, cache_of(trace));
  EXPECT_EQ(first.cache_problem, "");
  ASSERT_TRUE(fs::exists(cache_of(trace)));

  const OpenedIndex second = viewer::open_index(trace);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.cache_problem, "");
  EXPECT_EQ(second.index.title(), first.index.title());

  const TimelineIndex built = TimelineIndex::build(reader::Trace(trace));
  ASSERT_GT(built.task_lines().size(), 10u);
  ASSERT_GT(built.counters().size(), 0u);
  EXPECT_EQ(answers(second.index), answers(built));
  EXPECT_EQ(answers(first.index), answers(built));
}

// A task's details and critical path read that task's record and the few the walk reaches, not
// the graphs whole (at a billion events those took 98 s and 13 GiB for the first click).
TEST(IndexCache, ATasksDetailsReadTheTasksItNeedsNotTheWholeGraph) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory);
  viewer::open_index(trace);
  const OpenedIndex read = viewer::open_index(trace);
  ASSERT_TRUE(read.from_cache);
  ASSERT_GT(read.index.task_lines().size(), 10u);
  size_t steps = 0;
  for (uint32_t task = 0; task < read.index.task_lines().size(); ++task)
    steps += viewer::task_details_json(read.index, task)["critical_path"]["steps"].size();
  EXPECT_GT(steps, read.index.task_lines().size()) << "paths that go through other tasks";
  EXPECT_FALSE(read.index.graphs_held());
  read.index.graphs();
  EXPECT_TRUE(read.index.graphs_held());
}

// Kilobytes of `path`'s mappings in this process that are resident (/proc/self/smaps).
uint64_t resident_kib_of_mapping(const std::string& path) {
  std::ifstream smaps("/proc/self/smaps");
  uint64_t kib = 0;
  bool in_file = false;
  for (std::string line; std::getline(smaps, line);) {
    const bool header = line.find('-') < line.find(' ') && line.find(':') > line.find(' ');
    if (header) {
      in_file = line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0;
    } else if (in_file && line.rfind("Rss:", 0) == 0) {
      kib += std::stoull(line.substr(4));
    }
  }
  return kib;
}

// Reopening reads the whole index once for its checksum, and lets those pages go: what stays
// resident is what the reading of its description touched, not the file (at 100 M events the
// reopened viewer held 3.9 GiB of it).
TEST(IndexCache, AReopenedIndexIsNotResidentWhole) {
  TemporaryDirectory directory;
  const std::string trace = record_whole_demo(directory, "20000 4 10 0 0");
  viewer::open_index(trace);
  const uint64_t file_kib = fs::file_size(cache_of(trace)) / 1024;
  ASSERT_GT(file_kib, 16u * 1024) << "an index of some megabytes";
  const OpenedIndex read = viewer::open_index(trace);
  ASSERT_TRUE(read.from_cache);
  const uint64_t resident = resident_kib_of_mapping(fs::canonical(cache_of(trace)).string());
  EXPECT_LT(resident, file_kib / 8) << "of " << file_kib << " KiB";
  std::printf("resident after reopening: %llu of %llu KiB\n", static_cast<unsigned long long>(resident),
              static_cast<unsigned long long>(file_kib));
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The structs written as bytes name their padding and zero it: no byte of the viewer's memory
// goes into the file (0600, but it may be copied with the trace), and one trace's index is the
// same file whatever the memory held before. M_PERTURB fills each allocation with a different
// byte for each build (glibc's malloc; under a sanitizer's it does nothing).
TEST(IndexCache, OneTracesIndexIsTheSameFileEveryTime) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory);
  const std::string identity = IndexCache::identity(trace, {trace});
  const reader::Trace opened(trace);
  for (const int fill : {0x11, 0x77}) {
    mallopt(M_PERTURB, fill);
    const TimelineIndex index = TimelineIndex::build(opened);
    mallopt(M_PERTURB, 0);
    IndexCache::save(index, directory / fmt::format("index-{}", fill), identity);
  }
  const std::string first = file_bytes(directory / "index-17");
  ASSERT_GT(first.size(), 1000u);
  const std::string second = file_bytes(directory / "index-119");
  ASSERT_EQ(first.size(), second.size());
  size_t differing = 0;
  for (size_t k = 0; k < first.size(); ++k) differing += first[k] != second[k];
  EXPECT_EQ(differing, 0u) << "of " << first.size() << " bytes";
}

TEST(IndexCache, ProgressIsToldOfTheEventsReadAndOfTheWriting) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory, "30 2");
  std::vector<uint64_t> reads;
  int writes = 0;
  viewer::OpenProgress progress{[&](uint64_t events) { reads.push_back(events); }, [&] { ++writes; }, {}};
  const OpenedIndex first = viewer::open_index(trace, true, progress);
  ASSERT_FALSE(reads.empty());
  EXPECT_TRUE(std::is_sorted(reads.begin(), reads.end()));
  EXPECT_EQ(reads.back(), first.index.event_count());
  EXPECT_EQ(reads.back(), events_in(trace));
  EXPECT_EQ(writes, 1);
  reads.clear();
  const OpenedIndex second = viewer::open_index(trace, true, progress);
  ASSERT_TRUE(second.from_cache);
  EXPECT_TRUE(reads.empty()) << "nothing is read from the trace";
  EXPECT_EQ(writes, 1);
}

TEST(IndexCache, TheReaderAndBabeltraceSeeNoNewStream) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory, "20 2");
  const uint64_t events = events_in(trace);
  viewer::open_index(trace);
  ASSERT_TRUE(fs::exists(cache_of(trace)));
  EXPECT_EQ(events_in(trace), events);
  EXPECT_TRUE(reader::Trace(trace).warnings().empty());
}

TEST(IndexCache, AChangedTraceIsIndexedAgain) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory, "20 2");
  viewer::open_index(trace);
  ASSERT_TRUE(viewer::open_index(trace).from_cache);
  // Another recording's files in its place, the cache file left: other events, sizes, times.
  TemporaryDirectory other_directory;
  const std::string other = record_demo(other_directory, "40 2");
  for (const auto& entry : fs::directory_iterator(trace))
    if (!entry.path().filename().string().starts_with(".")) fs::remove_all(entry.path());
  for (const auto& entry : fs::directory_iterator(other))
    fs::copy(entry.path(), fs::path(trace) / entry.path().filename());
  ASSERT_TRUE(fs::exists(cache_of(trace)));
  const OpenedIndex again = viewer::open_index(trace);
  EXPECT_FALSE(again.from_cache);
  EXPECT_EQ(again.index.event_count(), events_in(trace));
  // Only a stream's time changed: still another trace as far as the cache can tell.
  ASSERT_TRUE(viewer::open_index(trace).from_cache);
  for (const auto& entry : fs::directory_iterator(trace))
    if (entry.path().filename() != "metadata" && !entry.path().filename().string().starts_with(".")) {
      fs::last_write_time(entry.path(), fs::last_write_time(entry.path()) - std::chrono::seconds(5));
      break;
    }
  EXPECT_FALSE(viewer::open_index(trace).from_cache);
  EXPECT_TRUE(viewer::open_index(trace).from_cache);
}

// A rotated trace's files are in its chunks: the identity of the cache must see them change (here
// as --max-size changes them, its oldest chunk removed).
TEST(IndexCache, ARotatedTraceWhoseOldestChunkWentIsIndexedAgain) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  const auto recorded = run(kCli + " record -q --rotate 16K -o " + trace + " -- " + kDemo + " 120 3");
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  ASSERT_TRUE(fs::is_directory(trace + "/chunk-000003")) << recorded.err;
  const uint64_t all_events = events_in(trace);
  EXPECT_EQ(viewer::open_index(trace).index.event_count(), all_events);
  ASSERT_TRUE(viewer::open_index(trace).from_cache);
  fs::remove_all(trace + "/chunk-000001");
  const OpenedIndex again = viewer::open_index(trace);
  EXPECT_FALSE(again.from_cache);
  EXPECT_EQ(again.index.event_count(), events_in(trace));
  EXPECT_LT(events_in(trace), all_events);
  EXPECT_GT(events_in(trace), 0u);
}

TEST(IndexCache, ADamagedCacheIsNotUsedAndIsReplaced) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory, "30 2");
  const nlohmann::json expected = answers(TimelineIndex::build(reader::Trace(trace)));
  viewer::open_index(trace);
  const std::string cache = cache_of(trace);
  const auto size = fs::file_size(cache);
  auto damage = [&](const std::function<void()>& how) {
    how();
    const OpenedIndex opened = viewer::open_index(trace);
    EXPECT_FALSE(opened.from_cache);
    EXPECT_EQ(answers(opened.index), expected);
    EXPECT_TRUE(viewer::open_index(trace).from_cache) << "the damaged file is replaced";
  };
  damage([&] { fs::resize_file(cache, size / 2); });
  damage([&] { fs::resize_file(cache, 10); });
  damage([&] {
    std::fstream file(cache, std::ios::in | std::ios::out | std::ios::binary);
    file.write("garbage!", 8);
  });
  damage([&] {
    // The description's counts and offsets (the file's end) turned to large numbers.
    fs::resize_file(cache, size);
    std::fstream file(cache, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(size - 4096));
    const std::string ones(4096, '\xff');
    file.write(ones.data(), static_cast<std::streamsize>(ones.size()));
  });
}

// A trace may arrive (a tarball) with an index beside it that was damaged or planted: every byte
// of the index is input. Each trial flips one byte of a real index (a deterministic seed picks
// which and how) and opens the trace in a child process, which must neither crash nor answer
// anything but what a fresh index answers.
TEST(IndexCache, AnIndexWithAnyByteFlippedIsNeverACrashAndAnswersAsAFreshOne) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory, "30 2");
  const nlohmann::json expected = answers(TimelineIndex::build(reader::Trace(trace)));
  viewer::open_index(trace);
  const std::string cache = cache_of(trace);
  const std::string original = file_bytes(cache);
  ASSERT_FALSE(original.empty());
  constexpr unsigned kTrials = 150;
  for (unsigned seed = 0; seed < kTrials; ++seed) {
    std::mt19937_64 random(seed);
    std::string damaged = original;
    // Half the trials in the first 4 KiB (the header and the first columns), half anywhere.
    const size_t span = seed % 2 == 0 ? std::min<size_t>(4096, damaged.size()) : damaged.size();
    const size_t at = random() % span;
    damaged[at] = static_cast<char>(damaged[at] ^ (1 + random() % 255));
    std::ofstream(cache, std::ios::binary | std::ios::trunc) << damaged;
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      bool same = false;
      try {
        same = answers(viewer::open_index(trace).index) == expected;
      } catch (...) {
      }
      _exit(same ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status)) << "seed " << seed << ", byte " << at << ": killed by signal "
                                   << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "seed " << seed << ", byte " << at << ": a different answer or an exception";
  }
}

TEST(IndexCache, AnUnwritableDirectoryStillOpensWithAWarning) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory, "20 2");
  // A directory where the cache file should be: it cannot be written, whoever runs the test.
  fs::create_directory(cache_of(trace));
  const OpenedIndex opened = viewer::open_index(trace);
  EXPECT_FALSE(opened.from_cache);
  EXPECT_NE(opened.cache_problem.find("not kept"), std::string::npos) << opened.cache_problem;
  EXPECT_EQ(opened.index.event_count(), events_in(trace));
  size_t leftovers = 0;
  for (const auto& entry : fs::directory_iterator(trace))
    leftovers += entry.path().filename().string().starts_with(std::string(IndexCache::kFileName) + ".");
  EXPECT_EQ(leftovers, 0u);
}

// `chronicle view TRACE --port 0` running in the background, its output in files.
class BackgroundView {
 public:
  BackgroundView(const TemporaryDirectory& directory, const std::string& trace)
      : out_(directory / "view.out"), err_(directory / "view.err") {
    pid_ = fork();
    if (pid_ == 0) {
      const std::string line = "exec " + kCli + " view " + trace + " --port 0 > " + out_ + " 2> " + err_;
      execl("/bin/sh", "sh", "-c", line.c_str(), nullptr);
      _exit(127);
    }
  }
  ~BackgroundView() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Waits (up to a minute) until its standard output or error holds `text`; false when it does
  // not, or when it ended first.
  bool wait_for(const std::string& text, bool in_err = true) {
    for (int wait = 0; wait < 6000; ++wait) {
      if (slurp(in_err ? err_ : out_).find(text) != std::string::npos) return true;
      if (!exited_ && waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
      if (exited_) return slurp(in_err ? err_ : out_).find(text) != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  uint16_t port() const {
    const std::string out = slurp(out_);
    const size_t colon = out.rfind(':');
    return colon == std::string::npos ? 0 : static_cast<uint16_t>(std::stoi(out.substr(colon + 1)));
  }
  std::string get(const std::string& path) const {
    httplib::Client client("127.0.0.1", port());
    const auto answer = client.Get(path);
    return answer && answer->status == 200 ? answer->body : "(no answer)";
  }
  void stop() const {
    if (!exited_) kill(pid_, SIGINT);
  }
  // Its exit status after it ends (-1 when killed by a signal).
  int wait() {
    if (!exited_) waitpid(pid_, &status_, 0);
    exited_ = true;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  }
  std::string err() const { return slurp(err_); }

 private:
  static std::string slurp(const std::string& path) {
    std::ifstream file(path);
    return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  }
  std::string out_, err_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

size_t index_leftovers(const std::string& trace) {
  size_t leftovers = 0;
  for (const auto& entry : fs::directory_iterator(trace))
    leftovers += entry.path().filename().string().starts_with(std::string(IndexCache::kFileName) + ".");
  return leftovers;
}

// A server answers from the index it built at once, and keeps it beside the trace meanwhile;
// once kept it answers the same from the file, and the next view reads it.
TEST(IndexCache, ViewServesTheIndexItBuiltWhileItKeepsItAndTheSameAfter) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory);
  BackgroundView view(directory, trace);
  ASSERT_TRUE(view.wait_for("http://", false)) << view.err();
  EXPECT_NE(view.err().find("being kept in " + cache_of(trace) + " while it is served"), std::string::npos)
      << view.err();
  const std::vector<std::string> asked{"/api/summary", "/api/window?begin=0&end=100000000&width=800",
                                       "/api/task?index=3", "/api/search?q=compute"};
  std::vector<std::string> built;
  for (const std::string& path : asked) built.push_back(view.get(path));
  ASSERT_TRUE(view.wait_for("chronicle: kept the index in " + cache_of(trace))) << view.err();
  for (size_t k = 0; k < asked.size(); ++k) {
    EXPECT_NE(built[k], "(no answer)") << asked[k];
    EXPECT_EQ(view.get(asked[k]), built[k]) << asked[k];
  }
  view.stop();
  EXPECT_EQ(view.wait(), 0) << view.err();
  const auto again = run(kCli + " view " + trace + " --html /dev/null");
  EXPECT_NE(again.err.find("chronicle: read the index of "), std::string::npos) << again.err;
}

// Stopped while it keeps the index, view finishes it first; stopped again, it keeps none and
// leaves no file. Either way no partial index is ever left for the next view.
TEST(IndexCache, ViewStoppedWhileKeepingTheIndexLeavesItWholeOrNone) {
  for (const bool stop_twice : {false, true}) {
    SCOPED_TRACE(stop_twice ? "stopped twice" : "stopped once");
    TemporaryDirectory directory;
    const std::string trace = record_demo(directory, "3000 4");
    BackgroundView view(directory, trace);
    ASSERT_TRUE(view.wait_for("http://", false)) << view.err();
    view.stop();
    if (stop_twice && view.wait_for("stop again to keep none")) view.stop();
    EXPECT_EQ(view.wait(), 0) << view.err();
    EXPECT_EQ(index_leftovers(trace), 0u) << view.err();
    const std::string said = view.err();
    const bool kept = said.find("chronicle: kept the index in") != std::string::npos;
    EXPECT_TRUE(kept || (stop_twice && said.find("stopped before the index was kept") != std::string::npos)) << said;
    EXPECT_EQ(fs::exists(cache_of(trace)), kept) << said;
    const auto again = run(kCli + " view " + trace + " --html /dev/null");
    EXPECT_NE(again.err.find(kept ? "chronicle: read the index of " : "chronicle: indexed "), std::string::npos)
        << again.err;
  }
}

TEST(IndexCache, ViewSaysWhetherItIndexedOrReadTheIndex) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory, "20 2");
  const std::string page = directory / "page.html";
  const auto first = run(kCli + " view " + trace + " --html " + page);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("chronicle: indexed "), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("kept in " + cache_of(trace)), std::string::npos) << first.err;
  const auto second = run(kCli + " view " + trace + " --html " + page);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("chronicle: read the index of "), std::string::npos) << second.err;
  const auto uncached = run(kCli + " view --no-cache " + trace + " --html " + page);
  ASSERT_EQ(uncached.exit_code, 0) << uncached.err;
  EXPECT_NE(uncached.err.find("chronicle: indexed "), std::string::npos) << uncached.err;
  EXPECT_EQ(uncached.err.find("kept in"), std::string::npos) << uncached.err;
}

// The large arrays of an index being built can live in files (spill.hpp): the index they make
// answers as the one built in memory, and nothing is left behind when it is let go.
size_t entries_in(const std::string& directory) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(directory), fs::directory_iterator()));
}

TEST(IndexSpill, AnIndexBuiltInFilesIsTheIndexBuiltInMemory) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory);
  const TimelineIndex in_memory = TimelineIndex::build(reader::Trace(trace));
  EXPECT_EQ(viewer::spill_stats().files, 0u);  // no scope: nothing goes to files

  const std::string spill_directory = directory / "spill";
  fs::create_directory(spill_directory);
  std::optional<TimelineIndex> in_files;
  {
    const viewer::SpillScope spill(spill_directory, 1);  // every array, however small
    in_files = TimelineIndex::build(reader::Trace(trace));
  }
  const viewer::SpillStats held = viewer::spill_stats();
  EXPECT_GT(held.files, 0u);
  EXPECT_GT(held.bytes_now, 0u);
  EXPECT_EQ(held.refused, 0u) << held.last_problem;
  EXPECT_EQ(entries_in(spill_directory), 0u);  // unnamed files: nothing to clean up after a crash

  EXPECT_TRUE(answers(*in_files) == answers(in_memory));
  in_files.reset();
  EXPECT_EQ(viewer::spill_stats().bytes_now, 0u);  // every file let go with its array
}

TEST(IndexSpill, WithNoFileToHoldThemTheArraysStayInMemory) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory, "40 2");
  const TimelineIndex in_memory = TimelineIndex::build(reader::Trace(trace));
  const viewer::SpillScope spill(directory / "no-such-directory", 1);
  const TimelineIndex built = TimelineIndex::build(reader::Trace(trace));
  const viewer::SpillStats stats = viewer::spill_stats();
  EXPECT_EQ(stats.files, 0u);
  EXPECT_GT(stats.refused, 0u);
  EXPECT_NE(stats.last_problem.find("no-such-directory"), std::string::npos) << stats.last_problem;
  EXPECT_TRUE(answers(built) == answers(in_memory));
}

// A full disk, as far as the files go: their size is capped (RLIMIT_FSIZE), so reserving room
// for the larger arrays fails as it would on a full disk. The build takes the heap for those and
// never stores to a page the file has no room for (that would be SIGBUS).
TEST(IndexSpill, ADiskTooFullForAnArrayKeepsItInMemory) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory);
  const std::string expected = answers(TimelineIndex::build(reader::Trace(trace))).dump();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // a write past the cap fails with EFBIG instead
    const rlimit cap{16 * 1024, 16 * 1024};
    if (setrlimit(RLIMIT_FSIZE, &cap) != 0) _exit(10);
    const viewer::SpillScope spill(directory.path(), 1);
    const std::string got = answers(TimelineIndex::build(reader::Trace(trace))).dump();
    const viewer::SpillStats stats = viewer::spill_stats();
    if (stats.files == 0) _exit(11);    // the small arrays found room
    if (stats.refused == 0) _exit(12);  // the large ones did not
    _exit(got == expected ? 0 : 13);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the build was killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A page fault costs ~9 us on this machine's VM (a GiB of them 2.8 s; made present at once, 0.5 s),
// so the large arrays of a build have their pages made present when they are allocated.
TEST(IndexSpill, ALargeArrayInTheHeapHasItsPagesBeforeItIsWritten) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* probe = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(probe, MAP_FAILED);
  const bool kernel_can = madvise(probe, page, 23 /* MADV_POPULATE_WRITE */) == 0;
  munmap(probe, page);
  if (!kernel_can) GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE (Linux 5.14)";
  viewer::SpillAllocator<uint64_t> allocator;
  const size_t count = (size_t{8} << 20) / sizeof(uint64_t);
  uint64_t* array = allocator.allocate(count);
  const auto start = (reinterpret_cast<uintptr_t>(array) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(array + count)) / page * page;
  std::vector<unsigned char> present((end - start) / page);
  ASSERT_EQ(mincore(reinterpret_cast<void*>(start), end - start, present.data()), 0) << std::strerror(errno);
  EXPECT_EQ(std::count_if(present.begin(), present.end(), [](unsigned char bits) { return (bits & 1) != 0; }),
            static_cast<std::ptrdiff_t>(present.size()));
  allocator.deallocate(array, count);
}

// Files only when the heap might not hold the build: a trace of more than an eighteenth of the
// memory left (the heap build peaks at ~8.5 x the trace, and half the memory is kept for the
// rest). With the 4.5 x measured first, a 150 M-event trace went to the heap on this machine and
// would have taken 12.8 of its 23 GiB.
TEST(IndexSpill, OnlyATraceTooLargeForTheMemoryLeftIsBuiltInFiles) {
  const uint64_t gib = uint64_t{1} << 30;
  EXPECT_FALSE(viewer::spill_needed(100 << 20, 23 * gib));   // 10 M events on this machine
  EXPECT_FALSE(viewer::spill_needed(1 * gib, 23 * gib));     // 100 M
  EXPECT_TRUE(viewer::spill_needed(gib * 3 / 2, 23 * gib));  // 150 M
  EXPECT_TRUE(viewer::spill_needed(10 * gib, 23 * gib));     // 1 G
  EXPECT_TRUE(viewer::spill_needed(1 * gib, 8 * gib));       // 100 M on a smaller machine
  EXPECT_TRUE(viewer::spill_needed(1, 0));
  EXPECT_GT(viewer::memory_available(), 0u);
  const uint64_t base = uint64_t{64} << 20;
  EXPECT_EQ(viewer::expected_build_memory(10 * gib, true), base + 18 * gib);   // 1.8 x with files
  EXPECT_EQ(viewer::expected_build_memory(10 * gib, false), base + 85 * gib);  // 8.5 x in the heap
}

TEST(IndexSpill, ViewSaysHowMuchItHeldInFiles) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory, "20 2");
  const OpenedIndex small = viewer::open_index(trace);
  EXPECT_EQ(small.spill_directory, "");  // a small trace is built in the heap
  EXPECT_GT(small.cache_bytes, 0u);
  EXPECT_EQ(small.cache_bytes, fs::file_size(cache_of(trace)));

  setenv("CHRONICLE_VIEW_SPILL", "always", 1);
  const OpenedIndex opened = viewer::open_index(trace, false);
  const auto run_always =
      run("CHRONICLE_VIEW_SPILL=always " + kCli + " view --no-cache " + trace + " --html " + (directory / "page.html"));
  unsetenv("CHRONICLE_VIEW_SPILL");
  EXPECT_NE(opened.spill_directory, "");
  EXPECT_NE(opened.spill_directory, trace);  // with no cache, nothing goes beside the trace
  EXPECT_EQ(opened.spill.refused, 0u) << opened.spill.last_problem;
  ASSERT_EQ(run_always.exit_code, 0) << run_always.err;
  EXPECT_NE(run_always.err.find("held in files in " + opened.spill_directory + " while indexing: up to "),
            std::string::npos)
      << run_always.err;
}

// A memory cgroup of its own for the test, v2 or v1, removed after; empty `problem` when made.
class MemoryCgroup {
 public:
  // Not made (`problem` says why) when not root, or under a sanitizer, whose shadow memory
  // would be most of what the cgroup counts.
  explicit MemoryCgroup(uint64_t limit_bytes) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    problem = "a sanitizer's shadow memory would be most of what the cgroup counts";
    return;
#endif
    if (geteuid() != 0) {
      problem = "needs root: the test makes a memory cgroup";
      return;
    }
    const std::string name = "chronicle-test-" + std::to_string(getpid());
    for (const auto& [root, limit_file] : {std::pair{std::string("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"},
                                           std::pair{std::string("/sys/fs/cgroup"), "memory.max"}}) {
      if (!fs::exists(root + "/cgroup.procs")) continue;
      directory_ = root + "/" + name;
      std::error_code error;
      if (!fs::create_directory(directory_, error)) continue;
      std::ofstream(directory_ + "/" + limit_file) << limit_bytes;
      std::ifstream check(directory_ + "/" + limit_file);
      uint64_t set = 0;
      if (check >> set && set <= limit_bytes) return;
      fs::remove(directory_, error);
    }
    directory_.clear();
    problem = "no memory cgroup with a limit could be made under /sys/fs/cgroup";
  }
  ~MemoryCgroup() {
    // A process killed in it may take a moment to leave it (the group cannot go before).
    std::error_code error;
    for (int attempt = 0; !directory_.empty() && !fs::remove(directory_, error) && error && attempt < 100; ++attempt)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // `command` run inside it (the shell joins it, then execs).
  std::string inside(const std::string& command) const {
    return "sh -c 'echo $$ > " + directory_ + "/cgroup.procs && exec " + command + "'";
  }
  std::string problem;

 private:
  std::string directory_;
};

// The heap build of a 10 M-event trace peaks at ~450 MB: in a memory cgroup of 300 MB the kernel
// kills it, as it would kill a 1 G-event build on this 23 GiB machine. view sees the cgroup's
// room, builds in files, and is not killed. Root only (it makes a cgroup); not under sanitizers
// (their shadow memory would be most of what is counted).
TEST(IndexSpill, AViewInACgroupTooSmallForAHeapBuildIsNotKilled) {
  const MemoryCgroup cgroup(300 << 20);
  if (!cgroup.problem.empty()) GTEST_SKIP() << cgroup.problem;
  TemporaryDirectory directory;
  const std::string trace = record_whole_demo(directory, "300000 4 10 0");
  const std::string view = kCli + " view --no-cache " + trace + " --html /dev/null";
  // Once with the heap forced: the cgroup is small enough to show anything.
  const auto in_heap = run(cgroup.inside("env CHRONICLE_VIEW_SPILL=never " + view));
  EXPECT_EQ(in_heap.exit_code, 128 + SIGKILL) << "the heap build fits in 300 MB now: make the trace larger\n"
                                              << in_heap.err;
  const auto chosen = run(cgroup.inside(view));
  EXPECT_NE(chosen.exit_code, 128 + SIGKILL) << "killed";
  EXPECT_NE(chosen.err.find("chronicle: indexed 9,984,000 events"), std::string::npos) << chosen.err;
  EXPECT_NE(chosen.err.find("held in files in "), std::string::npos) << chosen.err;
  EXPECT_NE(chosen.err.find("too many for one page"), std::string::npos) << chosen.err;  // it went on after
  EXPECT_EQ(chosen.err.find("warning"), std::string::npos) << chosen.err;
}

// Without the tasks' notes the index answers as with them, but for the notes in task details:
// every window, flame graph, range stats, search and critical path is the same.
TEST(IndexNotes, AnIndexWithoutNotesDrawsTheSameAndListsNoNotes) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory);
  const reader::Trace read(trace);
  const TimelineIndex whole = TimelineIndex::build(read);
  const TimelineIndex light = TimelineIndex::build(read, {}, model::GraphDetail::no_notes);
  nlohmann::json with_notes = answers(whole);
  nlohmann::json without = answers(light);
  size_t notes = 0;
  for (auto& task : with_notes["tasks"]) {
    notes += task["notes_count"].get<size_t>();
    task["notes"] = nlohmann::json::array();
    task["notes_count"] = 0;
  }
  EXPECT_GT(notes, 0u);
  EXPECT_EQ(without, with_notes);
}

// CHRONICLE_VIEW_NOTES=drop (what view chooses when memory is short) leaves them out, and the
// index, read again too, says so where the page shows warnings.
TEST(IndexNotes, AViewWithoutNotesSaysSo) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory);
  const auto viewed = run("env CHRONICLE_VIEW_NOTES=drop " + kCli + " view " + trace + " --html /dev/null");
  EXPECT_EQ(viewed.exit_code, 0) << viewed.err;
  const OpenedIndex read = viewer::open_index(trace);
  ASSERT_TRUE(read.from_cache);
  const nlohmann::json summary = viewer::summary_json(read.index, "t");
  EXPECT_NE(
      summary["warnings"].dump().find("the tasks' notes (what was traced inside their runs) are not in this index"),
      std::string::npos)
      << summary["warnings"].dump();
  for (uint32_t task = 0; task < read.index.task_lines().size(); ++task)
    EXPECT_EQ(viewer::task_details_json(read.index, task)["notes_count"], 0);
}

// Where even a build in files may not fit, view says so before it starts and leaves the tasks'
// notes out (the kernel may still stop it on the way: whether it does is not the test's
// business).
TEST(IndexSpill, AViewThatMayNotFitSaysSoFirst) {
  const MemoryCgroup cgroup(96 << 20);
  if (!cgroup.problem.empty()) GTEST_SKIP() << cgroup.problem;
  TemporaryDirectory directory;
  const std::string trace = record_whole_demo(directory, "100000 4 10 0");
  // Then the kernel may stop it, or (with no swap) keep reclaiming the program's own pages while
  // the index's arrays sit just under the limit, which can take minutes: the warning is all this
  // asserts, so the view is not waited for past 20 s. (With every span kept whole too, for the
  // flame graph's wall time, this index is larger, and it did that here.)
  const auto viewed =
      run(cgroup.inside("timeout -s KILL 20 " + kCli + " view --no-cache " + trace + " --html /dev/null"));
  EXPECT_NE(viewed.err.find("chronicle: warning: indexing 0.03 GiB of trace may take about 0.12 GiB of memory"),
            std::string::npos)
      << viewed.err;
  // The level of detail it gives up first: the tasks' notes.
  EXPECT_NE(viewed.err.find("the tasks' notes are left out to save some (task details will list none)"),
            std::string::npos)
      << viewed.err;
}

// ---- where the index is kept (issue 40) -----------------------------------------------------

using test::slurp;

// A trace that another user owns: its owner may plant links at any name in it, for the next
// pids too. The index goes to the caller's own cache, and nothing is written through a link.
TEST(IndexCache, ATraceOfAnotherUserKeepsItsIndexInTheCallersCache) {
  test::SecondUser other;
  if (!other.why_not().empty()) GTEST_SKIP() << "needs a second user: " << other.why_not();
  TemporaryDirectory directory;
  fs::permissions(directory.path(), fs::perms::owner_all | fs::perms::others_exec | fs::perms::group_exec);
  const std::string trace = record_demo(directory, "20 2");
  ASSERT_EQ(run("chown -R " + other.name() + " " + trace).exit_code, 0);
  const std::string victim = directory / "victim";
  std::ofstream(victim) << "precious\n";
  fs::permissions(victim, fs::perms::owner_read | fs::perms::owner_write);
  const std::string cache = directory / "cache";
  // exec keeps the shell's pid: the links are planted under the names view's pid gives.
  const std::string plant = other.as("ln -s " + victim + " " + cache_of(trace) + ".$$.tmp") + "; " +
                            other.as("ln -s " + victim + " " + cache_of(trace));
  const std::string view =
      "XDG_CACHE_HOME=" + cache + " sh -c '" + plant + "; exec " + kCli + " view " + trace + " --html /dev/null'";
  const auto first = run(view);
  EXPECT_TRUE(slurp(victim) == "precious\n") << "view wrote its index through a link:\n" << first.err;
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("kept in " + cache + "/chronicle/"), std::string::npos) << first.err;
  struct stat info {};
  ASSERT_EQ(::lstat((cache + "/chronicle").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0700u);
  const auto second = run("XDG_CACHE_HOME=" + cache + " " + kCli + " view " + trace + " --html /dev/null");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("chronicle: read the index of "), std::string::npos) << second.err;
  EXPECT_NE(second.err.find(cache + "/chronicle/"), std::string::npos) << second.err;
}

// The caller's own trace directory, but one that others may write: the same.
TEST(IndexCache, ADirectoryOthersMayWriteKeepsNoIndex) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory, "20 2");
  fs::permissions(trace, fs::perms::all);
  const std::string cache = directory / "cache";
  const auto viewed = run("XDG_CACHE_HOME=" + cache + " " + kCli + " view " + trace + " --html /dev/null");
  ASSERT_EQ(viewed.exit_code, 0) << viewed.err;
  EXPECT_FALSE(fs::exists(fs::symlink_status(cache_of(trace)))) << viewed.err;
  EXPECT_NE(viewed.err.find("kept in " + cache + "/chronicle/"), std::string::npos) << viewed.err;
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(trace)) files += entry.path().filename().string().starts_with(".");
  EXPECT_EQ(files, 0u) << "nothing of the index is left in " << trace;
}

// A cache directory that is a link (another user's, or anything else) is not used.
TEST(IndexCache, ACacheDirectoryThatIsALinkIsNotUsed) {
  TemporaryDirectory directory;
  const std::string trace = record_demo(directory, "20 2");
  fs::permissions(trace, fs::perms::all);
  const std::string cache = directory / "cache";
  fs::create_directories(cache);
  fs::create_directories(directory / "elsewhere");
  fs::create_directory_symlink(directory / "elsewhere", cache + "/chronicle");
  const auto viewed = run("XDG_CACHE_HOME=" + cache + " " + kCli + " view " + trace + " --html /dev/null");
  ASSERT_EQ(viewed.exit_code, 0) << viewed.err;
  EXPECT_TRUE(fs::is_empty(directory / "elsewhere")) << viewed.err;
  EXPECT_NE(viewed.err.find("not kept"), std::string::npos) << viewed.err;
}

}  // namespace
}  // namespace chronicle
