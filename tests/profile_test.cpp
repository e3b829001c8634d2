// The sampling profiler end to end: `chronicle record --sample --sched` on a program, then
// `chronicle stats --profile` (docs/profiling.md). The figures are samples and times the program
// guarantees (work it does, sleeps it takes), asserted as orderings and wide bounds.
#include <elf.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "sampler/stack_walk.hpp"
#include "support.hpp"
#include "viewer/index_cache.hpp"
#include "viewer/json_api.hpp"

namespace chronicle::test {
namespace {

const std::string kCli = CHRONICLE_CLI;
const std::string kWorkload = PROFILE_WORKLOAD;
const std::string kBt2Check = BT2_CHECK;
const std::string kWithoutPerf = WITHOUT_PERF;

// `chronicle record FLAGS -o TRACE -- profile_workload ARGS`, which must succeed.
void record_workload(const std::string& flags, const std::string& arguments, const std::string& trace) {
  const auto recorded = run(kCli + " record -q " + flags + " -o " + trace + " -- " + kWorkload + " " + arguments);
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
}

// No warning about the program's own modules. Under a sanitizer, samples that land in its runtime
// (built without frame pointers: its allocator, its interceptors) stop after one frame, and
// `stats` rightly says so of that runtime (seen in CI: "libasan.so.8: 11 of 20 samples stop after
// one frame").
bool warns_of_sanitizer_runtimes_only(const std::string& err) {
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("warning") == std::string::npos) continue;
    const bool runtime = line.find("libasan.so") != std::string::npos || line.find("libtsan.so") != std::string::npos ||
                         line.find("libubsan.so") != std::string::npos;
    if (!runtime) return false;
  }
  return true;
}

// Every row of the flat profile (--top): a caller has no self samples, so it sorts below every
// function that has, and under a sanitizer the recorder's own thread adds dozens of those (its
// allocator's); at the default 30 rows a caller could fall off the list.
nlohmann::json profile(const std::string& trace, const std::string& flags = "") {
  const auto result = run(kCli + " stats --profile --json --top 100000 " + flags + " " + trace);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(warns_of_sanitizer_runtimes_only(result.err)) << result.err;
  return nlohmann::json::parse(result.out);
}

double share(const nlohmann::json& row, const nlohmann::json& profile) {
  return row["self"].get<double>() / profile["samples"].get<double>();
}

const nlohmann::json* row_named(const nlohmann::json& rows, const std::string& function) {
  for (const auto& row : rows)
    if (row["function"] == function) return &row;
  return nullptr;
}

// hot() first with 65 to 92% of the samples as its own, warm() second within `warm_share`, and
// their caller cpu() on every stack of theirs.
void expect_hot_then_warm(const nlohmann::json& whole, std::pair<double, double> warm_share) {
  const nlohmann::json& flat = whole["flat"];
  ASSERT_GE(flat.size(), 2u) << whole.dump(1);
  EXPECT_EQ(flat[0]["function"], "profile_workload::hot(unsigned int)");
  EXPECT_EQ(flat[1]["function"], "profile_workload::warm(unsigned int)");
  EXPECT_GT(share(flat[0], whole), 0.65);
  EXPECT_LT(share(flat[0], whole), 0.92);
  EXPECT_GT(share(flat[1], whole), warm_share.first);
  EXPECT_LT(share(flat[1], whole), warm_share.second);
  const nlohmann::json* cpu = row_named(flat, "profile_workload::cpu(int)");
  ASSERT_NE(cpu, nullptr) << "the caller of both, on every stack of theirs: " << whole.dump(1);
  EXPECT_GE((*cpu)["total"].get<uint64_t>(), flat[0]["self"].get<uint64_t>() + flat[1]["self"].get<uint64_t>());
}

TEST(SamplingProfile, HotAndWarmComeFirstAndSecondWithTheirShares) {
  SKIP_WITHOUT_PERF_EVENTS();
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_NO_FATAL_FAILURE(record_workload("--sample", "cpu 150", trace));

  const nlohmann::json whole = profile(trace);
  ASSERT_GE(whole["samples"].get<uint64_t>(), 200u) << "at 999 per second of CPU, some 750 ms of work";
  ASSERT_NO_FATAL_FAILURE(expect_hot_then_warm(whole, {0.10, 0.30}));

  // Each span's samples are its function's.
  const nlohmann::json by_span = profile(trace, "--by-span");
  EXPECT_EQ(by_span["groups"]["work/hot"]["flat"][0]["function"], "profile_workload::hot(unsigned int)");
  EXPECT_EQ(by_span["groups"]["work/warm"]["flat"][0]["function"], "profile_workload::warm(unsigned int)");
  EXPECT_GT(by_span["groups"]["work/hot"]["samples"].get<uint64_t>(),
            by_span["groups"]["work/warm"]["samples"].get<uint64_t>());

  // Collapsed stacks: the span, then the stack from the outermost frame, then the count.
  const auto folded = run(kCli + " stats --by-span --folded " + trace);
  ASSERT_EQ(folded.exit_code, 0) << folded.err;
  EXPECT_NE(folded.out.find("work/hot;"), std::string::npos) << folded.out;
  EXPECT_NE(folded.out.find(";profile_workload::cpu(int);profile_workload::hot(unsigned int) "), std::string::npos)
      << folded.out;
}

