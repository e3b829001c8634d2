// The viewer's index and API against the model: at several zooms and positions, what a window
// shows (single spans plus merged blocks, task lines plus blocks, arrows, counter points)
// accounts for exactly what the trace and its task graph hold in that window, with the same
// extents; and the HTTP server answers the same.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chronicle/chronicle.hpp>
#include <chronicle/coro.hpp>
#include <chronicle/metrics.hpp>
#include <chronicle/task.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "analysis/critical_path.hpp"
#include "analysis/profile.hpp"
#include "format/trace_writer.hpp"
#include "merge/message_pairs.hpp"
#include "model/task_graph.hpp"
#include "model/task_graph_feed.hpp"
#include "reader/trace_directory.hpp"
#include "starved_server.hpp"
#include "support.hpp"
#include "task_graph_equality.hpp"
#include "undrained_session.hpp"
#include "viewer/assets.hpp"
#include "viewer/begin_keys.hpp"
#include "viewer/index_cache.hpp"
#include "viewer/json_api.hpp"
#include "viewer/spill.hpp"
#include "viewer/stream_pass.hpp"
#include "viewer/timeline_index.hpp"
#include "viewer/timeline_index_internal.hpp"
#include "viewer/viewer_server.hpp"

namespace chronicle {
namespace {

using test::run;
using test::TemporaryDirectory;
using viewer::CounterSeries;
using viewer::TimelineIndex;

const std::string kCli = CHRONICLE_CLI;
const std::string kDemo = TIMELINE_DEMO;
const std::string kEcho = ECHO_EXAMPLE;
const std::string kManyTasks = MANY_TASKS;

struct PlainSpan {
  uint64_t begin;
  uint64_t end;
  uint32_t depth;
};

// The spans of each stream, paired by hand from the raw events (not by the index's code).
std::vector<std::vector<PlainSpan>> spans_by_stream(const reader::Trace& trace, const TimelineIndex& index) {
  std::vector<std::vector<PlainSpan>> out(trace.streams().size());
  for (size_t stream = 0; stream < trace.streams().size(); ++stream) {
    std::vector<uint64_t> open;
    trace.for_each_in_stream(stream, [&](const reader::Event& event) {
      if (event.type == format::EventId::span_begin) open.push_back(index.to_ns(event.ticks));
      if (event.type == format::EventId::span_end && !open.empty()) {
        out[stream].push_back({open.back(), index.to_ns(event.ticks), static_cast<uint32_t>(open.size() - 1)});
        open.pop_back();
      }
      return true;
    });
  }
  return out;
}

class ViewerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = new TemporaryDirectory;
    const auto result = run(kCli + " record -q -o " + (*directory_ / "trace") + " -- " + kDemo + " 120 3");
    ASSERT_EQ(result.exit_code, 0) << result.err;
    trace_ = new reader::Trace(*directory_ / "trace");
    ASSERT_EQ(trace_->events_discarded(), 0u);
    index_ = new TimelineIndex(TimelineIndex::build(*trace_));
    graph_ = new model::TaskGraph(model::build_task_graph(*trace_));
  }
  static void TearDownTestSuite() {
    delete graph_;
    delete index_;
    delete trace_;
    delete directory_;
  }

  // (begin, end, width): the whole trace, a tenth, a hundredth and a thousandth of it at
  // several places, at a few widths.
  static std::vector<std::tuple<uint64_t, uint64_t, uint32_t>> windows() {
    const uint64_t duration = index_->duration();
    std::vector<std::tuple<uint64_t, uint64_t, uint32_t>> out{{0, duration, 1000}, {0, duration, 97}};
    for (uint64_t parts : {10, 100, 1000})
      for (uint64_t at : {uint64_t{0}, parts / 3, parts / 2, parts - 1}) {
        const uint64_t length = duration / parts;
        out.emplace_back(at * length, at * length + length, 800);
      }
    return out;
  }

  static TemporaryDirectory* directory_;
  static reader::Trace* trace_;
  static TimelineIndex* index_;
  static model::TaskGraph* graph_;
};

TemporaryDirectory* ViewerTest::directory_ = nullptr;
reader::Trace* ViewerTest::trace_ = nullptr;
TimelineIndex* ViewerTest::index_ = nullptr;
model::TaskGraph* ViewerTest::graph_ = nullptr;

TEST_F(ViewerTest, TheTraceHasWhatTheViewerDraws) {
  EXPECT_EQ(index_->lanes().size(), trace_->streams().size());
  EXPECT_EQ(index_->task_lines().size(), graph_->tasks().size());
  EXPECT_EQ(index_->task_lines().size(), 3u * 120u * 2u);  // a job and its part per round
  size_t waits = 0;
  size_t resolutions = 0;
  for (const auto& edge : graph_->edges()) {
    waits += edge.kind == model::EdgeKind::waits_on;
    resolutions += edge.kind == model::EdgeKind::resolved_by;
  }
  EXPECT_EQ(waits, 360u);
  EXPECT_EQ(resolutions, 360u);
  size_t created = 0;
  for (const auto& edge : graph_->edges()) created += edge.kind == model::EdgeKind::created_by;
  EXPECT_EQ(created, 360u) << "each job creates its part";
  EXPECT_EQ(index_->arrows().size(), waits + resolutions + created);
  EXPECT_FALSE(graph_->idle().empty());
  ASSERT_EQ(index_->counters().size(), 1u);  // demo/round, one series
  EXPECT_EQ(index_->counters()[0].lanes.size(), 3u) << "written on each worker";
}

// The index builds its task graph in the same merged pass as its spans: the graph is the one
// model::build_task_graph builds in a pass of its own (notes, runs, idle intervals, problems).
TEST_F(ViewerTest, TheIndexsTaskGraphIsTheModels) {
  ASSERT_FALSE(graph_->tasks().empty());
  size_t notes = 0;
  for (const model::Task& task : graph_->tasks()) notes += task.notes.size();
  EXPECT_GT(notes, 0u);
  test::expect_same_task_graph(index_->graph(), *graph_);
}

// The pass hands over only what the graph reads (task and loop events, and what happens inside a
// task's run), not every event that moves the trace's first or last time: in a merge in time
// order that would be nearly all of them. The graph's times are still the trace's.
TEST_F(ViewerTest, TheFeedHandsOverOnlyTheEventsTheGraphReads) {
  model::TaskGraphFeed feed([](uint32_t site_id) { return trace_->site(site_id)->name; }, model::GraphDetail::full);
  auto graph = std::async(std::launch::async, [&feed] { return feed.build([] { return false; }); });
  reader::SpanPairing pairing(*trace_);
  uint64_t events = 0;
  uint64_t read_by_the_graph = 0;
  trace_->for_each_event(pairing, [&](const reader::Event& event) {
    ++events;
    const bool task_or_loop =
        (event.type >= format::EventId::task_create && event.type <= format::EventId::task_label) ||
        event.type == format::EventId::loop_suspend || event.type == format::EventId::loop_resume;
    const bool in_a_run = event.type == format::EventId::span_begin || event.type == format::EventId::span_end ||
                          event.type == format::EventId::instant || event.type == format::EventId::note ||
                          event.type == format::EventId::counter || event.type == format::EventId::counter_float;
    if (task_or_loop || (in_a_run && pairing.running_task(event.thread_id) != 0)) ++read_by_the_graph;
    feed.add(event, pairing);
    return true;
  });
  feed.close();
  const model::TaskGraph built = graph.get();
  ASSERT_LT(read_by_the_graph, events) << "some events are outside every task run";
  EXPECT_EQ(feed.handed_over(), read_by_the_graph);
  test::expect_same_task_graph(built, *graph_);
}

// What details and critical paths read instead of the graph (task_lookup.cpp) says what the
// graph says: each task found by its id, its children, its waits in time order, its path.
TEST_F(ViewerTest, TheTaskLookupIsTheGraphs) {
  const auto& tasks = graph_->tasks();
  ASSERT_EQ(index_->task_lines().size(), tasks.size());
  size_t waits_seen = 0;
  for (uint32_t k = 0; k < tasks.size(); ++k) {
    const model::Task& task = tasks[k];
    ASSERT_EQ(index_->task_index(0, task.id), std::optional<uint32_t>(k));
    std::vector<model::TaskId> children;
    size_t count = 0;
    for (const uint32_t child : index_->task_children(k, 1000, count)) children.push_back(tasks[child].id);
    std::vector<model::TaskId> expected_children;
    for (const model::Task* child : graph_->children(task.id)) expected_children.push_back(child->id);
    EXPECT_EQ(children, expected_children) << model::task_id_text(task.id);
    EXPECT_EQ(count, expected_children.size());
    std::vector<std::pair<uint64_t, model::TaskId>> waits, expected_waits;
    for (const viewer::TaskWait& wait : index_->task_waits(k)) waits.emplace_back(wait.ticks, wait.awaited);
    for (const model::Edge& edge : graph_->edges())
      if (edge.kind == model::EdgeKind::waits_on && edge.from == task.id)
        expected_waits.emplace_back(edge.ticks, edge.to);
    std::stable_sort(expected_waits.begin(), expected_waits.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    EXPECT_EQ(waits, expected_waits) << model::task_id_text(task.id);
    waits_seen += waits.size();
    EXPECT_EQ(index_->task_record(k).runs.size(), task.runs.size());

    const analysis::CriticalPath path = analysis::critical_path(*graph_, task.id);
    std::vector<std::tuple<model::TaskId, analysis::StepState, std::string, uint64_t, uint64_t>> steps, expected_steps;
    for (const viewer::CriticalStep& step : index_->critical_path(k))
      steps.emplace_back(tasks[step.task].id, step.state, step.what, step.from, step.to);
    for (const analysis::CriticalStep& step : path.steps)
      expected_steps.emplace_back(step.task, step.state, step.what, index_->to_ns(step.from), index_->to_ns(step.to));
    EXPECT_EQ(steps, expected_steps) << model::task_id_text(task.id);
  }
  EXPECT_EQ(waits_seen, 360u);
  EXPECT_EQ(index_->task_index(0, 0), std::nullopt);
}

TEST_F(ViewerTest, SpansShownOrMergedAccountForEverySpanInTheWindow) {
  const auto expected_spans = spans_by_stream(*trace_, *index_);
  size_t blocks_seen = 0;
  size_t single_spans_seen = 0;
  for (const auto& [begin, end, width] : windows()) {
    SCOPED_TRACE(::testing::Message() << "window " << begin << ".." << end << " at " << width << " px");
    const viewer::Window window = index_->window(begin, end, width);
    const double ns_per_pixel = static_cast<double>(end - begin) / width;
    ASSERT_EQ(window.lanes.size(), expected_spans.size());
    for (size_t lane = 0; lane < expected_spans.size(); ++lane) {
      const auto& view = window.lanes[lane];
      const auto& rows = index_->lanes()[lane].depths;
      std::map<uint32_t, uint64_t> expected_by_depth;
      std::map<uint32_t, std::pair<uint64_t, uint64_t>> extent_by_depth;  // first begin, last end in view
      for (const PlainSpan& span : expected_spans[lane]) {
        if (span.end < begin || span.begin > end) continue;
        ++expected_by_depth[span.depth];
        auto [found, fresh] = extent_by_depth.try_emplace(span.depth, span.begin, span.end);
        if (!fresh)
          found->second = {std::min(found->second.first, span.begin), std::max(found->second.second, span.end)};
      }
      std::map<uint32_t, uint64_t> shown_by_depth;
      std::map<uint32_t, std::pair<uint64_t, uint64_t>> shown_extent;
      auto extend = [&](uint32_t depth, uint64_t from, uint64_t to) {
        auto [found, fresh] = shown_extent.try_emplace(depth, from, to);
        if (!fresh) found->second = {std::min(found->second.first, from), std::max(found->second.second, to)};
      };
      for (const auto& span : view.spans) {
        const auto& row = rows[span.row];
        EXPECT_GE(static_cast<double>(row.ends[span.index] - row.begins[span.index]), ns_per_pixel)
            << "a span under a pixel drawn alone";
        ++shown_by_depth[span.row];
        extend(span.row, row.begins[span.index], row.ends[span.index]);
      }
      for (const auto& block : view.blocks) {
        const auto& row = rows[block.row];
        // A block's extent is exactly that of the spans it merges.
        EXPECT_EQ(block.begin, row.begins[block.first]);
        EXPECT_EQ(block.end, row.ends[block.first + block.count - 1]);
        shown_by_depth[block.row] += block.count;
        extend(block.row, block.begin, block.end);
      }
      EXPECT_EQ(shown_by_depth, expected_by_depth) << "lane " << lane;
      EXPECT_EQ(shown_extent, extent_by_depth) << "lane " << lane;
      // Drawn items never exceed about one per pixel and depth: that is the level of detail.
      EXPECT_LE(view.spans.size() + view.blocks.size(), (width + 2) * rows.size());
      blocks_seen += view.blocks.size();
      single_spans_seen += view.spans.size();
    }
  }
  // Both levels of detail were exercised: merged when zoomed out, single spans when zoomed in.
  EXPECT_GT(blocks_seen, 0u);
  EXPECT_GT(single_spans_seen, 0u);
}

// A task alive from its creation (or first run) to its resolution (or the trace's end), and
// to its last run's end when that is later.
std::pair<uint64_t, uint64_t> alive(const TimelineIndex& index, const model::Task& task) {
  const uint64_t begin = task.created         ? index.to_ns(*task.created)
                         : !task.runs.empty() ? index.to_ns(task.runs.front().begin)
                                              : 0;
  uint64_t end = task.resolved ? index.to_ns(*task.resolved) : index.duration();
  if (!task.runs.empty()) end = std::max(end, index.to_ns(task.runs.back().end));
  return {begin, std::max(begin, end)};
}

TEST_F(ViewerTest, TasksAndArrowsInTheWindowMatchTheModel) {
  size_t task_blocks_seen = 0;
  for (const auto& [begin, end, width] : windows()) {
    SCOPED_TRACE(::testing::Message() << "window " << begin << ".." << end << " at " << width << " px");
    const viewer::Window window = index_->window(begin, end, width);
    uint64_t expected_tasks = 0;
    for (const model::Task& task : graph_->tasks()) {
      const auto [alive_from, alive_to] = alive(*index_, task);
      expected_tasks += alive_from <= end && alive_to >= begin;
    }
    EXPECT_EQ(window.tasks.size(), expected_tasks);
    EXPECT_EQ(window.task_rows_shown, graph_->tasks().size()) << "a row per task";

    uint64_t expected_arrows = 0;
    for (const model::Edge& edge : graph_->edges()) {
      uint64_t from = index_->to_ns(edge.ticks);
      uint64_t to = from;
      if (edge.kind == model::EdgeKind::waits_on) to = std::max(from, index_->to_ns(*graph_->find(edge.to)->resolved));
      expected_arrows += from <= end && to >= begin;
    }
    uint64_t shown_arrows = 0;
    for (const auto& arrow : window.arrows) shown_arrows += arrow.merged;
    EXPECT_EQ(shown_arrows, expected_arrows);
    for (const auto& task : window.tasks) task_blocks_seen += task.runs.size();
  }
  EXPECT_GT(task_blocks_seen, 0u);
}

// Thread lanes show what ran on them: every run of every task is on its thread's lane, nested
// runs deeper, and a window shows each run in it, alone or merged into a busy block.
TEST_F(ViewerTest, EveryTaskRunIsOnItsThreadsLane) {
  std::map<uint32_t, std::multiset<std::pair<uint64_t, uint64_t>>> expected;  // by thread
  size_t total = 0;
  for (const model::Task& task : graph_->tasks())
    for (const model::RunInterval& run : task.runs) {
      expected[run.thread_id].emplace(index_->to_ns(run.begin),
                                      std::max(index_->to_ns(run.begin), index_->to_ns(run.end)));
      ++total;
    }
  ASSERT_GT(total, 0u);
  for (const viewer::Lane& lane : index_->lanes()) {
    std::multiset<std::pair<uint64_t, uint64_t>> found;
    for (const viewer::IntervalRow& row : lane.runs) {
      for (size_t k = 0; k < row.size(); ++k) found.emplace(row.begins[k], row.ends[k]);
      for (size_t k = 1; k < row.size(); ++k)
        EXPECT_GE(row.begins[k], row.ends[k - 1]) << "runs of a row never overlap";
    }
    EXPECT_EQ(found, expected[lane.thread_id]) << lane.name;
  }
  for (const auto& [begin, end, width] : windows()) {
    SCOPED_TRACE(::testing::Message() << "window " << begin << ".." << end << " at " << width << " px");
    const viewer::Window window = index_->window(begin, end, width);
    for (const viewer::LaneWindow& view : window.lanes) {
      const viewer::Lane& lane = index_->lanes()[view.lane];
      uint64_t in_window = 0;
      for (const viewer::IntervalRow& row : lane.runs)
        for (size_t k = 0; k < row.size(); ++k) in_window += row.ends[k] >= begin && row.begins[k] <= end;
      uint64_t shown = view.runs.size();
      for (const viewer::BusyBlock& block : view.run_blocks) shown += block.count;
      EXPECT_EQ(shown, in_window) << lane.name;
    }
  }
}

// Tasks in tree order: each task's subtree is the run of rows right after it, a first child on
// the row after its parent, siblings in order of creation.
TEST_F(ViewerTest, TasksAreInTreeOrder) {
  const auto& tasks = graph_->tasks();
  const viewer::TaskTree& tree = index_->task_tree();
  ASSERT_EQ(tree.row_task.size(), tasks.size());
  std::set<uint32_t> rows;
  for (uint32_t k = 0; k < tasks.size(); ++k) {
    rows.insert(index_->task_lines()[k].row);
    EXPECT_EQ(tree.row_task[tree.row[k]], k);
  }
  EXPECT_EQ(rows.size(), tasks.size()) << "a row per task";
  size_t children_checked = 0;
  for (uint32_t k = 0; k < tasks.size(); ++k) {
    const auto children = graph_->children(tasks[k].id);
    if (children.empty()) continue;
    uint32_t expected_row = tree.row[k] + 1;
    for (const model::Task* child : children) {
      const uint32_t c = *index_->task_index(child->id);
      EXPECT_EQ(tree.row[c], expected_row)
          << "child " << model::task_id_text(child->id) << " of " << model::task_id_text(tasks[k].id);
      EXPECT_EQ(tree.depth[c], tree.depth[k] + 1);
      expected_row += tree.subtree[c];
      ++children_checked;
    }
    EXPECT_EQ(expected_row, tree.row[k] + tree.subtree[k]) << "the subtree is its children's subtrees";
  }
  EXPECT_EQ(children_checked, 360u);
}

// The page asks for the rows on its screen, and for subtrees to be collapsed: the answer holds
// those rows only, hidden rows left out and the rows after them moved up.
TEST_F(ViewerTest, AWindowAnswersTheRowsAskedForWithCollapsedSubtreesLeftOut) {
  const uint64_t duration = index_->duration();
  const viewer::TaskTree& tree = index_->task_tree();
  const viewer::Window some = index_->window(0, duration, 800, viewer::TaskRowQuery{10, 30, {}});
  ASSERT_EQ(some.tasks.size(), 20u);
  for (size_t k = 0; k < some.tasks.size(); ++k) {
    EXPECT_EQ(some.tasks[k].row, 10 + k);
    EXPECT_EQ(tree.row[some.tasks[k].task], 10 + k);
  }
  for (const viewer::ArrowInView& arrow : some.arrows)
    EXPECT_TRUE(std::max(arrow.from_row, arrow.to_row) >= 10 && std::min(arrow.from_row, arrow.to_row) < 30);
  // Collapse every job (each has one part): the parts' rows go, the jobs close up.
  std::vector<uint32_t> parents;
  for (uint32_t k = 0; k < tree.subtree.size(); ++k)
    if (tree.subtree[k] > 1) parents.push_back(k);
  ASSERT_EQ(parents.size(), 360u);
  const viewer::Window collapsed = index_->window(0, duration, 800, viewer::TaskRowQuery{0, 1000000, parents});
  EXPECT_EQ(collapsed.task_rows_shown, 360u);
  ASSERT_EQ(collapsed.tasks.size(), 360u);
  for (size_t k = 0; k < collapsed.tasks.size(); ++k) {
    EXPECT_EQ(collapsed.tasks[k].row, k);
    EXPECT_GT(tree.subtree[collapsed.tasks[k].task], 1u) << "only jobs are shown";
  }
  for (const viewer::ArrowInView& arrow : collapsed.arrows)
    EXPECT_NE(index_->arrows()[arrow.arrow].kind, viewer::ArrowKind::created) << "a job's arrows to its hidden part go";
  // The HTTP API answers the same for the same question.
  viewer::ViewerServer server(*index_, "test", "127.0.0.1", 0);
  httplib::Client client("127.0.0.1", server.port());
  std::string list;
  for (uint32_t parent : parents) list += (list.empty() ? "" : ",") + std::to_string(parent);
  const auto answer =
      client.Get("/api/window?begin=0&end=" + std::to_string(duration) + "&width=800&rows=0-1000000&collapsed=" + list);
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->status, 200);
  EXPECT_EQ(nlohmann::json::parse(answer->body),
            viewer::window_json(*index_, 0, duration, 800, viewer::TaskRowQuery{0, 1000000, parents}));
  EXPECT_EQ(nlohmann::json::parse(answer->body)["tasks"]["rows"], 360);
}

