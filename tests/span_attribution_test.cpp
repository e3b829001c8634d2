// Spans inside coroutines belong to their task: a span open across a co_await that moves the
// coroutine to another thread ends there, closes that span and no other, and every tool (stats,
// dump, the Chrome export, the viewer) shows the same pairs. An end that matches no open span is
// reported, never re-paired.
#include <gtest/gtest.h>

#include <chronicle/chronicle.hpp>
#include <chronicle/coro.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "analysis/profile.hpp"
#include "support.hpp"
#include "task_graph_equality.hpp"
#include "viewer/timeline_index.hpp"

namespace chronicle {
namespace {

using test::TemporaryDirectory;
using test::test_config;

const std::string kCli = CHRONICLE_CLI;
constexpr int kIterations = 20;

// The most natural instrumentation of a coroutine: a span at its top, open across the co_await
// that moves it onto the pool.
task<int> moved_work(thread_pool& pool) {
  CHRONICLE_SPAN("attribution", "work");
  co_await pool.schedule();
  co_return 1;
}

// A "main loop" span around sync_wait on the main thread.
void main_loop(thread_pool& pool) {
  for (int i = 0; i < kIterations; ++i) {
    CHRONICLE_SPAN("attribution", "main loop");
    EXPECT_EQ(sync_wait(moved_work(pool)), 1);
  }
}

std::string record_moved_work(const TemporaryDirectory& directory) {
  Config config = test_config(directory);
  EXPECT_TRUE(start(config)) << last_error();
  {
    thread_pool pool(2, "attribution-pool");
    main_loop(pool);
  }
  stop();
  return config.output;
}

const analysis::SpanProfile* span_named(const analysis::Profile& profile, const std::string& name) {
  for (const auto& span : profile.spans)
    if (span.name == name) return &span;
  return nullptr;
}

TEST(SpanAttribution, SpanAcrossCoAwaitEndsInItsTaskAndClosesNoOtherSpan) {
  TemporaryDirectory directory;
  const std::string output = record_moved_work(directory);
  reader::Trace trace(output);
  const analysis::Profile profile = analysis::profile_trace(trace);
  const auto* loop = span_named(profile, "main loop");
  const auto* work = span_named(profile, "work");
  ASSERT_NE(loop, nullptr) << "the enclosing span vanished";
  ASSERT_NE(work, nullptr);
  EXPECT_EQ(loop->duration.count, static_cast<uint64_t>(kIterations));
  EXPECT_EQ(work->duration.count, static_cast<uint64_t>(kIterations));
  EXPECT_LE(work->duration.total, loop->duration.total) << "each work span lies inside a main loop span";
  EXPECT_TRUE(profile.problems.empty()) << profile.problems.front();

  // The same through the command line: no end that closes nothing, no warning.
  const auto dump = test::run(kCli + " dump " + output);
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_EQ(dump.out.find("unmatched"), std::string::npos);
  EXPECT_EQ(dump.out.find("#0"), std::string::npos) << "an end paired with no span";
  EXPECT_EQ(dump.err.find("warning"), std::string::npos) << dump.err;
  const auto stats = test::run(kCli + " stats --json " + output);
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  std::map<std::string, uint64_t> counts;
  const auto stats_json = nlohmann::json::parse(stats.out);
  for (const auto& span : stats_json["spans"]) counts[span["name"].get<std::string>()] = span["count"].get<uint64_t>();
  EXPECT_EQ(counts["main loop"], static_cast<uint64_t>(kIterations));
  EXPECT_EQ(counts["work"], static_cast<uint64_t>(kIterations));
}

TEST(SpanAttribution, ReaderPairsTheSpanAcrossThreadsWithItsTask) {
  TemporaryDirectory directory;
  reader::Trace trace(record_moved_work(directory));
  uint64_t moved = 0, work_ends = 0, loop_ends = 0;
  trace.for_each_event([&](const reader::Event& event) {
    if (event.type != format::EventId::span_end) return true;
    EXPECT_NE(event.span, nullptr) << "an end paired with nothing";
    if (!event.span) return true;
    const std::string name = trace.site(event.span->site_id)->name;
    if (name == "work") {
      ++work_ends;
      EXPECT_NE(event.span->task, 0u) << "a coroutine's span belongs to its task";
      moved += event.span->end_thread_id != event.span->thread_id;
    } else {
      ++loop_ends;
      EXPECT_EQ(event.span->task, 0u) << "the main loop is its thread's";
      EXPECT_EQ(event.span->end_thread_id, event.span->thread_id);
    }
    return true;
  });
  EXPECT_EQ(work_ends, static_cast<uint64_t>(kIterations));
  EXPECT_EQ(loop_ends, static_cast<uint64_t>(kIterations));
  EXPECT_EQ(moved, static_cast<uint64_t>(kIterations)) << "every work span ends on a pool thread";
}

// Chrome JSON: per thread, B/E balanced; the work span has a piece on the main thread (its first
// run) and one on a pool thread (its second), none marked unfinished.
TEST(SpanAttribution, ChromeExportShowsTheSpanInEachRunOfItsTask) {
  TemporaryDirectory directory;
  const std::string output = record_moved_work(directory);
  const std::string json_path = directory / "trace.json";
  const auto exported = test::run(kCli + " export --format chrome -o " + json_path + " " + output);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  std::ifstream file(json_path);
  const auto document = nlohmann::json::parse(file);
  const auto& events = document.is_array() ? document : document["traceEvents"];
  std::map<uint64_t, std::vector<std::string>> stacks;
  std::set<uint64_t> work_threads;
  uint64_t work_pieces = 0;
  for (const auto& event : events) {
    const std::string phase = event.value("ph", "");
    if (phase != "B" && phase != "E") continue;
    const uint64_t tid = event["tid"].get<uint64_t>();
    const std::string name = event["name"].get<std::string>();
    if (phase == "B") {
      stacks[tid].push_back(name);
      continue;
    }
    ASSERT_FALSE(stacks[tid].empty()) << "an E with no B on thread " << tid;
    EXPECT_EQ(stacks[tid].back(), name) << "mis-nested on thread " << tid;
    stacks[tid].pop_back();
    if (name == "work") {
      ++work_pieces;
      work_threads.insert(tid);
      EXPECT_FALSE(event.contains("args") && event["args"].contains("unfinished")) << event.dump();
    }
  }
  for (const auto& [tid, stack] : stacks) EXPECT_TRUE(stack.empty()) << "unclosed on thread " << tid;
  EXPECT_EQ(work_pieces, 2u * kIterations) << "one piece per run of the task";
  EXPECT_GE(work_threads.size(), 2u);
}

// The viewer: the work span is drawn on the pool thread it ended on, not only where it began.
TEST(SpanAttribution, ViewerDrawsTheSpanOnEveryThreadItRanOn) {
  TemporaryDirectory directory;
  reader::Trace trace(record_moved_work(directory));
  const auto index = viewer::TimelineIndex::build(trace);
  std::map<std::string, uint64_t> pieces_by_thread_name;
  for (const auto& lane : index.lanes())
    for (const auto& row : lane.depths)
      for (uint32_t site : row.items)
        if (trace.site(site)->name == "work") ++pieces_by_thread_name[lane.name.substr(0, 16)];
  uint64_t on_pool = 0, total = 0;
  for (const auto& [name, count] : pieces_by_thread_name) {
    total += count;
    if (name.rfind("attribution-poo", 0) == 0) on_pool += count;
  }
  EXPECT_EQ(total, 2u * kIterations);
  EXPECT_EQ(on_pool, static_cast<uint64_t>(kIterations));
  // Its task graph, built in the same pass, is the model's: a span's end closes in its task.
  test::expect_same_task_graph(index.graph(), model::build_task_graph(trace));
}

TEST(SpanAttribution, AnEndThatMatchesNoOpenSpanIsReportedNotRePaired) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  CHRONICLE_SPAN_BEGIN("attribution", "outer");
  CHRONICLE_SPAN_BEGIN("attribution", "a");
  CHRONICLE_SPAN_END("attribution", "a");
  CHRONICLE_SPAN_END("attribution", "never begun");
  CHRONICLE_SPAN_END("attribution", "outer");
  stop();
  reader::Trace trace(config.output);
  const analysis::Profile profile = analysis::profile_trace(trace);
  const auto* outer = span_named(profile, "outer");
  ASSERT_NE(outer, nullptr) << "the stray end closed 'outer' and its own end was lost";
  EXPECT_EQ(outer->duration.count, 1u);
  ASSERT_EQ(profile.problems.size(), 1u);
  EXPECT_NE(profile.problems[0].find("1 span end"), std::string::npos) << profile.problems[0];
  EXPECT_NE(profile.problems[0].find("never begun"), std::string::npos) << profile.problems[0];

  const auto dump = test::run(kCli + " dump " + config.output);
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_NE(dump.out.find("attribution/never begun unmatched"), std::string::npos) << dump.out;
  EXPECT_NE(dump.err.find("warning: 1 span end"), std::string::npos) << dump.err;
  const auto stats = test::run(kCli + " stats " + config.output);
  EXPECT_NE(stats.err.find("warning: 1 span end"), std::string::npos) << stats.err;
  // The viewer's page shows it above the timeline.
  const auto index = viewer::TimelineIndex::build(trace);
  ASSERT_EQ(index.warnings().size(), 1u);
  EXPECT_NE(index.warnings()[0].find("never begun"), std::string::npos) << index.warnings()[0];
}

}  // namespace
}  // namespace chronicle