bool is_position_independent(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  Elf64_Ehdr header{};
  file.read(reinterpret_cast<char*>(&header), sizeof header);
  return file && header.e_type == ET_DYN;
}

TEST(SamplingProfile, SymbolsResolveInAPositionIndependentExecutableAndASharedLibrary) {
  SKIP_WITHOUT_PERF_EVENTS();
  ASSERT_TRUE(is_position_independent(kWorkload)) << "the test needs a PIE, whose code moves at each run";
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_NO_FATAL_FAILURE(record_workload("--sample", "library 1500", trace));
  const nlohmann::json whole = profile(trace);
  const nlohmann::json& flat = whole["flat"];
  ASSERT_GE(flat.size(), 1u);
  EXPECT_EQ(flat[0]["function"], "profile_library::library_function(int)");
  EXPECT_GT(share(flat[0], whole), 0.5);
  const nlohmann::json* caller = row_named(flat, "profile_workload::library(int)");
  ASSERT_NE(caller, nullptr) << whole.dump(1);
  EXPECT_GE((*caller)["total"].get<uint64_t>(), flat[0]["self"].get<uint64_t>());
}

// The kernel's vDSO is in no file: its samples are named from the reading process's own vDSO
// (the same kernel here), said as the kernel's, with their caller.
TEST(SamplingProfile, TheVdsoIsNamed) {
  SKIP_WITHOUT_PERF_EVENTS();
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_NO_FATAL_FAILURE(record_workload("--sample", "clock 20000", trace));
  const nlohmann::json whole = profile(trace);
  const nlohmann::json& flat = whole["flat"];
  ASSERT_GE(flat.size(), 1u);
  const nlohmann::json* vdso = nullptr;
  for (const nlohmann::json& row : flat)
    if (row["function"].get<std::string>().starts_with("[vdso] ") && !vdso) vdso = &row;
  ASSERT_NE(vdso, nullptr) << whole.dump(1);
  EXPECT_NE((*vdso)["function"].get<std::string>().find("clock_gettime"), std::string::npos) << whole.dump(1);
  EXPECT_GT(share(*vdso, whole), 0.2) << whole.dump(1);
  for (const nlohmann::json& row : flat)
    EXPECT_EQ(row["function"].get<std::string>().find("[unknown"), std::string::npos) << whole.dump(1);
}

uint64_t milliseconds(const nlohmann::json& times, const char* state) {
  return times[state].get<uint64_t>() / 1'000'000;
}

TEST(SamplingProfile, AThreadThatSleepsIsBlockedForAtLeastItsSleeps) {
  SKIP_WITHOUT_PERF_EVENTS();
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_NO_FATAL_FAILURE(record_workload("--sched", "sleep 10", trace));
  const nlohmann::json whole = profile(trace);
  ASSERT_TRUE(whole.contains("cpu_states")) << whole.dump(1);
  const nlohmann::json* thread = nullptr;
  for (const auto& [label, times] : whole["cpu_states"]["threads"].items())
    if (label.starts_with("alternating (")) thread = &times;
  ASSERT_NE(thread, nullptr) << whole["cpu_states"].dump(1);
  // Ten sleeps of at least 20 ms each, and ten stretches of 20 ms of its own CPU time (a thread
  // running may also wait for a CPU: runnable).
  EXPECT_GE(milliseconds(*thread, "blocked_ns"), 190u);
  EXPECT_GE(milliseconds(*thread, "running_ns"), 190u);
  const nlohmann::json& sleep = whole["cpu_states"]["spans"]["sched/sleep"];
  const nlohmann::json& work = whole["cpu_states"]["spans"]["sched/work"];
  EXPECT_GE(milliseconds(sleep, "blocked_ns"), 190u);
  EXPECT_LT(milliseconds(sleep, "running_ns"), milliseconds(sleep, "blocked_ns"));
  EXPECT_GE(milliseconds(work, "running_ns"), 190u);
  EXPECT_LT(milliseconds(work, "blocked_ns"), milliseconds(work, "running_ns"));
}