// Tasks by time, the packing alone: a chain of handlers, each created by the one before while
// it still runs, takes two rows, not one per handler.
TEST(TasksByTime, AChainOfHandlersTakesTwoRows) {
  std::vector<viewer::TaskSpan> chain;
  for (uint32_t k = 0; k < 1000; ++k) chain.push_back({10 * k, 10 * k + 15, k == 0 ? viewer::kNoTask : k - 1, k});
  const std::vector<uint32_t> rows = viewer::pack_tasks_by_time(chain);
  for (uint32_t k = 0; k < rows.size(); ++k) EXPECT_EQ(rows[k], k % 2) << "handler " << k;
}

// Rows are as many as tasks ever alive at once (the fewest that can hold them), and no two
// tasks on a row share an instant.
TEST(TasksByTime, RowsAreAsManyAsTasksAliveAtOnceAndTasksOnARowNeverMeet) {
  std::vector<viewer::TaskSpan> tasks;
  uint64_t state = 12345;
  auto next = [&](uint64_t bound) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % bound;
  };
  for (uint32_t k = 0; k < 5000; ++k) {
    const uint64_t begin = next(100000);
    tasks.push_back({begin, begin + next(k % 50 == 0 ? 20000 : 300),
                     k > 0 && next(3) > 0 ? static_cast<uint32_t>(next(k)) : viewer::kNoTask, k});
  }
  const std::vector<uint32_t> rows = viewer::pack_tasks_by_time(tasks);
  std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> by_row;
  for (uint32_t k = 0; k < tasks.size(); ++k) by_row[rows[k]].emplace_back(tasks[k].begin, tasks[k].end);
  for (auto& [row, spans] : by_row) {
    std::sort(spans.begin(), spans.end());
    for (size_t k = 1; k < spans.size(); ++k) EXPECT_LT(spans[k - 1].second, spans[k].first) << "row " << row;
  }
  // The most alive at one instant: at some task's begin.
  size_t most = 0;
  for (const viewer::TaskSpan& at : tasks)
    most = std::max<size_t>(most, std::count_if(tasks.begin(), tasks.end(), [&](const viewer::TaskSpan& other) {
                              return other.begin <= at.begin && other.end >= at.begin;
                            }));
  EXPECT_EQ(by_row.size(), most);
  EXPECT_EQ(by_row.rbegin()->first + 1, most) << "rows from 0, none skipped";
}

// A child goes on the free row nearest its parent's, the one after it on a tie; a task with no
// parent on the first free row.
TEST(TasksByTime, AChildGoesOnTheFreeRowNearestItsParents) {
  // Rows 0..5 taken by six long tasks; those on rows 1 and 4 end; a child of row 5's task comes.
  std::vector<viewer::TaskSpan> tasks;
  for (uint32_t k = 0; k < 6; ++k) tasks.push_back({k, k == 1 || k == 4 ? uint64_t{10} : 1000, viewer::kNoTask, k});
  tasks.push_back({20, 30, 5, 6});                // nearest free to row 5: 4
  tasks.push_back({21, 30, viewer::kNoTask, 7});  // no parent: the first free, 1
  tasks.push_back({22, 30, 2, 8});                // none free: a new row
  const std::vector<uint32_t> rows = viewer::pack_tasks_by_time(tasks);
  EXPECT_EQ(rows[6], 4u);
  EXPECT_EQ(rows[7], 1u);
  EXPECT_EQ(rows[8], 6u);
  // Rows 1 and 3 free, the parent on row 2: the one after it.
  std::vector<viewer::TaskSpan> tie;
  for (uint32_t k = 0; k < 5; ++k) tie.push_back({k, k == 1 || k == 3 ? uint64_t{10} : 1000, viewer::kNoTask, k});
  tie.push_back({20, 30, 2, 5});
  EXPECT_EQ(viewer::pack_tasks_by_time(tie)[5], 3u);
}

// By time, a window accounts for every task alive in it exactly once, on its row: drawn alone
// or in a block of its row; the rows and the HTTP answer agree with the index.
TEST_F(ViewerTest, TasksByTimeAccountForEveryTaskAliveInTheWindowOnItsRow) {
  const viewer::TaskTimeRows& by_time = index_->task_time_rows();
  ASSERT_EQ(by_time.row.size(), graph_->tasks().size());
  EXPECT_LT(by_time.count(), graph_->tasks().size() / 4) << "rows are reused";
  size_t blocks_seen = 0;
  for (const auto& [begin, end, width] : windows()) {
    SCOPED_TRACE(::testing::Message() << "window " << begin << ".." << end << " at " << width << " px");
    viewer::TaskRowQuery query;
    query.by_time = true;
    const viewer::Window window = index_->window(begin, end, width, query);
    EXPECT_EQ(window.task_rows_shown, by_time.count());
    std::map<uint32_t, uint64_t> expected;  // row -> tasks alive in the window
    for (uint32_t k = 0; k < graph_->tasks().size(); ++k) {
      const auto [b, e] = alive(*index_, graph_->tasks()[k]);
      if (b <= end && e >= begin) ++expected[by_time.row[k]];
    }
    std::map<uint32_t, uint64_t> shown;
    std::set<uint32_t> tasks_drawn;
    for (const viewer::TaskInView& task : window.tasks) {
      EXPECT_EQ(task.row, by_time.row[task.task]);
      EXPECT_TRUE(tasks_drawn.insert(task.task).second) << "task " << task.task << " drawn once";
      ++shown[task.row];
    }
    for (const viewer::TaskBlock& block : window.task_blocks) {
      EXPECT_GT(block.count, 1u) << "a task alone is drawn as itself";
      EXPECT_LE(block.failed + block.cancelled, block.count);
      shown[block.row] += block.count;
      ++blocks_seen;
    }
    EXPECT_EQ(shown, expected);
  }
  EXPECT_GT(blocks_seen, 0u) << "the whole trace at 97 px merges tasks";
  // The HTTP API answers the same for the same question; `by` is time or tree.
  viewer::ViewerServer server(*index_, "test", "127.0.0.1", 0);
  httplib::Client client("127.0.0.1", server.port());
  const uint64_t duration = index_->duration();
  viewer::TaskRowQuery query{0, 40, {}, true};
  const auto answer =
      client.Get("/api/window?begin=0&end=" + std::to_string(duration) + "&width=300&rows=0-40&by=time");
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->status, 200);
  EXPECT_EQ(nlohmann::json::parse(answer->body), viewer::window_json(*index_, 0, duration, 300, query));
  EXPECT_FALSE(nlohmann::json::parse(answer->body)["tasks"]["blocks"].empty());
  const auto wrong = client.Get("/api/window?begin=0&end=10&width=300&by=age");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 400);
}

// A task line's thick parts are its runs: merged where less than a pixel apart, they cover
// every run in the window and nothing else.
TEST_F(ViewerTest, TaskLinesCarryTheirRuns) {
  for (const auto& [begin, end, width] : windows()) {
    const viewer::Window window = index_->window(begin, end, width);
    const double ns_per_pixel = static_cast<double>(end - begin) / width;
    for (const viewer::TaskInView& view : window.tasks) {
      const auto begins = index_->run_begins(view.task);
      const auto ends = index_->run_ends(view.task);
      size_t covered = 0, in_window = 0;
      for (size_t k = 0; k < begins.size(); ++k) {
        if (ends[k] < begin || begins[k] > end) continue;
        ++in_window;
        for (const auto& [piece_begin, piece_end] : view.runs)
          if (piece_begin <= begins[k] && ends[k] <= piece_end) {
            ++covered;
            break;
          }
      }
      EXPECT_EQ(covered, in_window);
      for (size_t k = 1; k < view.runs.size(); ++k)
        EXPECT_GE(static_cast<double>(view.runs[k].first - view.runs[k - 1].second), ns_per_pixel * 0.999);
    }
  }
}