// Spans that nest and end in turns: each span's time and samples go to it alone while it is open,
// and nothing is named but the four spans (a span's label was once read from a span stack that had
// since grown and moved: rows named "#3886675696", a nap credited with the work's CPU time).
TEST(SamplingProfile, NestedSpansGetTheirOwnTimeAndNoOthers) {
  SKIP_WITHOUT_PERF_EVENTS();
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_NO_FATAL_FAILURE(record_workload("--sample --sched", "nested 5", trace));
  const std::set<std::string> spans = {"nest/outer", "nest/work", "nest/rest", "nest/nap"};
  const nlohmann::json whole = profile(trace);
  std::set<std::string> timed;
  for (const auto& [label, times] : whole["cpu_states"]["spans"].items()) timed.insert(label);
  EXPECT_EQ(timed, spans) << whole["cpu_states"]["spans"].dump(1);
  const nlohmann::json by_span = profile(trace, "--by-span");
  for (const auto& [label, group] : by_span["groups"].items())
    EXPECT_TRUE(spans.contains(label) || label == "(no span)") << label;
  const nlohmann::json& work = whole["cpu_states"]["spans"]["nest/work"];
  const nlohmann::json& nap = whole["cpu_states"]["spans"]["nest/nap"];
  // Five stretches of 20 ms of the thread's own CPU time in "work"; "nap" only enters and leaves
  // its sleeps, and sleeps at least 5 x 20 ms.
  EXPECT_GE(milliseconds(work, "running_ns"), 95u);
  EXPECT_GE(milliseconds(nap, "blocked_ns"), 95u);
  EXPECT_LT(4 * milliseconds(nap, "running_ns"), milliseconds(work, "running_ns")) << nap.dump();
  EXPECT_LT(4 * milliseconds(work, "blocked_ns"), milliseconds(nap, "blocked_ns")) << work.dump();
}

// A span of a coroutine that awaits tasks on another thread: what those tasks ran, they ran for
// it, as a function called inside it would have. Its inclusive time holds theirs.
TEST(SamplingProfile, ASpanHoldsTheCpuOfTheTasksStartedInsideItOnOtherThreads) {
  SKIP_WITHOUT_PERF_EVENTS();
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_NO_FATAL_FAILURE(record_workload("--sched", "hops 5", trace));
  const nlohmann::json whole = profile(trace);
  ASSERT_TRUE(whole.contains("cpu_states")) << whole.dump(1);
  const nlohmann::json& spans = whole["cpu_states"]["spans"];
  ASSERT_TRUE(spans.contains("hop/request") && spans.contains("hop/compute")) << spans.dump(1);
  // Five stretches of 20 ms of a pool thread's own CPU time, inside "hop/compute".
  EXPECT_GE(milliseconds(spans["hop/compute"], "running_ns"), 95u);
  EXPECT_GE(spans["hop/request"]["running_ns"].get<uint64_t>(), spans["hop/compute"]["running_ns"].get<uint64_t>())
      << spans.dump(1);
}

// Which coroutine burned the CPU: samples go to the task running on the thread.
TEST(SamplingProfile, SamplesGoToTheTaskRunningOnTheThread) {
  SKIP_WITHOUT_PERF_EVENTS();
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_NO_FATAL_FAILURE(record_workload("--sample", "tasks 150", trace));
  const nlohmann::json by_task = profile(trace, "--by-task");
  const nlohmann::json& groups = by_task["groups"];
  ASSERT_TRUE(groups.contains("crunch") && groups.contains("nibble")) << groups.dump(1);
  EXPECT_EQ(groups["crunch"]["flat"][0]["function"], "profile_workload::hot(unsigned int)");
  EXPECT_EQ(groups["nibble"]["flat"][0]["function"], "profile_workload::warm(unsigned int)");
  const double crunch = groups["crunch"]["samples"].get<double>() / by_task["samples"].get<double>();
  EXPECT_GT(crunch, 0.65);
  EXPECT_LT(crunch, 0.92);
}

// A task that waited for a task which slept. With scheduler data a step is never "ran" for time
// off CPU: the sleeper's run is split, its nanosleep `blocked` (at least 59 ms of it), and what
// stays `ran` was on CPU; the steps still add up to the path. (It replaces a test that wanted one
// "ran" step for the sleeper with its off-CPU time beside it.)
TEST(SamplingProfile, TheCriticalPathSaysBlockedForTimeOffCpuInARun) {
  SKIP_WITHOUT_PERF_EVENTS();
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_NO_FATAL_FAILURE(record_workload("--sched", "await 1", trace));
  const auto result = run(kCli + " stats --json --critical-path waiter " + trace);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json path = nlohmann::json::parse(result.out);
  uint64_t blocked = 0, total = 0;
  for (const auto& step : path["steps"]) {
    total += step["contributed_ns"].get<uint64_t>();
    if (step["state"] == "blocked") {
      blocked += step["contributed_ns"].get<uint64_t>();
      EXPECT_EQ(step["cpu"]["blocked_ns"], step["contributed_ns"]) << step.dump();
    }
    if (step["state"] == "ran") {
      EXPECT_EQ(step["cpu"]["blocked_ns"], 0u) << step.dump();
      EXPECT_EQ(step["cpu"]["runnable_ns"], 0u) << step.dump();
    }
  }
  EXPECT_GE(blocked, 59'000'000u) << path.dump(1);
  EXPECT_EQ(total, path["length_ns"].get<uint64_t>());
  const auto text = run(kCli + " stats --critical-path waiter " + trace);
  EXPECT_NE(text.out.find(" blocked "), std::string::npos) << text.out;
}

// The viewer's critical path (task details) splits a run by its thread's CPU state as stats
// does: the same states, in the same order, for the same time.
TEST(SamplingProfile, TheViewersCriticalPathSaysBlockedAsStatsDoes) {
  SKIP_WITHOUT_PERF_EVENTS();
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_NO_FATAL_FAILURE(record_workload("--sched", "await 1", trace));
  const auto result = run(kCli + " stats --json --critical-path waiter " + trace);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json path = nlohmann::json::parse(result.out);
  std::vector<std::string> from_stats;
  for (const auto& step : path["steps"])
    from_stats.push_back(step["state"].get<std::string>() + " " + step["what"].get<std::string>());
  const viewer::OpenedIndex opened = viewer::open_index(trace);
  const viewer::TimelineIndex& index = opened.index;
  std::optional<uint32_t> waiter;
  for (uint32_t task = 0; task < index.task_lines().size(); ++task)
    if (index.task_display_name(task) == "waiter") waiter = task;
  ASSERT_TRUE(waiter.has_value());
  std::vector<std::string> from_viewer;
  uint64_t blocked = 0;
  for (const viewer::CriticalStep& step : index.critical_path(*waiter)) {
    from_viewer.push_back(std::string(analysis::step_state_name(step.state)) + " " + step.what);
    if (step.state == analysis::StepState::blocked) blocked += step.to - step.from;
  }
  EXPECT_EQ(from_viewer, from_stats);
  EXPECT_GE(blocked, 59'000'000u);
}

TEST(SamplingProfile, BadRatesAreUsageErrorsAndATraceWithoutSamplesSaysSo) {
  const auto zero = run(kCli + " record -q --sample=0 -o /nonexistent/trace -- true");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("--sample"), std::string::npos) << zero.err;
  const auto word = run("CHRONICLE_SAMPLE=often CHRONICLE_OUTPUT=/nonexistent/trace " + kWorkload + " cpu 1");
  EXPECT_EQ(word.exit_code, 0) << "a malformed setting turns tracing off, never the program";
  EXPECT_NE(word.err.find("CHRONICLE_SAMPLE='often'"), std::string::npos) << word.err;

  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_EQ(run(kCli + " record -q -o " + trace + " -- " + kWorkload + " cpu 1").exit_code, 0);
  const auto stats = run(kCli + " stats --profile " + trace);
  EXPECT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_NE(stats.err.find("no samples (record with --sample)"), std::string::npos) << stats.err;
}