// A run may outlast its task's resolution (the handler returns after setting its result). A
// window holding only that part of the run shows the task, as a tree and by time, and its line
// reaches the run's end: a click on the run finds the task's line in view. Its details keep the
// resolution's time.
TEST_F(ViewerTest, ATasksLineReachesARunThatOutlastsItsResolution) {
  size_t checked = 0;
  for (uint32_t k = 0; k < graph_->tasks().size(); ++k) {
    const model::Task& task = graph_->tasks()[k];
    if (!task.resolved || task.runs.empty()) continue;
    const uint64_t resolved = index_->to_ns(*task.resolved);
    const uint64_t run_end = index_->to_ns(task.runs.back().end);
    if (run_end < resolved + 2) continue;
    ++checked;
    SCOPED_TRACE(::testing::Message() << "task " << k << " resolved at " << resolved << ", ran to " << run_end);
    for (const bool by_time : {false, true}) {
      viewer::TaskRowQuery query;
      query.by_time = by_time;
      const nlohmann::json lines = viewer::window_json(*index_, resolved + 1, run_end, 800, query)["tasks"]["lines"];
      const auto line = std::find_if(lines.begin(), lines.end(), [&](const nlohmann::json& l) { return l[3] == k; });
      ASSERT_TRUE(line != lines.end()) << "the task is in the window " << (by_time ? "by time" : "as a tree");
      EXPECT_EQ((*line)[1], run_end) << "the line drawn reaches the run";
    }
    const nlohmann::json details = viewer::task_details_json(*index_, k);
    EXPECT_EQ(details["resolved"], resolved);
    EXPECT_EQ(details["duration"], resolved - details["created"].get<uint64_t>());
    EXPECT_EQ(details["end"], run_end);
  }
  EXPECT_GT(checked, 0u) << "the demo's handlers return after resolving";
}

TEST_F(ViewerTest, CountersAreDownsampledToTheWidthWithTheirExtremes) {
  const uint64_t duration = index_->duration();
  for (uint32_t width : {20u, 100u, 2000u}) {
    const viewer::Window window = index_->window(0, duration, width);
    for (const auto& view : window.counters) {
      const auto& series = index_->counters()[view.counter];
      EXPECT_LE(view.points.size(), 2 * size_t{width} + 1);
      double low = view.points.front().min;
      double high = view.points.front().max;
      for (const auto& point : view.points) {
        low = std::min(low, point.min);
        high = std::max(high, point.max);
      }
      EXPECT_EQ(low, series.min);
      EXPECT_EQ(high, series.max);
      EXPECT_EQ(view.points.back().last, series.values.back());
      EXPECT_EQ(view.downsampled, series.values.size() > 2 * size_t{width});
    }
  }
}

// Over ranges that start and end inside the busy sums' blocks (TimelineIndex::kBusyBlock
// intervals each) and across many of them.
TEST_F(ViewerTest, RangeStatsAgreeWithTheSpans) {
  const auto spans = spans_by_stream(*trace_, *index_);
  size_t most_busy = 0;
  for (const viewer::Lane& lane : index_->lanes()) {
    most_busy = std::max(most_busy, lane.busy_row().size());
    // The demo's runs lie inside its outermost spans, which may touch (one ending in the ns the
    // next begins): the busy time is those spans, and the index keeps them once.
    EXPECT_EQ(lane.busy_is_outermost, !lane.depths.empty());
    EXPECT_EQ(lane.busy.size(), 0u);
  }
  ASSERT_GT(most_busy, TimelineIndex::kBusyBlock) << "sums of several blocks";
  const uint64_t duration = index_->duration();
  for (const auto& [begin, end] :
       {std::pair{duration / 3, duration / 3 + duration / 7}, std::pair{uint64_t{0}, duration},
        std::pair{duration / 5, duration / 5 + duration / 997}, std::pair{duration / 2, duration}}) {
    SCOPED_TRACE(begin);
    const viewer::RangeStats stats = index_->range_stats(begin, end);
    for (size_t lane = 0; lane < spans.size(); ++lane) {
      uint64_t busy = 0;
      uint64_t count = 0;
      for (const PlainSpan& span : spans[lane]) {
        if (span.end < begin || span.begin > end) continue;
        ++count;
        if (span.depth == 0) busy += std::min(span.end, end) - std::max(span.begin, begin);
      }
      EXPECT_EQ(stats.lanes[lane].spans, count);
      EXPECT_EQ(stats.lanes[lane].busy_ns, busy);
    }
    EXPECT_TRUE(stats.names_complete);
    EXPECT_FALSE(stats.top_names.empty());
  }
}

TEST_F(ViewerTest, SearchDetailsAndCriticalPath) {
  const auto hits = index_->search("JOB 1.7", 10);
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits.front().text, "job 1.7");
  const nlohmann::json job = viewer::task_details_json(*index_, hits.front().task);
  EXPECT_EQ(job["label"], "job 1.7");
  ASSERT_EQ(job["waits_on"].size(), 1u);
  EXPECT_EQ(job["waits_on"][0]["display"], "part");
  EXPECT_EQ(job["resolves"].size(), 1u);
  const nlohmann::json part = viewer::task_details_json(*index_, job["waits_on"][0]["index"].get<uint32_t>());
  EXPECT_EQ(part["parent"]["display"], "job 1.7");
  EXPECT_EQ(part["resolved_by"]["display"], "job 1.7");
  // The job's critical path goes through the part it waited on, and ends with the job.
  const auto& steps = job["critical_path"]["steps"];
  ASSERT_GE(steps.size(), 2u);
  EXPECT_EQ(steps.back()["display"], "job 1.7");
  bool through_part = false;
  for (const auto& step : steps) through_part |= step["display"] == "part";
  EXPECT_TRUE(through_part);

  uint64_t total = 0;
  const auto spans = index_->search("demo/parse", 5, &total);
  ASSERT_EQ(spans.size(), 5u);
  // Counted past the limit: as many as a search with no limit lists.
  const auto every = index_->search("demo/parse", SIZE_MAX);
  EXPECT_GT(every.size(), 5u);
  EXPECT_EQ(total, every.size());
  EXPECT_EQ(viewer::search_json(*index_, "demo/parse", 5)["total"], every.size());
  const nlohmann::json parse = viewer::span_details_json(*index_, spans[0].lane, spans[0].depth, spans[0].index);
  EXPECT_EQ(parse["name"], "demo/parse");
  EXPECT_EQ(parse["parent"]["name"], "demo/prepare");
  const auto round_index = index_->span_parent(spans[0].lane, 1, parse["parent"]["index"].get<uint32_t>());
  ASSERT_TRUE(round_index);
  const nlohmann::json round = viewer::span_details_json(*index_, spans[0].lane, 0, *round_index);
  EXPECT_EQ(round["name"], "demo/round");
  EXPECT_GE(round["children_count"].get<int>(), 1);
}