// A thread that was already running when the session started (a pool made before tracing was
// turned on) is followed too: the session opens its events on it.
TEST(SamplingProfile, AThreadRunningBeforeTheSessionStartsIsSampledToo) {
  SKIP_WITHOUT_PERF_EVENTS();
  TemporaryDirectory directory;
  std::atomic<int> phase{0};
  std::atomic<uint32_t> early_tid{0};
  std::thread early([&] {
    early_tid = static_cast<uint32_t>(syscall(SYS_gettid));
    while (phase.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    const int64_t until = now.tv_sec * 1'000'000'000LL + now.tv_nsec + 200'000'000;  // 200 ms of its CPU time
    volatile unsigned sink = 0;
    do {
      for (int i = 0; i < 100'000; ++i) sink = sink * 3 + 1;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    } while (now.tv_sec * 1'000'000'000LL + now.tv_nsec < until);
  });
  while (early_tid.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Config config = test_config(directory);
  config.sample_frequency = 999;
  ASSERT_TRUE(start(config)) << last_error();
  phase = 1;
  early.join();
  stop();
  reader::Trace trace(config.output);
  size_t samples = 0;
  for (const reader::Event& event : read_all(trace))
    if (event.type == format::EventId::cpu_sample && event.sampled_tid == early_tid.load()) ++samples;
  EXPECT_GE(samples, 100u) << "200 ms of CPU time at 999 samples per second";
}

// Samples and switches are CTF events like the others: babeltrace2 reads them with no warning, and
// its Python bindings see the same threads, frames, stack words and states as our reader.
TEST(SamplingProfile, BabeltraceReadsSamplesAndSwitchesAsWeDo) {
  SKIP_WITHOUT_PERF_EVENTS();
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_NO_FATAL_FAILURE(record_workload("--sample --sched", "sleep 3", trace));
  const auto text = run("babeltrace2 " + trace);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.err, "");

  reader::Trace ours(trace);
  std::vector<reader::Event> sampler_events;
  for (const reader::Event& event : read_all(ours))
    if (event.type == format::EventId::cpu_sample || event.type == format::EventId::cpu_switch)
      sampler_events.push_back(event);
  ASSERT_GT(sampler_events.size(), 20u);
  const auto result = run("/usr/bin/python3 " + kBt2Check + " " + trace);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json parsed = nlohmann::json::parse(result.out);
  std::vector<nlohmann::json> theirs;
  for (const auto& event : parsed["events"])
    if (event["event"] == "cpu_sample" || event["event"] == "cpu_switch") theirs.push_back(event);
  ASSERT_EQ(theirs.size(), sampler_events.size());
  size_t samples = 0;
  for (size_t i = 0; i < theirs.size(); ++i) {
    const reader::Event& event = sampler_events[i];
    const nlohmann::json& fields = theirs[i]["fields"];
    ASSERT_EQ(fields["tid"].get<uint32_t>(), event.sampled_tid) << i;
    if (event.type == format::EventId::cpu_switch) {
      EXPECT_EQ(fields["state"].get<int>(), static_cast<int>(event.cpu_state)) << i;
      continue;
    }
    ++samples;
    ASSERT_EQ(fields["frames"].size(), event.frame_count) << i;
    for (uint32_t frame = 0; frame < event.frame_count; ++frame)
      EXPECT_EQ(fields["frames"][frame].get<uint64_t>(), event.frame(frame)) << i;
    ASSERT_EQ(fields["stack"].size(), event.stack_word_count) << i;
    for (uint32_t word = 0; word < event.stack_word_count; ++word)
      EXPECT_EQ(fields["stack"][word].get<uint64_t>(), event.stack_word(word)) << i;
  }
  EXPECT_GT(samples, 0u);
}

// The viewer: each sample a tick on its thread's lane (counted in the range stats), and the flame
// graph of a range's samples, with the counts `stats --profile` gives; the same from the cache.
TEST(SamplingProfile, TheViewerShowsEachLanesSamplesAndTheFlameGraphOfARange) {
  SKIP_WITHOUT_PERF_EVENTS();
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  ASSERT_NO_FATAL_FAILURE(record_workload("--sample", "cpu 150", trace));
  const nlohmann::json whole = profile(trace);
  const uint64_t samples = whole["samples"].get<uint64_t>();
  ASSERT_GE(samples, 200u);

  const viewer::OpenedIndex opened = viewer::open_index(trace);
  const viewer::TimelineIndex& index = opened.index;
  const uint64_t end = index.duration();
  // Lanes: as many ticks as `stats --profile` gives their threads, merged where narrow.
  const nlohmann::json window = viewer::window_json(index, 0, end, 800);
  uint64_t on_lanes = 0;
  for (const auto& lane : window["lanes"]) {
    const viewer::Lane& shown = index.lanes()[lane["lane"].get<uint32_t>()];
    uint64_t ticks = 0;
    for (const auto& tick : lane["samples"]) ticks += tick[2].get<uint64_t>();
    const std::string label = shown.name + " (" + std::to_string(shown.thread_id) + ")";
    const uint64_t expected = whole["groups"].contains(label) ? whole["groups"][label]["samples"].get<uint64_t>() : 0;
    EXPECT_EQ(ticks, expected) << label;
    on_lanes += ticks;
  }
  EXPECT_GT(on_lanes, samples / 2) << "the program's thread, which does the work, has a lane";
  const viewer::RangeStats stats = index.range_stats(0, end);
  uint64_t in_stats = 0;
  for (const viewer::LaneStats& lane : stats.lanes) in_stats += lane.samples;
  EXPECT_EQ(in_stats, on_lanes);

  // The flame graph of every sample: the flat profile's self counts at its leaves.
  const nlohmann::json flame =
      viewer::flame_json(index, 0, end, viewer::FlameRoots::merged, viewer::FlameSource::samples);
  ASSERT_EQ(flame["source"], "samples");
  EXPECT_EQ(flame["frames"][0][2].get<uint64_t>(), samples) << "the root holds every sample";
  std::map<std::string, uint64_t> leaf_samples;
  for (const auto& frame : flame["frames"])
    if (frame[1].get<int64_t>() >= 0)
      leaf_samples[flame["names"][frame[1].get<size_t>()].get<std::string>()] += frame[3].get<uint64_t>();
  for (const auto& row : whole["flat"]) EXPECT_EQ(leaf_samples[row["function"]], row["self"].get<uint64_t>()) << row;
  // Two halves of the trace hold every sample between them.
  const auto first_half =
      viewer::flame_json(index, 0, end / 2, viewer::FlameRoots::merged, viewer::FlameSource::samples);
  const auto second_half =
      viewer::flame_json(index, end / 2 + 1, end, viewer::FlameRoots::merged, viewer::FlameSource::samples);
  EXPECT_GT(first_half["frames"][0][2].get<uint64_t>(), 0u);
  EXPECT_GT(second_half["frames"][0][2].get<uint64_t>(), 0u);
  EXPECT_EQ(first_half["frames"][0][2].get<uint64_t>() + second_half["frames"][0][2].get<uint64_t>(), samples);

  // Read from the index cache: the same answers.
  ASSERT_FALSE(opened.from_cache);
  const viewer::OpenedIndex cached = viewer::open_index(trace);
  ASSERT_TRUE(cached.from_cache);
  EXPECT_EQ(viewer::window_json(cached.index, 0, end, 800), window);
  EXPECT_EQ(viewer::flame_json(cached.index, 0, end, viewer::FlameRoots::merged, viewer::FlameSource::samples), flame);
}

// ---- The timer_create + SIGPROF fallback ----------------------------------------------------
// Each program runs under without_perf, so that its samples cannot come from perf events.

// `ENVIRONMENT chronicle record --sample -o TRACE -- without_perf profile_workload ARGUMENTS`.
CommandResult record_without_perf(const std::string& environment, const std::string& arguments,
                                  const std::string& trace) {
  return run(environment + " " + kCli + " record -q --sample -o " + trace + " -- " + kWithoutPerf + " " + kWorkload +
             " " + arguments);
}

const std::string kTimerMethod = "CHRONICLE_SAMPLE_METHOD=timer";

size_t count_samples(const std::string& trace) {
  reader::Trace read(trace);
  size_t samples = 0;
  for (const reader::Event& event : read_all(read)) samples += event.type == format::EventId::cpu_sample;
  return samples;
}

// The samples of the kernel's tick (CONFIG_HZ, 250 per second on Debian: CPU-time timers expire
// at ticks), their stacks walked by the signal handler: hot() and warm() with their caller cpu().
TEST(SamplingProfile, TheTimerFallbackFindsHotAndWarmWithTheirSharesAndTheirCaller) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  const CommandResult recorded = record_without_perf(kTimerMethod, "cpu 150", trace);
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  const nlohmann::json whole = profile(trace);
  ASSERT_GE(whole["samples"].get<uint64_t>(), 50u) << "some 750 ms of work, sampled at each tick at least at 100 Hz";
  ASSERT_NO_FATAL_FAILURE(expect_hot_then_warm(whole, {0.08, 0.32}));
  const nlohmann::json& flat = whole["flat"];
  const nlohmann::json* cpu = row_named(flat, "profile_workload::cpu(int)");
  const nlohmann::json* main_function = row_named(flat, "main");
  ASSERT_NE(main_function, nullptr) << "the walk goes on to the outermost frames: " << whole.dump(1);
  EXPECT_GE((*main_function)["total"].get<uint64_t>(), (*cpu)["total"].get<uint64_t>());

  const auto folded = run(kCli + " stats --by-span --folded " + trace);
  ASSERT_EQ(folded.exit_code, 0) << folded.err;
  EXPECT_NE(folded.out.find(";profile_workload::cpu(int);profile_workload::hot(unsigned int) "), std::string::npos)
      << folded.out;
}

// The fallback finds threads by scanning /proc/self/task each round (100 ms): one started after
// the session is sampled from the next scan on.
TEST(SamplingProfile, TheTimerFallbackSamplesAThreadStartedAfterTheSessionStarts) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  const CommandResult recorded = record_without_perf(kTimerMethod, "late-thread 800", trace);
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  const nlohmann::json whole = profile(trace);
  const nlohmann::json* late = row_named(whole["flat"], "profile_workload::late_work(unsigned long)");
  ASSERT_NE(late, nullptr) << whole.dump(1);
  EXPECT_GE((*late)["self"].get<uint64_t>(), 40u) << "800 ms of its CPU time, less a round at most before a scan";
}