// Arrows are merged only when drawn alike: same pixel columns, same kind, same rows. Two waits
// at one instant between rows (0, 1) and (1, 32769) are two arrows, however many rows the trace
// has (the --html page merges by the same rule and must agree).
TEST(ViewerBounds, ArrowsBetweenOtherRowsAreNeverMerged) {
  TemporaryDirectory directory;
  format::TraceDescription description;
  description.clock = {1'000'000'000, 0, 0, 1'700'000'000'000'000'000, 0, 0};
  description.pid = 4243;
  description.process_name = "many_tasks";
  format::TraceWriter writer(description);
  constexpr uint32_t kThread = 7;
  writer.define_thread(kThread, "main");
  constexpr uint64_t kTasks = 32'800;
  for (uint64_t task = 1; task <= kTasks; ++task)
    writer.add(kThread, format::EventId::task_create, task, {task, uint64_t{0}, uint64_t{1}, uint64_t{0}});
  // Roots are laid out in the order they were made: tasks 1, 2 and 32770 are on rows 0, 1, 32769.
  const uint64_t first = 1, second = 2, far = 32'770;
  constexpr uint64_t kWait = 100'000;
  writer.add(kThread, format::EventId::task_wait, kWait, {first, second});
  writer.add(kThread, format::EventId::task_wait, kWait, {second, far});
  writer.add(kThread, format::EventId::task_resolve, kWait + 10, {second, second, uint64_t{0}, std::string_view{}});
  writer.add(kThread, format::EventId::task_resolve, kWait + 10, {far, far, uint64_t{0}, std::string_view{}});
  writer.write(directory / "trace");
  const TimelineIndex index = TimelineIndex::build(reader::Trace(directory / "trace"));
  ASSERT_EQ(index.task_row_count(), kTasks);
  const auto row_of = [&](uint64_t task) { return index.task_lines()[index.task_index(task).value()].row; };
  ASSERT_EQ(row_of(first), 0u);
  ASSERT_EQ(row_of(second), 1u);
  ASSERT_EQ(row_of(far), 32'769u);

  const viewer::Window window = index.window(0, index.duration(), 100);
  std::set<std::pair<uint32_t, uint32_t>> wait_rows;
  for (const viewer::ArrowInView& arrow : window.arrows) {
    if (index.arrows()[arrow.arrow].kind != viewer::ArrowKind::wait) continue;
    EXPECT_EQ(arrow.merged, 1u) << "rows " << arrow.from_row << " -> " << arrow.to_row;
    wait_rows.insert({arrow.from_row, arrow.to_row});
  }
  EXPECT_EQ(wait_rows, (std::set<std::pair<uint32_t, uint32_t>>{{0, 1}, {1, 32'769}}));
}

// A window asked for without rows, or with every row, holds what a screen can show at most
// and says what it left out: before, it held every task and arrow of the trace (139 MB of JSON
// for an 8 M-event trace).
TEST(ViewerBounds, AWindowHoldsAtMostAScreensWorthAndSaysThereIsMore) {
  TemporaryDirectory directory;
  const auto result = run(kCli + " record -q -o " + (directory / "trace") + " -- " + kEcho + " 3 400");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const reader::Trace trace(directory / "trace");
  const TimelineIndex index = TimelineIndex::build(trace);
  ASSERT_GT(index.task_row_count(), viewer::kMaxWindowTaskRows) << "too few tasks to pass the cap";

  for (const nlohmann::json& window :
       {viewer::window_json(index, 0, index.duration(), 1000),
        viewer::window_json(index, 0, index.duration(), 1000, viewer::TaskRowQuery{0, 4'000'000'000u, {}})}) {
    EXPECT_LE(window["tasks"]["lines"].size(), viewer::kMaxWindowTaskRows);
    EXPECT_LE(window["arrows"].size(), viewer::kMaxWindowArrows);
    EXPECT_LE(window["messages"].size(), viewer::kMaxWindowMessages);
    ASSERT_TRUE(window.contains("more")) << "no marker of what was left out";
    EXPECT_EQ(window["more"]["rows"], true);
    EXPECT_EQ(window["tasks"]["rows"], index.task_row_count()) << "the page still learns how many rows there are";
  }
  // Rows asked for past the cap are the cap's from the first one asked for.
  const nlohmann::json tail = viewer::window_json(index, 0, index.duration(), 1000,
                                                  viewer::TaskRowQuery{100, 100 + viewer::kMaxWindowTaskRows, {}});
  ASSERT_TRUE(tail.contains("more"));
  EXPECT_EQ(tail["more"]["rows"], false);
  ASSERT_FALSE(tail["tasks"]["lines"].empty());
  EXPECT_GE(tail["tasks"]["lines"].front()[2].get<uint32_t>(), 100u);
}

// By time a row holds many tasks: an answer keeps whole rows while their lines and blocks fit,
// and says when it left rows out.
TEST(ViewerBounds, TasksByTimeKeepWholeRowsWhileTheyFitAndSayThereIsMore) {
  TemporaryDirectory directory;
  // A ring that holds the whole burst: a task whose resolution was lost would live to the trace's
  // end on a row of its own. The test failed once on a machine busy with two builds, its output
  // not kept; a loss would explain it, and the check of the discards below says so if it is one.
  const auto result =
      run(kCli + " record -q --buffer-size 64M -o " + (directory / "trace") + " -- " + kManyTasks + " 150000");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const reader::Trace trace(directory / "trace");
  ASSERT_EQ(trace.events_discarded(), 0u) << "record lost events: the layout below would not be the program's";
  const TimelineIndex index = TimelineIndex::build(trace);
  ASSERT_EQ(index.task_time_rows().count(), 1u) << "tasks one after another share a row";
  viewer::TaskRowQuery query;
  query.by_time = true;
  const nlohmann::json screen = viewer::window_json(index, 0, index.duration(), 1000, query);
  EXPECT_EQ(screen["more"]["task_items"], false);
  EXPECT_FALSE(screen["tasks"]["blocks"].empty());
  // At a width where every task is a pixel wide, the row's 150,000 lines do not fit: it is left out whole.
  const auto width = static_cast<uint32_t>(std::min<uint64_t>(index.duration(), 4'000'000'000u));
  const nlohmann::json wide = viewer::window_json(index, 0, index.duration(), width, query);
  EXPECT_EQ(wide["more"]["task_items"], true);
  EXPECT_TRUE(wide["tasks"]["lines"].empty());
  EXPECT_TRUE(wide["tasks"]["blocks"].empty());
  EXPECT_EQ(wide["tasks"]["rows"], 1) << "the page still learns how many rows there are";
}

TEST_F(ViewerTest, TheServerAnswersWhileManyIdleConnectionsAreOpen) {
  viewer::ViewerServer server(*index_, "test", "127.0.0.1", 0);
  constexpr int kIdleConnections = 64;
  std::vector<int> idle;
  for (int i = 0; i < kIdleConnections; ++i)
    if (const int fd = test::open_idle_connection(server.port()); fd >= 0) idle.push_back(fd);
  EXPECT_EQ(idle.size(), size_t{kIdleConnections});
  // Generous limits: the answer must come, however slow the machine; waiting behind the idle
  // connections until the client gives up is the failure.
  httplib::Client client("127.0.0.1", server.port());
  client.set_connection_timeout(std::chrono::seconds(20));
  client.set_read_timeout(std::chrono::seconds(20));
  const httplib::Result summary = client.Get("/api/summary");
  ASSERT_TRUE(summary) << "no answer: " << httplib::to_string(summary.error());
  EXPECT_EQ(summary->status, 200);
  for (const int fd : idle) ::close(fd);
}

// More slowloris connections than the server has workers, each sending a header byte a second
// (under the per-read timeout), and idle ones besides: the page's requests must still be answered.
TEST_F(ViewerTest, TheServerAnswersWhileSlowClientsTrickleTheirHeaders) {
  viewer::ViewerServer server(*index_, "test", "127.0.0.1", 0);
  const httplib::Result summary = test::get_while_starved(server.port(), "/api/summary");
  ASSERT_TRUE(summary) << "no answer: " << httplib::to_string(summary.error());
  EXPECT_EQ(summary->status, 200);
}

// Per call path (the names of the spans open on the thread, outermost first): the time within
// [begin, end] and the spans that overlap it, paired by hand from the raw events, of every
// stream or of `only` one.
std::map<std::vector<std::string>, std::pair<uint64_t, uint64_t>> totals_by_path(
    const reader::Trace& trace, const TimelineIndex& index, uint64_t begin, uint64_t end,
    std::optional<size_t> only = std::nullopt) {
  std::map<std::vector<std::string>, std::pair<uint64_t, uint64_t>> out;
  for (size_t stream = 0; stream < trace.streams().size(); ++stream) {
    if (only && stream != *only) continue;
    std::vector<std::pair<std::string, uint64_t>> open;
    trace.for_each_in_stream(stream, [&](const reader::Event& event) {
      if (event.type == format::EventId::span_begin)
        open.emplace_back(index.site_name(event.name_id), index.to_ns(event.ticks));
      if (event.type == format::EventId::span_end && !open.empty()) {
        const uint64_t from = open.back().second;
        const uint64_t to = index.to_ns(event.ticks);
        if (to >= begin && from <= end) {
          std::vector<std::string> path;
          for (const auto& [name, time] : open) path.push_back(name);
          auto& [total, count] = out[path];
          total += std::min(to, end) - std::min(std::max(from, begin), std::min(to, end));
          ++count;
        }
        open.pop_back();
      }
      return true;
    });
  }
  return out;
}

std::map<std::vector<std::string>, std::pair<uint64_t, uint64_t>> flame_paths(const nlohmann::json& flame) {
  std::map<std::vector<std::string>, std::pair<uint64_t, uint64_t>> out;
  const auto& frames = flame["frames"];
  for (size_t k = 1; k < frames.size(); ++k) {
    std::vector<std::string> path;
    for (int64_t f = static_cast<int64_t>(k); f > 0; f = frames[f][0].get<int64_t>())
      path.insert(path.begin(), flame["names"][frames[f][1].get<size_t>()].get<std::string>());
    out[path] = {frames[k][2].get<uint64_t>(), frames[k][4].get<uint64_t>()};
  }
  return out;
}

// The whole trace, a seventh of it and a thousandth of it: the ranges the flame graph tests take.
std::vector<std::pair<uint64_t, uint64_t>> flame_ranges(uint64_t duration) {
  return {{0, duration}, {duration / 3, duration / 3 + duration / 7}, {duration / 2, duration / 2 + duration / 1000}};
}

TEST_F(ViewerTest, TheFlameGraphOfARangeHasEachCallPathsTimeInIt) {
  const uint64_t duration = index_->duration();
  for (const auto& [begin, end] : flame_ranges(duration)) {
    SCOPED_TRACE(::testing::Message() << "range " << begin << ".." << end);
    const auto flame = viewer::flame_json(*index_, begin, end);
    EXPECT_EQ(flame["source"], "spans");
    const auto expected = totals_by_path(*trace_, *index_, begin, end);
    EXPECT_EQ(flame_paths(flame), expected);
    uint64_t outermost = 0;
    for (const auto& [path, total] : expected) outermost += path.size() == 1 ? total.first : 0;
    EXPECT_EQ(flame["frames"][0][2].get<uint64_t>(), outermost) << "the root holds every outermost span's time";
  }
  // By hand, from the demo (120 rounds on each of 3 workers, every round a job): round holds
  // prepare (which holds parse, a 2 us spin) and the job's compute (a 3 us spin).
  const auto whole = flame_paths(viewer::flame_json(*index_, 0, duration));
  const std::vector<std::string> round = {"demo/round"};
  const std::vector<std::string> prepare = {"demo/round", "demo/prepare"};
  const std::vector<std::string> parse = {"demo/round", "demo/prepare", "demo/parse"};
  const std::vector<std::string> compute = {"demo/round", "demo/compute"};
  ASSERT_EQ(whole.size(), 4u);
  for (const auto& path : {round, prepare, parse, compute}) EXPECT_EQ(whole.at(path).second, 360u) << path.back();
  EXPECT_GE(whole.at(parse).first, 360u * 2000);
  EXPECT_GE(whole.at(compute).first, 360u * 3000);
  EXPECT_GE(whole.at(round).first, whole.at(prepare).first + whole.at(compute).first);
}

// Split by thread: a root per lane with spans in the range, named as the page names lanes, under
// which are exactly that thread's call paths, as paired by hand from its stream alone.
TEST_F(ViewerTest, TheFlameGraphByThreadHasARootPerThreadWithItsOwnSpans) {
  const uint64_t duration = index_->duration();
  for (const auto& [begin, end] : flame_ranges(duration)) {
    SCOPED_TRACE(::testing::Message() << "range " << begin << ".." << end);
    const auto flame = viewer::flame_json(*index_, begin, end, viewer::FlameRoots::per_thread);
    EXPECT_EQ(flame["by"], "thread");
    const auto paths = flame_paths(flame);
    std::map<std::string, uint32_t> lane_of_root;
    uint64_t threads_total = 0;
    for (const auto& entry : flame["threads"]) {
      const auto frame = entry[0].get<size_t>();
      const auto lane = entry[1].get<uint32_t>();
      ASSERT_LT(lane, index_->lanes().size());
      EXPECT_EQ(flame["frames"][frame][0], 0) << "a thread's frame is right under the root";
      const std::string name = flame["names"][flame["frames"][frame][1].get<size_t>()];
      EXPECT_EQ(name, index_->lanes()[lane].name + " (" + std::to_string(index_->lanes()[lane].thread_id) + ")");
      lane_of_root[name] = lane;
      threads_total += flame["frames"][frame][2].get<uint64_t>();
    }
    for (const auto& [path, total] : paths) EXPECT_TRUE(lane_of_root.count(path[0])) << "under a thread: " << path[0];
    size_t threads_with_spans = 0;
    for (size_t stream = 0; stream < trace_->streams().size(); ++stream) {
      const auto expected = totals_by_path(*trace_, *index_, begin, end, stream);
      if (expected.empty()) continue;
      ++threads_with_spans;
      const std::string root = trace_->thread_name(trace_->streams()[stream].thread_id) + " (" +
                               std::to_string(trace_->streams()[stream].thread_id) + ")";
      ASSERT_TRUE(lane_of_root.count(root)) << root << " has spans in the range: a root of its own";
      std::map<std::vector<std::string>, std::pair<uint64_t, uint64_t>> under;
      for (const auto& [path, total] : paths)
        if (path[0] == root && path.size() > 1) under[std::vector<std::string>(path.begin() + 1, path.end())] = total;
      EXPECT_EQ(under, expected) << root;
    }
    EXPECT_EQ(lane_of_root.size(), threads_with_spans) << "a root per thread with spans in the range, no other";
    EXPECT_EQ(flame["frames"][0][2].get<uint64_t>(), threads_total) << "the root holds the threads' time";
    EXPECT_EQ(flame["frames"][0][2], viewer::flame_json(*index_, begin, end)["frames"][0][2]);
  }
}

// --- a coroutine span's time (docs/viewer.md, "A span's time") ----------------------------------

// A span at the top of a coroutine that suspends (a sleep on the pool's timer) and resumes on
// a pool thread: it begins in one run and ends in another, perhaps on another thread.
task<void> pricing_call(thread_pool& pool) {
  co_await pool.schedule();
  CHRONICLE_SPAN("backend", "pricing call");
  { CHRONICLE_SPAN("backend", "parse"); }
  co_await pool.sleep_for(std::chrono::milliseconds(1));
  co_await pool.schedule();
}

class CoroutineSpanTime : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = new TemporaryDirectory;
    const Config config = test::test_config(*directory_);
    ASSERT_TRUE(start(config)) << last_error();
    {
      thread_pool pool(2);
      for (int request = 0; request < kRequests; ++request) sync_wait(pricing_call(pool).named("request"));
    }
    stop();
    trace_ = new reader::Trace(config.output);
    ASSERT_EQ(trace_->events_discarded(), 0u);
    index_ = new TimelineIndex(TimelineIndex::build(*trace_));
    profile_ = new analysis::Profile(analysis::profile_trace(*trace_));
  }
  static void TearDownTestSuite() {
    delete profile_;
    delete index_;
    delete trace_;
    delete directory_;
  }

  static const analysis::SpanProfile& stats_of(const std::string& name) {
    for (const auto& span : profile_->spans)
      if (span.category + "/" + span.name == name) return span;
    throw std::runtime_error("stats has no span " + name);
  }

  static constexpr int kRequests = 20;
  static inline TemporaryDirectory* directory_ = nullptr;
  static inline reader::Trace* trace_ = nullptr;
  static inline TimelineIndex* index_ = nullptr;
  static inline analysis::Profile* profile_ = nullptr;
};

// The frames of `name` in a flame graph of the whole trace: their time and how many spans.
std::pair<uint64_t, uint64_t> flame_total(const nlohmann::json& flame, const std::string& name) {
  std::pair<uint64_t, uint64_t> total{0, 0};
  for (const auto& frame : flame["frames"])
    if (frame[1].get<int64_t>() >= 0 && flame["names"][frame[1].get<size_t>()] == name) {
      total.first += frame[2].get<uint64_t>();
      total.second += frame[4].get<uint64_t>();
    }
  return total;
}

// `stats`, the flame graph in both modes, range stats and the span details give the same times
// for the same spans, to the nanosecond: wall time (begin to end, suspension included) and
// running time (the pieces in the task's runs). Before, the flame graph and range stats had only
// the pieces (a twentieth of what `stats` said, three pieces per span) and range stats called a
// thread that ran tasks without spans of its own idle.
TEST_F(CoroutineSpanTime, StatsTheFlameGraphAndRangeStatsAgree) {
  const uint64_t duration = index_->duration();
  const viewer::RangeStats range = index_->range_stats(0, duration);
  const auto wall_flame = viewer::flame_json(*index_, 0, duration, viewer::FlameRoots::merged,
                                             viewer::FlameSource::spans, viewer::FlameMode::wall);
  const auto running_flame = viewer::flame_json(*index_, 0, duration, viewer::FlameRoots::merged,
                                                viewer::FlameSource::spans, viewer::FlameMode::running);
  EXPECT_EQ(wall_flame["mode"], "wall");
  EXPECT_EQ(running_flame["mode"], "running");
  for (const std::string name : {"backend/pricing call", "backend/parse"}) {
    SCOPED_TRACE(name);
    const analysis::SpanProfile& stats = stats_of(name);
    const uint64_t wall = stats.duration.total;
    EXPECT_EQ(stats.duration.count, static_cast<uint64_t>(kRequests));
    EXPECT_GE(wall, stats.running);
    EXPECT_EQ(flame_total(wall_flame, name), std::make_pair(wall, stats.duration.count));
    const auto running = flame_total(running_flame, name);
    EXPECT_EQ(running.first, stats.running);
    const auto in_range =
        std::find_if(range.top_names.begin(), range.top_names.end(),
                     [&](const viewer::NameTotal& total) { return index_->site_name(total.site) == name; });
    ASSERT_NE(in_range, range.top_names.end());
    EXPECT_EQ(in_range->wall_ns, wall);
    EXPECT_EQ(in_range->spans, stats.duration.count);
    EXPECT_EQ(in_range->running_ns, stats.running);
    EXPECT_EQ(in_range->pieces, running.second);
    // The pieces on the lanes, added up by hand, are the running time; each piece's details
    // name its span's wall and running times, which add up to stats' too.
    uint64_t pieces = 0;
    std::map<std::pair<uint64_t, uint64_t>, std::pair<uint64_t, uint64_t>> spans_of_pieces;
    for (uint32_t lane = 0; lane < index_->lanes().size(); ++lane)
      for (uint32_t depth = 0; depth < index_->lanes()[lane].depths.size(); ++depth) {
        const viewer::IntervalRow& row = index_->lanes()[lane].depths[depth];
        for (uint32_t k = 0; k < row.size(); ++k) {
          if (index_->site_name(row.items[k]) != name) continue;
          pieces += row.ends[k] - row.begins[k];
          const auto details = viewer::span_details_json(*index_, lane, depth, k);
          const auto& span = details["span"];
          spans_of_pieces[{span["begin"], span["end"]}] = {span["wall_ns"], span["running_ns"]};
        }
      }
    EXPECT_EQ(pieces, stats.running);
    std::pair<uint64_t, uint64_t> from_details{0, 0};
    for (const auto& [extent, times] : spans_of_pieces) {
      from_details.first += times.first;
      from_details.second += times.second;
    }
    EXPECT_EQ(from_details, std::make_pair(wall, stats.running));
  }
  // The call sleeps a millisecond on the pool's timer inside the span: its wall time holds the
  // sleeps, its running time not; the parse never suspends.
  EXPECT_GE(stats_of("backend/pricing call").duration.total,
            stats_of("backend/pricing call").running + kRequests * uint64_t{1'000'000});
  EXPECT_EQ(stats_of("backend/parse").duration.total, stats_of("backend/parse").running);
  size_t own_busy_rows = 0;
  for (const analysis::ThreadProfile& thread : profile_->threads) {
    SCOPED_TRACE(thread.name);
    for (const viewer::LaneStats& lane : range.lanes) {
      if (index_->lanes()[lane.lane].thread_id != thread.thread_id) continue;
      EXPECT_EQ(lane.busy_ns, thread.busy);
      own_busy_rows += index_->lanes()[lane.lane].busy_is_outermost ? 0 : 1;
    }
  }
  // The pool's threads run tasks outside any span of their own: their busy time is a row of its own.
  EXPECT_GT(own_busy_rows, 0u);
}

// The index keeps a running time only for the spans that paused (the pricing calls, which sleep
// inside); every other span's is its wall time. Read back from the cache, each span's running
// time is the one built.
TEST_F(CoroutineSpanTime, OnlyPausedSpansKeepARunningTimeOfTheirOwn) {
  const viewer::WholeSpans& spans = index_->whole_spans();
  EXPECT_TRUE(spans.running.empty());
  size_t paused = 0;
  for (size_t k = 0; k < spans.size(); ++k) {
    const viewer::WholeSpan span = spans.at(k, index_->lanes());
    const bool runs_throughout = spans.running_ns(k, index_->lanes()) == span.end - span.begin;
    EXPECT_EQ(runs_throughout, index_->site_name(span.site) != "backend/pricing call") << k;
    paused += runs_throughout ? 0 : 1;
  }
  EXPECT_EQ(paused, static_cast<size_t>(kRequests));
  EXPECT_EQ(spans.paused.size(), paused);

  const TemporaryDirectory directory;
  viewer::IndexCache::save(*index_, directory / "index", "identity");
  const std::optional<TimelineIndex> read = viewer::IndexCache::load(directory / "index", "identity");
  ASSERT_TRUE(read.has_value());
  ASSERT_EQ(read->whole_spans().size(), spans.size());
  for (size_t k = 0; k < spans.size(); ++k)
    EXPECT_EQ(read->whole_spans().running_ns(k, read->lanes()), spans.running_ns(k, index_->lanes())) << k;
}

// A span that runs in one piece, from its begin to its end, is read from that piece: only the
// spans that paused (the pricing calls) keep a begin, an end and a site of their own. Each span
// reads as its pieces say, built and read back from the cache alike.
TEST_F(CoroutineSpanTime, ASpanInOnePieceIsKeptOnceInItsPiece) {
  const viewer::WholeSpans& spans = index_->whole_spans();
  EXPECT_EQ(spans.begins.size(), static_cast<size_t>(kRequests));
  EXPECT_EQ(spans.ends.size(), static_cast<size_t>(kRequests));
  EXPECT_EQ(spans.sites.size(), static_cast<size_t>(kRequests));
  std::vector<uint64_t> piece_time(spans.size(), 0);
  std::vector<bool> one_piece_matches(spans.size(), false);
  for (const viewer::Lane& lane : index_->lanes())
    for (size_t depth = 0; depth < lane.depths.size(); ++depth)
      for (size_t piece = 0; piece < lane.depths[depth].size(); ++piece) {
        const uint32_t k = lane.depth_spans[depth][piece];
        const viewer::WholeSpan span = spans.at(k, index_->lanes());
        const viewer::IntervalRow& row = lane.depths[depth];
        EXPECT_LE(span.begin, row.begins[piece]) << k;
        EXPECT_GE(span.end, row.ends[piece]) << k;
        EXPECT_EQ(span.site, row.items[piece]) << k;
        piece_time[k] += row.ends[piece] - row.begins[piece];
        if (span.begin == row.begins[piece] && span.end == row.ends[piece]) one_piece_matches[k] = true;
      }
  for (size_t k = 0; k < spans.size(); ++k) {
    EXPECT_EQ(spans.running_ns(k, index_->lanes()), piece_time[k]) << k;
    const bool paused = index_->site_name(spans.at(k, index_->lanes()).site) == "backend/pricing call";
    EXPECT_EQ(one_piece_matches[k], !paused) << k;
  }

  const TemporaryDirectory directory;
  viewer::IndexCache::save(*index_, directory / "index", "identity");
  const std::optional<TimelineIndex> read = viewer::IndexCache::load(directory / "index", "identity");
  ASSERT_TRUE(read.has_value());
  ASSERT_EQ(read->whole_spans().size(), spans.size());
  for (size_t k = 0; k < spans.size(); ++k) {
    const viewer::WholeSpan built = spans.at(k, index_->lanes());
    const viewer::WholeSpan reread = read->whole_spans().at(k, read->lanes());
    EXPECT_EQ(std::tie(reread.begin, reread.end, reread.site), std::tie(built.begin, built.end, built.site)) << k;
  }
}

// Where a span's piece lies is read from the index file: a link past its lane's pieces (a damaged
// or crafted file) is refused where it is read, never followed.
TEST(WholeSpans, ALinkPastItsLanesPiecesIsRefusedNotFollowed) {
  std::vector<viewer::Lane> lanes(1);
  lanes[0].depths.resize(1);
  lanes[0].depths[0].add(10, 20, 7);
  viewer::WholeSpans spans;
  spans.lanes = std::vector<uint32_t>{0};
  spans.parents = std::vector<uint32_t>{viewer::WholeSpans::kNoParent};
  spans.piece_depths = std::vector<uint8_t>{0};
  spans.pieces = std::vector<uint32_t>{0};
  const viewer::WholeSpan span = spans.at(0, lanes);
  EXPECT_EQ(std::tie(span.begin, span.end, span.site), std::make_tuple(uint64_t{10}, uint64_t{20}, uint32_t{7}));
  spans.pieces = std::vector<uint32_t>{1};
  EXPECT_THROW(spans.at(0, lanes), std::out_of_range);
  spans.piece_depths = std::vector<uint8_t>{1};
  spans.pieces = std::vector<uint32_t>{0};
  EXPECT_THROW(spans.at(0, lanes), std::out_of_range);
  spans.lanes = std::vector<uint32_t>{1};
  spans.piece_depths = std::vector<uint8_t>{0};
  EXPECT_THROW(spans.at(0, lanes), std::out_of_range);
  spans.lanes = std::vector<uint32_t>{0};
  spans.piece_depths = std::vector<uint8_t>{viewer::WholeSpans::kApart};
  EXPECT_THROW(spans.at(0, lanes), std::out_of_range);
}

// The spans that overlap a range are each visited once, in order, whatever spans as long as the
// trace lie before them (a program's outermost span: the latest end before every block is the
// trace's end, and only each block's own reach tells which blocks to read).
TEST(WholeSpans, EachSpanThatOverlapsARangeIsVisitedOnceInOrder) {
  viewer::WholeSpans spans;
  std::vector<uint64_t> begins{0};
  std::vector<uint64_t> ends{1'000'000};
  for (uint64_t k = 1; k < 1000; ++k) {
    begins.push_back(k * 1000);
    ends.push_back(k * 1000 + (k % 7 == 0 ? 5000 : 500));
  }
  spans.begins = begins;
  spans.ends = ends;
  spans.sites = std::vector<uint32_t>(begins.size(), 1);
  spans.lanes = std::vector<uint32_t>(begins.size(), 0);
  spans.parents = std::vector<uint32_t>(begins.size(), viewer::WholeSpans::kNoParent);
  std::vector<uint64_t> reach;
  std::vector<uint64_t> block_reach;
  std::vector<uint64_t> block_begins;
  for (size_t first = 0; first < begins.size(); first += viewer::WholeSpans::kReachBlock) {
    block_begins.push_back(begins[first]);
    const size_t last = std::min(begins.size(), first + viewer::WholeSpans::kReachBlock);
    block_reach.push_back(
        *std::max_element(ends.begin() + static_cast<ptrdiff_t>(first), ends.begin() + static_cast<ptrdiff_t>(last)));
    reach.push_back(std::max(reach.empty() ? 0 : reach.back(), block_reach.back()));
  }
  spans.reach = reach;
  spans.block_reach = block_reach;
  spans.block_begins = block_begins;
  const std::vector<viewer::Lane> lanes(1);
  const std::vector<std::pair<uint64_t, uint64_t>> ranges = {
      {0, 0},         {500'000, 500'100},     {500'600, 500'900}, {123'456, 234'567}, {998'000, 2'000'000},
      {0, 2'000'000}, {1'000'001, 2'000'000}, {64'200, 64'700}};
  for (const auto& [begin, end] : ranges) {
    SCOPED_TRACE(begin);
    std::vector<size_t> expected;
    for (size_t k = 0; k < begins.size(); ++k)
      if (begins[k] <= end && ends[k] >= begin) expected.push_back(k);
    std::vector<size_t> visited;
    spans.for_each_overlapping(begin, end, lanes, [&](size_t k, const viewer::WholeSpan& span) {
      EXPECT_EQ(span.begin, begins[k]);
      visited.push_back(k);
      return true;
    });
    EXPECT_EQ(visited, expected);
  }
}

// Indexes put together (the processes of a run, or of a merge) keep each span's running time:
// here the one trace twice, so that both halves have paused spans.
TEST_F(CoroutineSpanTime, IndexesPutTogetherKeepEachSpansRunningTime) {
  std::vector<reader::Trace> traces;
  traces.emplace_back(trace_->directory());
  traces.emplace_back(trace_->directory());
  const TimelineIndex both = TimelineIndex::build(traces);
  const viewer::WholeSpans& spans = both.whole_spans();
  const viewer::WholeSpans& one = index_->whole_spans();
  ASSERT_EQ(spans.size(), 2 * one.size());
  EXPECT_TRUE(spans.running.empty());
  EXPECT_EQ(spans.paused.size(), 2 * one.paused.size());
  // By name: each process's call sites are its own in indexes put together.
  std::multiset<std::tuple<std::string, uint64_t, uint64_t, uint64_t>> expected;
  std::multiset<std::tuple<std::string, uint64_t, uint64_t, uint64_t>> found;
  for (size_t k = 0; k < one.size(); ++k) {
    const viewer::WholeSpan span = one.at(k, index_->lanes());
    for (int copy = 0; copy < 2; ++copy)
      expected.insert({index_->site_name(span.site), span.begin, span.end, one.running_ns(k, index_->lanes())});
  }
  for (size_t k = 0; k < spans.size(); ++k) {
    const viewer::WholeSpan span = spans.at(k, both.lanes());
    found.insert({both.site_name(span.site), span.begin, span.end, spans.running_ns(k, both.lanes())});
  }
  EXPECT_EQ(found, expected);
}

// The server's flame graph takes the mode and says it; wall is the default.
TEST_F(CoroutineSpanTime, TheServersFlameGraphHasAWallAndARunningMode) {
  viewer::ViewerServer server(*index_, "test", "127.0.0.1", 0);
  httplib::Client client("127.0.0.1", server.port());
  const std::string range = "/api/flame?begin=0&end=" + std::to_string(index_->duration());
  for (const auto& [query, mode] : std::vector<std::pair<std::string, viewer::FlameMode>>{
           {"", viewer::FlameMode::wall},
           {"&mode=wall", viewer::FlameMode::wall},
           {"&mode=running", viewer::FlameMode::running},
           {"&mode=running&by=thread", viewer::FlameMode::running}}) {
    SCOPED_TRACE(query);
    const auto answer = client.Get(range + query);
    ASSERT_TRUE(answer);
    ASSERT_EQ(answer->status, 200);
    const auto roots =
        query.find("by=thread") != std::string::npos ? viewer::FlameRoots::per_thread : viewer::FlameRoots::merged;
    EXPECT_EQ(nlohmann::json::parse(answer->body),
              viewer::flame_json(*index_, 0, index_->duration(), roots, viewer::FlameSource::spans, mode));
  }
  const auto wrong = client.Get(range + "&mode=cpu");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 400);
}

TEST_F(ViewerTest, TheServerAnswersWhatTheIndexSays) {
  viewer::ViewerServer server(*index_, "test", "127.0.0.1", 0);
  httplib::Client client("127.0.0.1", server.port());
  const auto summary = client.Get("/api/summary");
  ASSERT_TRUE(summary);
  ASSERT_EQ(summary->status, 200);
  const auto summary_json = nlohmann::json::parse(summary->body);
  EXPECT_EQ(summary_json["tasks"], index_->task_lines().size());
  EXPECT_EQ(summary_json["lanes"].size(), index_->lanes().size());
  // Each lane counts the task runs on its thread, as the task graph has them.
  uint64_t lanes_with_runs = 0;
  for (size_t lane = 0; lane < index_->lanes().size(); ++lane) {
    uint64_t runs = 0;
    for (uint32_t k = 0; k < index_->task_lines().size(); ++k)
      for (const auto& run : index_->task(k).runs) runs += run.thread_id == index_->lanes()[lane].thread_id;
    EXPECT_EQ(summary_json["lanes"][lane]["runs"], runs) << index_->lanes()[lane].name;
    lanes_with_runs += runs > 0;
  }
  EXPECT_GT(lanes_with_runs, 0u);
  for (const auto& [begin, end, width] : windows()) {
    const auto answer = client.Get("/api/window?begin=" + std::to_string(begin) + "&end=" + std::to_string(end) +
                                   "&width=" + std::to_string(width));
    ASSERT_TRUE(answer);
    ASSERT_EQ(answer->status, 200);
    EXPECT_EQ(nlohmann::json::parse(answer->body), viewer::window_json(*index_, begin, end, width));
  }
  const auto bad = client.Get("/api/task?index=999999999");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  const uint64_t third = index_->duration() / 3;
  const auto flame = client.Get("/api/flame?begin=" + std::to_string(third) + "&end=" + std::to_string(2 * third));
  ASSERT_TRUE(flame);
  ASSERT_EQ(flame->status, 200);
  EXPECT_EQ(nlohmann::json::parse(flame->body), viewer::flame_json(*index_, third, 2 * third));
  const std::string range = "/api/flame?begin=" + std::to_string(third) + "&end=" + std::to_string(2 * third);
  const auto by_thread = client.Get(range + "&by=thread");
  ASSERT_TRUE(by_thread);
  ASSERT_EQ(by_thread->status, 200);
  EXPECT_EQ(nlohmann::json::parse(by_thread->body),
            viewer::flame_json(*index_, third, 2 * third, viewer::FlameRoots::per_thread));
  const auto by_nonsense = client.Get(range + "&by=colour");
  ASSERT_TRUE(by_nonsense);
  EXPECT_EQ(by_nonsense->status, 400);
  const auto search = client.Get("/api/search?q=job%202.5");
  ASSERT_TRUE(search);
  EXPECT_EQ(nlohmann::json::parse(search->body)["hits"][0]["display"], "job 2.5");
}

// A trace that is not whole says so: the summary carries the reader's warnings, which the page
// shows above the timeline.
TEST(ViewerWarnings, ADamagedPacketIsNamedInTheSummary) {
  TemporaryDirectory directory;
  const auto result = run(kCli + " record -q -o " + (directory / "trace") + " -- " + kDemo + " 20 2");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  {
    const reader::Trace whole(directory / "trace");
    const TimelineIndex index = TimelineIndex::build(whole);
    EXPECT_TRUE(index.warnings().empty());
    EXPECT_TRUE(viewer::summary_json(index, "t")["warnings"].empty());
  }
  std::string victim;
  for (const auto& entry : std::filesystem::directory_iterator(directory / "trace"))
    if (entry.path().filename().string().rfind("thread-", 0) == 0) victim = entry.path().string();
  ASSERT_FALSE(victim.empty());
  // The first event (just after the first packet's header) becomes one of no such id.
  ASSERT_TRUE(test::write_unknown_event(victim, format::kPacketHeaderSize));
  const reader::Trace damaged(directory / "trace");
  const TimelineIndex index = TimelineIndex::build(damaged);
  const auto warnings = viewer::summary_json(index, "t")["warnings"];
  ASSERT_EQ(warnings.size(), 1u) << warnings.dump();
  EXPECT_NE(warnings[0].get<std::string>().find(victim + ": offset 0"), std::string::npos) << warnings.dump();
}

// The viewer draws one track per counter name: call sites and threads merged, the threads
// listed as an attribute; a metric counter's track climbs to its total.
void viewer_open_connections_at_accept(int64_t count) {
  CHRONICLE_COUNTER("echo", "open connections", count);
}
void viewer_open_connections_at_close(int64_t count) {
  CHRONICLE_COUNTER("echo", "open connections", count);
}

// What a span says of itself (attributes, and its status when it failed) is in its details and
// found by search, from a fresh index and from the cached one alike.
TEST(ViewerAttributes, DetailsShowThemAndSearchFindsTheirSpans) {
  TemporaryDirectory directory;
  const Config config = test::test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  for (const char* customer : {"acme", "globex", "initech"}) {
    CHRONICLE_SPAN_ARGS("shop", "checkout", "customer", customer, "items", 3);
    if (std::string_view(customer) == "globex") fail_current_span("card declined");
  }
  { CHRONICLE_SPAN("shop", "idle"); }
  stop();
  for (const bool from_cache : {false, true}) {
    SCOPED_TRACE(from_cache ? "from the cache" : "built");
    const viewer::OpenedIndex opened = viewer::open_index(config.output);
    ASSERT_EQ(opened.from_cache, from_cache) << opened.cache_problem;
    const TimelineIndex& index = opened.index;
    const auto hits = index.search("globex", 10);
    ASSERT_EQ(hits.size(), 1u);
    EXPECT_EQ(hits[0].text, "shop/checkout (customer = globex)");
    const nlohmann::json details = viewer::span_details_json(index, hits[0].lane, hits[0].depth, hits[0].index);
    EXPECT_EQ(details["attributes"],
              nlohmann::json::array({"customer = globex", "items = 3", "status = error: card declined"}));
    EXPECT_EQ(index.search("card declined", 10).size(), 1u);
    EXPECT_EQ(index.search("customer =", 10).size(), 3u);
    const auto idle = index.search("shop/idle", 10);
    ASSERT_EQ(idle.size(), 1u);
    EXPECT_EQ(viewer::span_details_json(index, idle[0].lane, idle[0].depth, idle[0].index)["attributes"],
              nlohmann::json::array());
    // A window asked with a search text marks each span one of whose attributes matches, so that
    // the page outlines it (and dims the others when it shows only matches).
    std::map<std::string, int> marked;
    const auto spans = index.search("shop/", 10);
    ASSERT_EQ(spans.size(), 4u);
    for (const auto& span : spans) {  // each in a window of its own, so that none is merged in a block
      const auto details = viewer::span_details_json(index, span.lane, span.depth, span.index);
      const std::string what = details["attributes"].empty() ? "idle" : std::string(details["attributes"][0]);
      const nlohmann::json window = viewer::window_json(index, span.begin, span.end, 1000, {}, "GLOBEX");
      for (const auto& lane : window["lanes"])
        for (const auto& drawn : lane["spans"]) {
          ASSERT_EQ(drawn.size(), 6u) << drawn;
          if (lane["lane"] == span.lane && drawn[2] == span.depth && drawn[3] == span.index) marked[what] = drawn[5];
        }
    }
    // Named: a range over a member of a temporary outlives the temporary (TSan saw it freed).
    const nlohmann::json whole = viewer::window_json(index, 0, index.duration(), 1000);
    for (const auto& lane : whole["lanes"])
      for (const auto& span : lane["spans"]) EXPECT_EQ(span.size(), 5u) << "nothing to mark without a text";
  }
}

chronicle::task<int> tenant_task(int n) {
  CHRONICLE_SPAN_ATTRIBUTE("shop", "tenant", "acme");  // no span open in the task: the task's own
  co_return n;
}

// A task's own attributes (set while it holds no span open) are in its details, as a span's are
// in its, and search finds the task by them; from a fresh index and a cached one.
TEST(ViewerAttributes, ATasksOwnAreInItsDetailsAndSearchFindsIt) {
  TemporaryDirectory directory;
  const Config config = test::test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  EXPECT_EQ(sync_wait(tenant_task(3)), 3);
  stop();
  for (const bool from_cache : {false, true}) {
    SCOPED_TRACE(from_cache ? "from the cache" : "built");
    const viewer::OpenedIndex opened = viewer::open_index(config.output);
    ASSERT_EQ(opened.from_cache, from_cache) << opened.cache_problem;
    const auto hits = opened.index.search("tenant = ACME", 10);
    ASSERT_EQ(hits.size(), 1u);
    ASSERT_EQ(hits[0].kind, viewer::SearchHit::Kind::task);
    EXPECT_NE(hits[0].text.find("(tenant = acme)"), std::string::npos) << hits[0].text;
    const nlohmann::json details = viewer::task_details_json(opened.index, hits[0].task);
    EXPECT_EQ(details["attributes"], nlohmann::json::array({"tenant = acme"}));
  }
}

TEST(ViewerCounters, OneTrackPerNameWhateverTheCallSiteOrThread) {
  TemporaryDirectory directory;
  const Config config = test::test_config(directory);
  Counter requests{"test.viewer_requests"};
  ASSERT_TRUE(start(config)) << last_error();
  viewer_open_connections_at_accept(1);
  viewer_open_connections_at_close(0);
  std::vector<std::thread> writers;
  for (int thread = 0; thread < 10; ++thread)
    writers.emplace_back([thread, &requests] {
      for (int k = 0; k < 3; ++k) {
        CHRONICLE_COUNTER("pool", "queue depth", thread + k);
        requests.inc();
      }
    });
  for (auto& writer : writers) writer.join();
  stop();
  reader::Trace trace(config.output);
  const TimelineIndex index = TimelineIndex::build(trace);
  std::map<std::string, size_t> tracks;
  for (const auto& series : index.counters()) ++tracks[series.name];
  EXPECT_EQ(tracks, (std::map<std::string, size_t>{
                        {"echo/open connections", 1}, {"pool/queue depth", 1}, {"test.viewer_requests", 1}}));
  for (const auto& series : index.counters()) {
    if (series.name == "pool/queue depth") {
      EXPECT_EQ(series.values.size(), 30u);
      EXPECT_EQ(series.lanes.size(), 10u) << "the threads that wrote it";
    }
    if (series.name == "test.viewer_requests") {
      ASSERT_EQ(series.values.size(), 30u);
      EXPECT_EQ(series.values.back(), 30);
      EXPECT_EQ(series.max, 30);
      EXPECT_TRUE(std::is_sorted(series.values.begin(), series.values.end()));
      EXPECT_TRUE(std::is_sorted(series.times.begin(), series.times.end()));
    }
  }
  const auto summary = viewer::summary_json(index, "t");
  std::map<std::string, size_t> named;
  for (const auto& counter : summary["counters"]) ++named[counter["name"].get<std::string>()];
  EXPECT_EQ(named, tracks);
}

// `samples` samples of one counter from each of three threads, thread t writing t * 1e6 + k for
// its k-th sample.
std::string record_counter_of_three_threads(const TemporaryDirectory& directory, int samples) {
  const Config config = test::test_config(directory);
  EXPECT_TRUE(start(config)) << last_error();
  std::vector<std::thread> writers;
  for (int thread = 0; thread < 3; ++thread)
    writers.emplace_back([thread, samples] {
      for (int k = 0; k < samples; ++k) CHRONICLE_COUNTER("pool", "queue depth", thread * 1000000 + k);
    });
  for (auto& writer : writers) writer.join();
  stop();
  return config.output;
}

const CounterSeries& series_named(const TimelineIndex& index, std::string_view name) {
  const auto found = std::find_if(index.counters().begin(), index.counters().end(),
                                  [&](const CounterSeries& series) { return series.name == name; });
  if (found == index.counters().end()) throw std::runtime_error("no series " + std::string(name));
  return *found;
}

// Samples of several threads are put in time order in place: each keeps its value and its
// thread's lane, and each thread's samples their order.
TEST(ViewerCounters, ASeriesOfSeveralThreadsIsInTimeOrderWithEachSamplesLane) {
  TemporaryDirectory directory;
  const TimelineIndex index = TimelineIndex::build(reader::Trace(record_counter_of_three_threads(directory, 5000)));
  const CounterSeries& series = series_named(index, "pool/queue depth");
  ASSERT_EQ(series.values.size(), 15000u);
  ASSERT_EQ(series.sample_lanes.size(), 15000u);
  ASSERT_EQ(series.lanes.size(), 3u);
  EXPECT_TRUE(std::is_sorted(series.times.begin(), series.times.end()));
  std::map<uint32_t, int> thread_of_lane;
  std::map<int, int> next_of_thread;
  for (size_t k = 0; k < series.values.size(); ++k) {
    const int thread = static_cast<int>(series.values[k]) / 1000000;
    const auto [lane, added] = thread_of_lane.try_emplace(series.sample_lanes[k], thread);
    ASSERT_EQ(lane->second, thread) << "sample " << k << " has another thread's lane";
    ASSERT_EQ(static_cast<int>(series.values[k]) % 1000000, next_of_thread[thread]++) << "sample " << k;
  }
  EXPECT_EQ(thread_of_lane.size(), 3u);
}

// A series' arrays are made once at their size (the streams' passes count each site's samples),
// not grown by doubling, whose fresh pages cost a tenth of a first open at 100 M events. Every
// array of the build is put in a file of its own here, which counts them: as many for 10 times
// the samples (6,000 and 60,000 samples: both with a min-max pyramid of four levels).
TEST(ViewerCounters, ASeriesArraysAreMadeOnceAtTheirSize) {
  auto arrays_made = [](int samples) {
    TemporaryDirectory directory;
    const std::string trace = record_counter_of_three_threads(directory, samples);
    const viewer::SpillScope spill(directory.path(), 1);
    const uint64_t before = viewer::spill_stats().files;
    const TimelineIndex index = TimelineIndex::build(reader::Trace(trace));
    EXPECT_EQ(series_named(index, "pool/queue depth").values.size(), 3u * samples);
    EXPECT_EQ(viewer::spill_stats().refused, 0u) << viewer::spill_stats().last_problem;
    return viewer::spill_stats().files - before;
  };
  EXPECT_EQ(arrays_made(2000), arrays_made(20000));
}

// One thread's `spans` outermost spans, each holding a run of a task of its own with a span in it; with
// `runs_outside`, each task also runs once more outside any span, so that the thread's busy time
// is not its outermost spans alone.
void record_busy_thread(const Config& config, int spans, bool runs_outside) {
  ASSERT_TRUE(start(config)) << last_error();
  for (int k = 0; k < spans; ++k) {
    const TaskId task = create_task(TaskKind::coroutine, "step");
    {
      CHRONICLE_SPAN("busy", "outer");
      const TaskRunScope running(task);
      CHRONICLE_SPAN("busy", "inner");  // the task's: the merge of the tying events begins it
    }
    if (runs_outside) {
      const TaskRunScope running_again(task);
    }
    resolve_task(task, TaskOutcome::ok);
  }
  stop();
}

// A lane's busy row is made only when it is not its outermost spans' row, and then once at its
// size, not grown by doubling and copied to fit: at 100 M events the rows thrown away took 0.7 GB
// of fresh pages (issue 45, item 8). Every array made here is put in a file of its own, which
// counts them.
TEST(ViewerBusy, ABusyRowIsMadeOnceAtItsSizeAndOnlyWhenItIsNotTheOutermostSpans) {
  for (const bool runs_outside : {false, true}) {
    SCOPED_TRACE(runs_outside ? "runs outside the spans" : "runs inside the spans");
    TemporaryDirectory directory;
    const Config config = test::test_config(directory);
    constexpr int kSpans = 20000;
    record_busy_thread(config, kSpans, runs_outside);
    const TimelineIndex index = TimelineIndex::build(reader::Trace(config.output));
    const viewer::Lane& built = index.lanes().at(0);
    EXPECT_EQ(built.busy_is_outermost, !runs_outside);
    EXPECT_EQ(built.busy_row().size(), static_cast<size_t>(runs_outside ? 2 * kSpans : kSpans));
    viewer::Lane lane = built;
    lane.busy = viewer::IntervalRow{};
    const viewer::SpillScope spill(directory.path(), 1);
    const uint64_t before = viewer::spill_stats().files;
    viewer::index_internal::index_busy_row(lane);
    EXPECT_EQ(viewer::spill_stats().refused, 0u) << viewer::spill_stats().last_problem;
    EXPECT_EQ(viewer::spill_stats().files - before, runs_outside ? 2u : 0u);  // its begins and ends, or none
    EXPECT_EQ(lane.busy_is_outermost, built.busy_is_outermost);
    EXPECT_TRUE(std::equal(lane.busy_row().begins.begin(), lane.busy_row().begins.end(),
                           built.busy_row().begins.begin(), built.busy_row().begins.end()));
    EXPECT_TRUE(std::equal(lane.busy_row().ends.begin(), lane.busy_row().ends.end(), built.busy_row().ends.begin(),
                           built.busy_row().ends.end()));
  }
}

// What a build makes of the tasks (their lines, names, runs, their spans in the merge, the lanes'
// rows of runs, the busy rows) is made once at its size, as the streams' passes make theirs: as many arrays for 10
// times the tasks. On 6471759 it was 190 against 246.
TEST(ViewerTasks, ATasksArraysAreMadeOnceAtTheirSize) {
  auto arrays_made = [](int tasks) {
    TemporaryDirectory directory;
    const Config config = test::test_config(directory);
    record_busy_thread(config, tasks, true);
    const viewer::SpillScope spill(directory.path(), 1);
    const uint64_t before = viewer::spill_stats().files;
    const TimelineIndex index = TimelineIndex::build(reader::Trace(config.output));
    EXPECT_EQ(index.task_lines().size(), static_cast<size_t>(tasks));
    EXPECT_EQ(viewer::spill_stats().refused, 0u) << viewer::spill_stats().last_problem;
    return viewer::spill_stats().files - before;
  };
  EXPECT_EQ(arrays_made(2000), arrays_made(20000));
}

// A root task that creates and awaits its children in turn, as a loop of co_awaits does: each
// child's critical path goes back through every child before it.
void record_chain_of_children(const Config& config, int children) {
  ASSERT_TRUE(start(config)) << last_error();
  const TaskId root = create_task(TaskKind::coroutine, "root");
  {
    TaskRunScope running(root);
    for (int k = 0; k < children; ++k) {
      const TaskId child = create_task(TaskKind::coroutine, "child");
      task_waits_for(root, child);
      TaskRunScope child_running(child);
      resolve_task(child, TaskOutcome::ok);
    }
  }
  resolve_task(root, TaskOutcome::ok);
  stop();
}

uint64_t directory_bytes(const std::string& directory) {
  uint64_t bytes = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(directory))
    if (entry.is_regular_file()) bytes += entry.file_size();
  return bytes;
}

TEST(ViewerHtml, APageStaysProportionalToTheTrace) {
  const viewer::Asset* page = viewer::find_asset("/index.html");
  const viewer::Asset* script = viewer::find_asset("/viewer.js");
  if (!page || !script) GTEST_SKIP() << "built without the viewer (CHRONICLE_BUILD_VIEWER=OFF)";
  TemporaryDirectory directory;
  const Config config = test::test_config(directory);
  constexpr int kChildren = 1000;
  record_chain_of_children(config, kChildren);
  reader::Trace trace(config.output);
  const TimelineIndex index = TimelineIndex::build(trace);
  ASSERT_EQ(index.task_lines().size(), size_t{kChildren} + 1);
  const std::string html = viewer::standalone_html(index, "chain");
  // The bound docs/viewer.md states: the viewer, and at most this many bytes per byte of trace.
  constexpr uint64_t kBytesPerTraceByte = 8;
  const uint64_t trace_bytes = directory_bytes(config.output);
  const uint64_t viewer_bytes = page->bytes.size() + script->bytes.size();
  EXPECT_LE(html.size(), viewer_bytes + kBytesPerTraceByte * trace_bytes)
      << "a page of " << html.size() << " bytes for a trace of " << trace_bytes << " bytes";
  EXPECT_EQ(html.find("\"critical_path\""), std::string::npos) << "paths are worked out in the page";
}

// --- several processes ------------------------------------------------------------------------

// The echo example as a server process and a client process on 127.0.0.1, each recorded alone,
// then merged into `directory`/merged. The client starts once the server says its port.
std::string record_two_echo_processes_and_merge(const TemporaryDirectory& directory) {
  const std::string server_out = directory / "server.out";
  const std::string merged = directory / "merged";
  const std::string script = directory / "two_processes.sh";
  std::ofstream(script) << kCli << " record -q -o " << (directory / "server") << " -- " << kEcho << " --server 0 2 > "
                        << server_out << " &\n"
                        << "server=$!\n"
                        << "for i in $(seq 1200); do grep -q 'listening on port' " << server_out
                        << " && break; sleep 0.05; done\n"
                        << "port=$(sed -n 's/.*listening on port \\([0-9]*\\).*/\\1/p' " << server_out << ")\n"
                        << kCli << " record -q -o " << (directory / "client") << " -- " << kEcho
                        << " --client 127.0.0.1 $port 2 5 || exit 1\n"
                        << "wait $server || exit 2\n"
                        << kCli << " merge " << (directory / "client") << " " << (directory / "server") << " -o "
                        << merged << "\n";
  const auto result = run("sh " + script);
  EXPECT_EQ(result.exit_code, 0) << result.err << result.out;
  return merged;
}

std::vector<reader::Trace> open_all(const std::string& directory) {
  std::vector<reader::Trace> traces;
  for (const std::string& trace : reader::find_traces(directory)) traces.emplace_back(trace);
  return traces;
}

std::string group_of(const reader::Trace& trace) {
  const auto& description = trace.description();
  return description.hostname + " · " + description.process_name + " (pid " + std::to_string(description.pid) + ")";
}

// The two echo processes, recorded and merged once for the tests of a run, their traces open
// (in find_traces order) and indexed together.
class ViewerProcesses : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = new TemporaryDirectory;
    merged_ = new std::string(record_two_echo_processes_and_merge(*directory_));
    traces_ = new std::vector<reader::Trace>(open_all(*merged_));
    if (traces_->size() == 2) index_ = new TimelineIndex(TimelineIndex::build(*traces_));
  }
  static void TearDownTestSuite() {
    delete index_;
    delete traces_;
    delete merged_;
    delete directory_;
    index_ = nullptr;
  }
  void SetUp() override {
    ASSERT_EQ(traces_->size(), 2u) << "the merged directory holds the client's and the server's traces";
    ASSERT_NE(index_, nullptr);
  }

  static const TemporaryDirectory& directory() { return *directory_; }
  static const std::string& merged() { return *merged_; }
  static const std::vector<reader::Trace>& traces() { return *traces_; }
  static const TimelineIndex& index() { return *index_; }

 private:
  static TemporaryDirectory* directory_;
  static std::string* merged_;
  static std::vector<reader::Trace>* traces_;
  static TimelineIndex* index_;
};

TemporaryDirectory* ViewerProcesses::directory_ = nullptr;
std::string* ViewerProcesses::merged_ = nullptr;
std::vector<reader::Trace>* ViewerProcesses::traces_ = nullptr;
TimelineIndex* ViewerProcesses::index_ = nullptr;

TEST_F(ViewerProcesses, TheLanesOfEachProcessCarryItsGroupAndEveryMessageIsAnArrowBetweenThem) {
  const std::vector<reader::Trace>& traces = ViewerProcesses::traces();
  const TimelineIndex& index = ViewerProcesses::index();
  // Each trace's streams, in order, under its process's group.
  size_t lane = 0;
  std::vector<std::pair<size_t, size_t>> lanes_of_trace;
  for (const reader::Trace& trace : traces) {
    const size_t first = lane;
    for (size_t stream = 0; stream < trace.streams().size(); ++stream, ++lane) {
      ASSERT_LT(lane, index.lanes().size());
      EXPECT_EQ(index.lanes()[lane].group, group_of(trace));
      EXPECT_EQ(index.lanes()[lane].thread_id, trace.streams()[stream].thread_id);
    }
    lanes_of_trace.push_back({first, lane});
  }
  EXPECT_EQ(lane, index.lanes().size());
  EXPECT_NE(group_of(traces[0]), group_of(traces[1]));

  const auto pairs = merge::find_message_pairs(traces);
  ASSERT_FALSE(pairs.empty()) << "the client and the server exchange traced messages";
  ASSERT_EQ(index.messages().size(), pairs.size());
  auto trace_of_lane = [&](uint32_t lane_number) {
    return lane_number < lanes_of_trace[1].first ? size_t{0} : size_t{1};
  };
  std::multiset<std::pair<size_t, int64_t>> sends_expected;
  std::multiset<std::pair<size_t, int64_t>> sends_drawn;
  for (const merge::MessagePair& pair : pairs)
    sends_expected.insert({pair.sender, pair.send_ns - index.origin_unix_ns()});
  for (const viewer::MessageArrow& message : index.messages()) {
    EXPECT_NE(trace_of_lane(message.from_lane), trace_of_lane(message.to_lane));
    sends_drawn.insert({trace_of_lane(message.from_lane), static_cast<int64_t>(message.from_time)});
  }
  EXPECT_EQ(sends_drawn, sends_expected);
  // The whole trace in one window shows every message (merged where they share pixels).
  const viewer::Window all = index.window(0, index.duration(), 100'000);
  uint64_t shown = 0;
  for (const viewer::MessageInView& message : all.messages) shown += message.merged;
  EXPECT_EQ(shown, pairs.size());
  // Times of both processes on one timeline: every span lies within it.
  for (const viewer::Lane& each : index.lanes())
    for (const viewer::IntervalRow& row : each.depths)
      if (row.size() > 0) {
        EXPECT_LE(row.ends.back(), index.duration());
      }
}

// What `chronicle view` serves for a merged directory: every process, not just the first trace.
TEST_F(ViewerProcesses, ViewOfAMergedDirectoryShowsEveryProcessAndItsMessages) {
  TemporaryDirectory directory;
  const std::string page = directory / "page.html";
  const auto result = run(kCli + " view " + merged() + " --html " + page);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::ifstream in(page);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string opening = "window.CHRONICLE_DATA = ";
  const size_t begin = html.find(opening);
  ASSERT_NE(begin, std::string::npos);
  const size_t end = html.find(";</script>", begin);
  ASSERT_NE(end, std::string::npos);
  const auto data = nlohmann::json::parse(html.substr(begin + opening.size(), end - begin - opening.size()));
  const std::vector<reader::Trace>& traces = ViewerProcesses::traces();
  std::set<std::string> groups;
  for (const auto& lane : data["summary"]["lanes"]) groups.insert(lane.value("group", ""));
  EXPECT_EQ(groups, (std::set<std::string>{group_of(traces[0]), group_of(traces[1])}));
  size_t streams = 0;
  for (const reader::Trace& trace : traces) streams += trace.streams().size();
  EXPECT_EQ(data["summary"]["lanes"].size(), streams);
  EXPECT_EQ(data.value("messages", nlohmann::json::array()).size(), merge::find_message_pairs(traces).size());
  // The summary counts them by the lanes they join (the page orders the processes by them),
  // each lane pair once, every message in one of them.
  uint64_t counted = 0;
  std::set<std::pair<uint32_t, uint32_t>> pairs;
  for (const auto& [from, to, count] :
       data["summary"]["message_lanes"].get<std::vector<std::tuple<uint32_t, uint32_t, uint64_t>>>()) {
    EXPECT_NE(data["summary"]["lanes"][from]["group"], data["summary"]["lanes"][to]["group"]) << "between processes";
    EXPECT_TRUE(pairs.insert({from, to}).second);
    counted += count;
  }
  EXPECT_EQ(counted, merge::find_message_pairs(traces).size());
}

// Every process's tasks are the viewer's: in the index with the model's counts, and no warning
// that some are left out.
TEST_F(ViewerProcesses, TheTasksOfEveryProcessAreIndexed) {
  const std::vector<reader::Trace>& traces = ViewerProcesses::traces();
  const TimelineIndex& index = ViewerProcesses::index();
  std::vector<model::TaskGraph> graphs;
  size_t tasks = 0;
  for (const reader::Trace& trace : traces) {
    graphs.push_back(model::build_task_graph(trace));
    ASSERT_FALSE(graphs.back().tasks().empty()) << "the client and the server both make tasks";
    tasks += graphs.back().tasks().size();
  }
  EXPECT_EQ(index.task_lines().size(), tasks);
  EXPECT_EQ(index.task_row_count(), tasks);
  for (const std::string& warning : index.warnings()) EXPECT_EQ(warning.find("tasks are not shown"), std::string::npos);
}

// A task of the second process as the API details it: its process, its id and times from its
// own trace's clock, its parent and threads among its own process's.
TEST_F(ViewerProcesses, TheDetailsOfASecondProcessTaskAreItsOwn) {
  const std::vector<reader::Trace>& traces = ViewerProcesses::traces();
  const TimelineIndex& index = ViewerProcesses::index();
  ASSERT_EQ(index.task_processes().size(), 2u);
  const model::TaskGraph second = model::build_task_graph(traces[1]);
  const uint32_t first_task = index.task_processes()[1].first_task;
  EXPECT_EQ(first_task, model::build_task_graph(traces[0]).tasks().size());
  EXPECT_EQ(index.task_processes()[1].group, group_of(traces[1]));
  size_t checked = 0;
  for (uint32_t k = 0; k < second.tasks().size(); ++k) {
    const model::Task& task = second.tasks()[k];
    ASSERT_EQ(index.process_of_task(first_task + k), 1u);
    ASSERT_EQ(index.task(first_task + k).id, task.id);
    if (task.parent == 0 || task.runs.empty() || !task.created) continue;
    const auto details = viewer::task_details_json(index, first_task + k);
    EXPECT_EQ(details["process"], 1);
    EXPECT_EQ(details["group"], group_of(traces[1]));
    EXPECT_EQ(details["id"], model::task_id_text(task.id));
    EXPECT_EQ(details["name"], task.name);
    // Times from the second trace's own clock, on the timeline of both.
    auto on_timeline = [&](uint64_t ticks) { return traces[1].to_unix_ns(ticks) - index.origin_unix_ns(); };
    EXPECT_NEAR(details["created"].get<double>(), static_cast<double>(on_timeline(*task.created)), 1000.0);
    ASSERT_EQ(details["runs"].size(), task.runs.size());
    EXPECT_NEAR(details["runs"][0]["begin"].get<double>(), static_cast<double>(on_timeline(task.runs[0].begin)),
                1000.0);
    const std::string thread = details["runs"][0]["thread"];
    EXPECT_EQ(thread,
              traces[1].thread_name(task.runs[0].thread_id) + " (" + std::to_string(task.runs[0].thread_id) + ")");
    ASSERT_FALSE(details["parent"].is_null());
    EXPECT_EQ(details["parent"]["process"], 1);
    EXPECT_EQ(details["parent"]["index"], *index.task_index(1, task.parent));
    EXPECT_EQ(details["parent"]["id"], model::task_id_text(task.parent));
    ++checked;
  }
  EXPECT_GT(checked, 0u) << "the second process has tasks made by tasks, with runs";
  // Search finds the second process's tasks too, by their index.
  std::set<size_t> processes_found;
  const auto search = viewer::search_json(index, "async_receive", 1000);
  for (const auto& hit : search["hits"])
    if (hit["kind"] == "task") processes_found.insert(hit["process"].get<size_t>());
  EXPECT_EQ(processes_found, (std::set<size_t>{0, 1}));
  // Each process's tasks are a run of rows in tree order, the second's after the first's.
  for (uint32_t k = 0; k < index.task_lines().size(); ++k)
    EXPECT_EQ(index.task_lines()[k].row >= first_task, k >= first_task) << "task " << k;
  const auto window = viewer::window_json(index, 0, index.duration(), 1000);
  EXPECT_EQ(window["tasks"]["process_rows"], (nlohmann::json{0, first_task}));
}

// The critical path of the client's last read, as `chronicle stats --critical-path` walks it:
// through the server process's tasks, back and forth along the messages.
TEST_F(ViewerProcesses, TheCriticalPathOfAClientReadCrossesIntoTheServer) {
  const std::vector<reader::Trace>& traces = ViewerProcesses::traces();
  const TimelineIndex& index = ViewerProcesses::index();
  const int32_t client_pid = reader::Trace(directory() / "client").description().pid;
  const size_t client = traces[0].description().pid == client_pid ? 0 : 1;
  ASSERT_EQ(traces[client].description().pid, client_pid);
  std::vector<model::TaskGraph> graphs;
  for (const reader::Trace& trace : traces) graphs.push_back(model::build_task_graph(trace));
  const model::Task* last_read = nullptr;
  for (const model::Task& task : graphs[client].tasks())
    if (task.name == "socket.async_receive in async_read_until" && task.resolved &&
        task.outcome == format::TaskOutcome::ok && (!last_read || *task.resolved > *last_read->resolved))
      last_read = &task;
  ASSERT_NE(last_read, nullptr);
  const uint32_t target = *index.task_index(client, last_read->id);

  std::vector<analysis::ProcessGraph> processes;
  for (size_t k = 0; k < traces.size(); ++k) processes.push_back({&traces[k], &graphs[k]});
  const auto expected =
      analysis::critical_path(processes, analysis::MessageArrivals::find(processes), client, last_read->id);
  const std::vector<viewer::CriticalStep> steps = index.critical_path(target);
  ASSERT_EQ(steps.size(), expected.steps.size());
  std::set<size_t> processes_on_path;
  for (size_t k = 0; k < steps.size(); ++k) {
    EXPECT_EQ(steps[k].task, *index.task_index(expected.steps[k].process, expected.steps[k].task)) << "step " << k;
    EXPECT_EQ(steps[k].what, expected.steps[k].what);
    processes_on_path.insert(index.process_of_task(steps[k].task));
  }
  EXPECT_EQ(processes_on_path, (std::set<size_t>{0, 1})) << "the path goes through the server's tasks";
  // The API lists the steps with their processes.
  std::set<size_t> listed;
  const auto details = viewer::task_details_json(index, target);
  for (const auto& step : details["critical_path"]["steps"]) listed.insert(step["process"].get<size_t>());
  EXPECT_EQ(listed, (std::set<size_t>{0, 1}));

  // Read from the index cache, the same path, without reading the task graphs whole.
  viewer::open_index(merged());
  const viewer::OpenedIndex read = viewer::open_index(merged());
  ASSERT_TRUE(read.from_cache);
  EXPECT_EQ(viewer::task_details_json(read.index, target), details);
  EXPECT_FALSE(read.index.graphs_held());
}

// A trace recorded with context switches: a lane's foot shows when its thread was off its CPU,
// and the range stats add it up. A thread that sleeps ten times 5 ms is blocked at least 50 ms.
TEST(ViewerOffCpu, ALaneShowsWhenItsThreadSleptAsBlocked) {
  SKIP_WITHOUT_PERF_EVENTS();
  TemporaryDirectory directory;
  Config config = test::test_config(directory);
  config.context_switches = true;
  ASSERT_TRUE(start(config)) << last_error();
  std::thread sleeper([] {
    set_thread_name("sleeper");
    for (int k = 0; k < 10; ++k) {
      CHRONICLE_INSTANT("v", "tick");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  sleeper.join();
  stop();
  reader::Trace trace(config.output);
  const TimelineIndex index = TimelineIndex::build(trace);
  std::optional<uint32_t> lane;
  for (uint32_t k = 0; k < index.lanes().size(); ++k)
    if (index.lanes()[k].name == "sleeper") lane = k;
  ASSERT_TRUE(lane);
  const viewer::RangeStats stats = index.range_stats(0, index.duration());
  EXPECT_GE(stats.lanes[*lane].blocked_ns, 50'000'000u);
  const nlohmann::json window = window_json(index, 0, index.duration(), 100'000);
  size_t blocked = 0;
  for (const auto& answer : window["lanes"])
    if (answer["lane"] == *lane)
      for (const auto& stretch : answer["off_cpu"]) blocked += stretch[3] == 2 ? 1 : 0;
  EXPECT_GE(blocked, 10u) << "each sleep, apart at this width";
}

// The index's bytes, as the cache keeps them, built with the streams read apart (stream_pass.hpp)
// or in one merged pass (CHRONICLE_VIEW_ONE_PASS=1); `apart` says which the build did.
std::string index_bytes(const std::string& trace_directory, bool one_pass, bool& apart) {
  if (one_pass) setenv("CHRONICLE_VIEW_ONE_PASS", "1", 1);
  const reader::Trace trace(trace_directory);
  const TimelineIndex index = TimelineIndex::build(trace);
  unsetenv("CHRONICLE_VIEW_ONE_PASS");
  apart = index.streams_read_apart();
  const TemporaryDirectory directory;
  viewer::IndexCache::save(index, directory / "index", "identity");
  std::ifstream file(directory / "index", std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

void expect_the_one_merged_passs_index(const std::string& trace_directory, bool apart_expected) {
  bool apart = false, merged_apart = true;
  const std::string read_apart = index_bytes(trace_directory, false, apart);
  const std::string merged = index_bytes(trace_directory, true, merged_apart);
  EXPECT_EQ(apart, apart_expected);
  EXPECT_FALSE(merged_apart);
  ASSERT_EQ(read_apart.size(), merged.size());
  const auto differ = std::mismatch(read_apart.begin(), read_apart.end(), merged.begin());
  EXPECT_TRUE(differ.first == read_apart.end())
      << "the indexes differ from byte " << (differ.first - read_apart.begin());
}

// Spans of a task that moves between threads around the thread's own spans, a run inside a run,
// attributes of both kinds of span, an end that pairs with nothing, and spans that the trace's
// end cuts: what the two halves of an index read apart must put together in the merged order.
void record_spans_across_threads(const Config& config) {
  ASSERT_TRUE(start(config)) << last_error();
  const TaskId job = create_task(TaskKind::coroutine, "job");
  std::thread first([job] {
    CHRONICLE_SPAN("apart", "outer");
    CHRONICLE_SPAN_ATTRIBUTE("apart", "thread", 1);
    const TaskRunScope run(job);
    CHRONICLE_SPAN_BEGIN("apart", "moving");
    CHRONICLE_SPAN_ATTRIBUTE("apart", "task", 1);
    CHRONICLE_INSTANT("apart", "mark");
  });
  first.join();
  std::thread second([job] {
    { CHRONICLE_SPAN("apart", "before"); }
    CHRONICLE_SPAN("apart", "around");
    const TaskRunScope run(job);
    {
      const TaskId inner = create_task(TaskKind::promise, "inner");
      const TaskRunScope nested(inner);
      CHRONICLE_SPAN("apart", "nested");
      resolve_task(inner, TaskOutcome::ok);
    }
    CHRONICLE_SPAN_END("apart", "moving");
    CHRONICLE_SPAN_END("apart", "nobody");
  });
  second.join();
  // Deeper than a whole span's link to its piece reaches (WholeSpans::kApart): kept apart.
  std::thread deep([] {
    constexpr int kDepth = 260;
    for (int depth = 0; depth < kDepth; ++depth) CHRONICLE_SPAN_BEGIN("apart", "deep");
    for (int depth = 0; depth < kDepth - 2; ++depth) CHRONICLE_SPAN_END("apart", "deep");
  });
  deep.join();
  resolve_task(job, TaskOutcome::failed, "no");
  CHRONICLE_SPAN_BEGIN("apart", "never ends");
  const TaskId late = create_task(TaskKind::coroutine, "late");
  {
    const TaskRunScope run(late);
    CHRONICLE_SPAN_BEGIN("apart", "cut in its task");
  }
  const TaskRunScope still(late);
  CHRONICLE_SPAN_BEGIN("apart", "cut in its run");
  stop();
}

// Read apart, the index is the one merged pass's, byte for byte: on the demo's threads and tasks,
// the echo example's handlers, many tasks, and spans that move between threads with their task.
// A stream's span begins are kept as steps (8 bytes a span) and read back as written, those whose
// step does not fit in the steps' 4-byte halves (the clock going back, a jump of 2^32 ticks or
// events) among them.
TEST(IndexApart, ASpansBeginsAreReadBackAsWritten) {
  const uint64_t far = uint64_t{1} << 32;
  const std::vector<std::pair<uint64_t, uint64_t>> begins{
      {1000, 5},
      {1000, 6},
      {999, 7},  // the clock went back
      {999 + far, 8},
      {far << 8, 9 + far},
      {(far << 8) + far - 2, 10 + far},  // the largest step that fits
      {std::numeric_limits<uint64_t>::max(), 11 + far},
      {3, 12 + far},
  };
  viewer::BeginKeys keys;
  keys.reserve(begins.size());
  for (const auto& [ticks, place] : begins) keys.push(ticks, place);
  ASSERT_EQ(keys.size(), begins.size());
  EXPECT_EQ(keys.capacity(), begins.size()) << "8 bytes a span, made once";
  viewer::BeginKeys::Reader reader(keys);
  for (const auto& begin : begins) EXPECT_EQ(reader.next(), begin);
}

TEST(IndexApart, TheIndexIsTheOneMergedPasssByteForByte) {
  TemporaryDirectory directory;
  for (const auto& [name, command] : std::vector<std::pair<std::string, std::string>>{
           {"demo", kDemo + " 120 3"}, {"echo", kEcho + " 3 400"}, {"many", kManyTasks + " 3000"}}) {
    SCOPED_TRACE(name);
    const auto result = run(kCli + " record -q -o " + (directory / name) + " -- " + command);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    expect_the_one_merged_passs_index(directory / name, true);
  }
  SCOPED_TRACE("spans across threads");
  const Config config = test::test_config(directory);
  record_spans_across_threads(config);
  expect_the_one_merged_passs_index(config.output, true);
}

// A stream's pass makes its arrays once at their size, counted by a first read of the stream,
// rather than by doubling, which made fresh pages present again at every step and left up to half
// of each array unused (issue 45, item 8: the peak of a first open at 100 M events was 7.3 GiB);
// and none for what is known otherwise (their lane, a running time that is their wall time, and
// the begin, end and site their one piece holds).
TEST(IndexApart, AStreamsPassMakesItsArraysOnceAtTheirSize) {
  TemporaryDirectory directory;
  const auto result = run(kCli + " record -q -o " + (directory / "demo") + " -- " + kDemo + " 120 3");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const reader::Trace trace(directory / "demo");
  const TimelineIndex clock;
  std::atomic<bool> apart = true;
  const std::vector<analysis::SeriesKind> counter_kinds;
  size_t spans = 0, pieces = 0;
  for (size_t stream = 0; stream < trace.streams().size(); ++stream) {
    SCOPED_TRACE(stream);
    viewer::Lane lane;
    viewer::index_internal::StreamPart part;
    viewer::index_internal::index_stream_alone(trace, clock, stream, counter_kinds, lane, part, apart, {});
    ASSERT_TRUE(apart);
    const size_t own = part.own_spans();
    spans += own;
    pieces += part.open.size();  // cut by the trace's end, still open here
    EXPECT_EQ(part.spans.parents.values().capacity(), own);
    EXPECT_EQ(part.begins.capacity(), own);
    // No column for what is known otherwise: every one of these spans' lane, its running time
    // (its wall time: one piece), its begin, end and site (its piece's, in the lane's rows).
    EXPECT_EQ(part.spans.begins.values().capacity(), 0u);
    EXPECT_EQ(part.spans.ends.values().capacity(), 0u);
    EXPECT_EQ(part.spans.sites.values().capacity(), 0u);
    EXPECT_EQ(part.spans.lanes.values().capacity(), 0u);
    EXPECT_EQ(part.spans.running.values().capacity(), 0u);
    for (size_t depth = 0; depth < lane.depths.size(); ++depth) {
      SCOPED_TRACE(depth);
      pieces += lane.depths[depth].size();
      // With room for the tasks' pieces the merge adds in place.
      const size_t with_merged = lane.depths[depth].size() + part.merged_pieces_at(depth);
      EXPECT_EQ(lane.depths[depth].begins.values().capacity(), with_merged);
      EXPECT_EQ(lane.depth_spans[depth].values().capacity(), with_merged);
      EXPECT_EQ(part.closed_at[depth].capacity(), lane.depths[depth].size());
    }
  }
  EXPECT_GT(spans, 1000u);
  EXPECT_EQ(pieces, spans);  // each of the threads' own spans in one piece
}

// The graph's edges are made once, at the bound the streams' passes counted (every creation,
// wait and resolution), not grown by doubling in fresh memory.
TEST(IndexApart, TheGraphsEdgesAreMadeOnceAtTheCountedBound) {
  TemporaryDirectory directory;
  const auto result = run(kCli + " record -q -o " + (directory / "demo") + " -- " + kDemo + " 120 3");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const reader::Trace trace(directory / "demo");
  size_t bound = 0;
  trace.for_each_event([&](const reader::Event& event) {
    using format::EventId;
    if (event.type == EventId::task_create || event.type == EventId::task_wait || event.type == EventId::task_resolve)
      ++bound;
    return true;
  });
  const TimelineIndex index = TimelineIndex::build(trace);
  ASSERT_TRUE(index.streams_read_apart());
  const auto& edges = index.graph().edges();
  EXPECT_GT(edges.size(), 300u);
  EXPECT_LE(edges.size(), bound);
  EXPECT_EQ(edges.capacity(), bound);
}

// A run that may end or mark a span its thread began before the run (an end of the same name)
// ties the thread to the task: that trace is indexed in one merged pass, and the same.
TEST(IndexApart, AThreadsSpanThatARunMayEndLeavesTheTraceToOneMergedPass) {
  TemporaryDirectory directory;
  const Config config = test::test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  CHRONICLE_SPAN_BEGIN("apart", "request");
  {
    const TaskId task = create_task(TaskKind::coroutine, "handler");
    const TaskRunScope run(task);
    CHRONICLE_SPAN_END("apart", "request");  // the thread's span, ended in the task's run
    resolve_task(task, TaskOutcome::ok);
  }
  stop();
  expect_the_one_merged_passs_index(config.output, false);
}

// Losses on the timeline (issue 45, item 6): the lane of the thread that lost events marks where,
// and the marks count every lost event, in the index, in what the page gets and after the index
// cache's round trip.
TEST(ViewerLosses, TheLaneOfTheThreadThatLostEventsMarksWhereAndCountsEachOne) {
  TemporaryDirectory directory;
  const auto writer = static_cast<uint32_t>(::gettid());
  const reader::Trace trace = test::record_with_no_collector(directory, [] {
    for (int i = 0; i < 50'000; ++i) CHRONICLE_COUNTER("lost", "n", i);
  });
  ASSERT_GT(trace.events_discarded(), 0u);
  const TimelineIndex index = TimelineIndex::build(trace);
  uint64_t marked = 0;
  for (const viewer::Lane& lane : index.lanes()) {
    for (size_t k = 0; k < lane.lost.size(); ++k) {
      EXPECT_LE(lane.lost.begins[k], lane.lost.ends[k]);
      EXPECT_EQ(lane.thread_id, writer) << "only the writing thread lost events";
      marked += lane.lost.items[k];
    }
  }
  EXPECT_EQ(marked, trace.events_discarded());
  const auto lost_in = [](const nlohmann::json& summary) {
    uint64_t total = 0;
    for (const auto& lane : summary["lanes"])
      for (const auto& mark : lane["lost"]) total += mark[2].get<uint64_t>();
    return total;
  };
  EXPECT_EQ(lost_in(viewer::summary_json(index, "t")), trace.events_discarded());
  const auto first = viewer::open_index(directory / "trace");
  const auto cached = viewer::open_index(directory / "trace");
  ASSERT_TRUE(cached.from_cache) << cached.cache_problem;
  EXPECT_EQ(viewer::summary_json(cached.index, "t"), viewer::summary_json(index, "t"));
}

}  // namespace
}  // namespace chronicle