// A program that has its own SIGPROF handler keeps it: the fallback samples nothing and says so.
TEST(SamplingProfile, TheTimerFallbackLeavesTheProgramsOwnSigprofHandlerAlone) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  const CommandResult recorded = record_without_perf(kTimerMethod, "own-handler 20", trace);
  ASSERT_EQ(recorded.exit_code, 0) << "the workload checks its handler: " << recorded.err;
  EXPECT_NE(recorded.err.find("chronicle: no samples: SIGPROF has a handler already"), std::string::npos)
      << recorded.err;
  EXPECT_EQ(count_samples(trace), 0u);
}

// Where perf events are refused, auto (the default) samples with the fallback and says so; perf
// alone says why there are no samples, as before the fallback existed.
TEST(SamplingProfile, WherePerfEventsAreRefusedAutoFallsBackToTimersAndPerfSaysWhy) {
  TemporaryDirectory directory;
  const std::string automatic = directory / "automatic";
  const CommandResult fell_back = record_without_perf("", "cpu 40", automatic);
  ASSERT_EQ(fell_back.exit_code, 0) << fell_back.err;
  EXPECT_NE(fell_back.err.find("perf_event_open: Permission denied"), std::string::npos) << fell_back.err;
  EXPECT_NE(fell_back.err.find("sampling with timer_create and SIGPROF instead"), std::string::npos) << fell_back.err;
  EXPECT_GT(count_samples(automatic), 10u);

  const std::string perf = directory / "perf";
  const CommandResult refused = record_without_perf("CHRONICLE_SAMPLE_METHOD=perf", "cpu 5", perf);
  ASSERT_EQ(refused.exit_code, 0) << refused.err;
  EXPECT_NE(refused.err.find("chronicle: no samples nor context switches: perf_event_open: Permission denied"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(count_samples(perf), 0u);

  const auto word =
      run("CHRONICLE_SAMPLE_METHOD=sometimes CHRONICLE_OUTPUT=/nonexistent/trace " + kWorkload + " cpu 1");
  EXPECT_EQ(word.exit_code, 0) << "a malformed setting turns tracing off, never the program";
  EXPECT_NE(word.err.find("CHRONICLE_SAMPLE_METHOD='sometimes': expected auto, perf or timer"), std::string::npos)
      << word.err;
}

// Context switches are the kernel's alone: --sched with the fallback says they are missing.
TEST(SamplingProfile, TheTimerFallbackSaysThereAreNoContextSwitches) {
  TemporaryDirectory directory;
  const std::string trace = directory / "trace";
  const auto recorded =
      run(kTimerMethod + " " + kCli + " record -q --sample --sched -o " + trace + " -- " + kWorkload + " cpu 5");
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  EXPECT_NE(recorded.err.find("chronicle: no context switches"), std::string::npos) << recorded.err;
}

#if defined(__x86_64__)
// Spins `turns` times with the frame-pointer register holding `garbage`, as code built without
// frame pointers may leave it (the register saved and put back around, below the red zone).
void spin_with_frame_pointer(uint64_t garbage, uint64_t turns) {
  asm volatile(
      "add $-128, %%rsp\n"
      "push %%rbp\n"
      "mov %%rax, %%rbp\n"
      "1: dec %%rcx\n"
      "jnz 1b\n"
      "pop %%rbp\n"
      "sub $-128, %%rsp\n"
      : "+c"(turns)
      : "a"(garbage)
      : "cc", "memory");
}

// The real handler, in this process, on a thread whose frame pointer is garbage: a frame that
// points at itself ends the stack after its return address, one far outside the stack ends it at
// once; the program goes on.
TEST(SamplingProfile, TheTimerHandlerEndsTheStackAtAGarbageFramePointer) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  config.sample_frequency = 999;
  config.sample_method = SampleMethod::timer;
  ASSERT_TRUE(start(config)) << last_error();
  std::atomic<uint32_t> spinner_tid{0};
  std::thread spinner([&] {
    spinner_tid = static_cast<uint32_t>(syscall(SYS_gettid));
    volatile uint64_t looping_frame[2];
    looping_frame[0] = reinterpret_cast<uint64_t>(&looping_frame[0]);  // the caller's frame: itself
    looping_frame[1] = 0x1234;                                         // its return address
    for (int round = 0; round < 6; ++round) {
      spin_with_frame_pointer(reinterpret_cast<uint64_t>(&looping_frame[0]), 100'000'000);
      spin_with_frame_pointer(0xdead'beef'dead'beef, 100'000'000);
    }
  });
  spinner.join();
  stop();
  struct sigaction after {};
  sigaction(SIGPROF, nullptr, &after);
  EXPECT_TRUE(after.sa_handler == SIG_DFL && !(after.sa_flags & SA_SIGINFO)) << "the default disposition is back";
  reader::Trace trace(config.output);
  size_t samples = 0, looping = 0;
  for (const reader::Event& event : read_all(trace)) {
    if (event.type != format::EventId::cpu_sample || event.sampled_tid != spinner_tid.load()) continue;
    ++samples;
    if (event.frame_count >= 2 && event.frame(1) == 0x1234) {
      ++looping;
      EXPECT_EQ(event.frame_count, 2u) << "the frame that points at itself ends the stack";
    }
  }
  EXPECT_GE(samples, 20u);
  EXPECT_GE(looping, 5u) << samples << " samples";
}
#endif

// The handler's walk over a copy of a stack: a chain of frames, each {caller's frame pointer,
// return address}, at 16-byte steps, then garbage where code without frame pointers left data.
class FramePointerWalk : public ::testing::Test {
 protected:
  static constexpr uint64_t kBase = 0x7ffd'0000'1000;  // the stack pointer the copy starts at
  uint64_t words_[64] = {};
  uint64_t out_[16] = {};

  uint64_t address_of(size_t word) const { return kBase + word * 8; }
  void frame(size_t word, uint64_t next_frame, uint64_t return_address) {
    words_[word] = next_frame;
    words_[word + 1] = return_address;
  }
  uint32_t walk(uint64_t frame_pointer, uint32_t capacity = 16) {
    const sampler::StackCopy copy{kBase, reinterpret_cast<const uint8_t*>(words_), sizeof words_};
    return sampler::walk_frame_pointers(copy, frame_pointer, out_, capacity);
  }
};

TEST_F(FramePointerWalk, FollowsAChainUpwardToItsEnd) {
  frame(4, address_of(10), 0x1001);
  frame(10, address_of(20), 0x1002);
  frame(20, 0, 0x1003);  // the outermost frame: no caller's frame pointer
  ASSERT_EQ(walk(address_of(4)), 3u);
  EXPECT_EQ(out_[0], 0x1001u);
  EXPECT_EQ(out_[1], 0x1002u);
  EXPECT_EQ(out_[2], 0x1003u);
  EXPECT_EQ(walk(address_of(4), 2), 2u) << "no more than asked";
}

TEST_F(FramePointerWalk, StopsAtAChainOfGarbage) {
  frame(4, address_of(4), 0x1001);  // a frame pointing at itself
  EXPECT_EQ(walk(address_of(4)), 1u);
  frame(4, address_of(2), 0x1001);  // downward
  EXPECT_EQ(walk(address_of(4)), 1u);
  frame(4, address_of(10) + 3, 0x1001);  // misaligned
  EXPECT_EQ(walk(address_of(4)), 1u);
  frame(4, 0xdead'beef'dead'beef, 0x1001);  // far above the copy
  EXPECT_EQ(walk(address_of(4)), 1u);
  frame(4, address_of(63), 0x1001);  // its return address would be past the copy's end
  EXPECT_EQ(walk(address_of(4)), 1u);
  frame(4, UINT64_MAX - 7, 0x1001);  // where an address sum would wrap
  EXPECT_EQ(walk(address_of(4)), 1u);
  EXPECT_EQ(walk(kBase - 16), 0u) << "below the stack pointer";
  EXPECT_EQ(walk(0), 0u);
  EXPECT_EQ(walk(UINT64_MAX), 0u);
  EXPECT_EQ(walk(address_of(4)), 1u);
  const sampler::StackCopy empty{kBase, nullptr, 0};
  EXPECT_EQ(sampler::walk_frame_pointers(empty, kBase, out_, 16), 0u) << "nothing could be copied";
}

}  // namespace
}  // namespace chronicle::test
