// The flame graph of a range (analysis/flame_graph.hpp) on spans laid out by hand, whose totals
// and self times are worked out below by hand: whole, clipped at the range's edges, merged
// across threads by call path, and robust to stacks that do not nest.
#include "analysis/flame_graph.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace chronicle::analysis {
namespace {

enum Name : uint32_t { kMain, kRead, kWork, kParse, kOther };

struct Span {
  uint64_t begin;
  uint64_t end;
  uint32_t name;
};

// One thread's spans, a vector per depth, kept alive while the graph reads them.
struct Thread {
  std::vector<std::vector<uint64_t>> begins, ends;
  std::vector<std::vector<uint32_t>> names;
  explicit Thread(const std::vector<std::vector<Span>>& depths) {
    for (const auto& depth : depths) {
      begins.emplace_back();
      ends.emplace_back();
      names.emplace_back();
      for (const Span& span : depth) {
        begins.back().push_back(span.begin);
        ends.back().push_back(span.end);
        names.back().push_back(span.name);
      }
    }
  }
  std::vector<SpanLevel> levels() const {
    std::vector<SpanLevel> out;
    for (size_t d = 0; d < begins.size(); ++d) out.push_back({begins[d], ends[d], names[d]});
    return out;
  }
};

// Thread A: main [0,100] holding read [10,30] (parse [12,20]) and work [40,90] (read [50,60],
// parse [70,80]). Thread B: main [20,60] holding read [25,35]; work [70,120] holding parse [75,95].
const Thread kThreadA({{{0, 100, kMain}},
                       {{10, 30, kRead}, {40, 90, kWork}},
                       {{12, 20, kParse}, {50, 60, kRead}, {70, 80, kParse}}});
const Thread kThreadB({{{20, 60, kMain}, {70, 120, kWork}}, {{25, 35, kRead}, {75, 95, kParse}}});

FlameGraph graph_of(uint64_t begin, uint64_t end, const std::vector<const Thread*>& threads) {
  FlameGraph graph(begin, end);
  for (const Thread* thread : threads) {
    const auto levels = thread->levels();
    graph.add_thread(levels);
  }
  graph.finish();
  return graph;
}

// The frame at a call path, by walking the finished graph's parents (not its lookup table).
const FlameFrame* frame_at(const FlameGraph& graph, const std::vector<uint32_t>& path) {
  const auto& frames = graph.frames();
  for (size_t k = 1; k < frames.size(); ++k) {
    std::vector<uint32_t> names;
    for (size_t f = k; f != 0; f = frames[f].parent) names.insert(names.begin(), frames[f].name);
    if (names == path) return &frames[k];
  }
  return nullptr;
}

struct Expected {
  std::vector<uint32_t> path;
  uint64_t total, self, count;
};

void expect_frames(const FlameGraph& graph, const std::vector<Expected>& expected) {
  ASSERT_EQ(graph.frames().size(), expected.size() + 1) << "one frame per call path, and the root";
  for (const Expected& e : expected) {
    const FlameFrame* frame = frame_at(graph, e.path);
    ASSERT_NE(frame, nullptr) << "path of " << e.path.size() << " names ending in " << e.path.back();
    EXPECT_EQ(frame->total_ns, e.total) << "path ending in " << e.path.back() << " at depth " << e.path.size();
    EXPECT_EQ(frame->self_ns, e.self) << "path ending in " << e.path.back() << " at depth " << e.path.size();
    EXPECT_EQ(frame->count, e.count) << "path ending in " << e.path.back() << " at depth " << e.path.size();
    EXPECT_EQ(frame->depth, e.path.size());
  }
}

TEST(FlameGraph, TheWholeTraceMergesCallPathsAcrossThreads) {
  const FlameGraph graph = graph_of(0, 200, {&kThreadA, &kThreadB});
  EXPECT_EQ(graph.frames()[0].total_ns, 190u) << "A's main 100, B's main 40 and work 50";
  EXPECT_EQ(graph.frames()[0].self_ns, 0u);
  expect_frames(graph, {
                           {{kMain}, 140, 140 - 30 - 50, 2},
                           {{kMain, kRead}, 20 + 10, 30 - 8, 2},
                           {{kMain, kRead, kParse}, 8, 8, 1},
                           {{kMain, kWork}, 50, 50 - 10 - 10, 1},
                           {{kMain, kWork, kRead}, 10, 10, 1},
                           {{kMain, kWork, kParse}, 10, 10, 1},
                           {{kWork}, 50, 50 - 20, 1},
                           {{kWork, kParse}, 20, 20, 1},
                       });
}

TEST(FlameGraph, SpansAreClippedAtTheRangeEdges) {
  // [15, 75]: A's main counts 60, read 15, work 35, its first parse 5, its read in work 10, its
  // second parse 5; B's main 40, read 10, work 5, and its parse, beginning at 75, counts once
  // for no time.
  const FlameGraph graph = graph_of(15, 75, {&kThreadA, &kThreadB});
  EXPECT_EQ(graph.frames()[0].total_ns, 60u + 40 + 5);
  expect_frames(graph, {
                           {{kMain}, 100, 100 - 25 - 35, 2},
                           {{kMain, kRead}, 25, 20, 2},
                           {{kMain, kRead, kParse}, 5, 5, 1},
                           {{kMain, kWork}, 35, 20, 1},
                           {{kMain, kWork, kRead}, 10, 10, 1},
                           {{kMain, kWork, kParse}, 5, 5, 1},
                           {{kWork}, 5, 5, 1},
                           {{kWork, kParse}, 0, 0, 1},
                       });
}

TEST(FlameGraph, ARangeWithoutSpansHasOnlyTheRoot) {
  const FlameGraph graph = graph_of(130, 500, {&kThreadA, &kThreadB});
  ASSERT_EQ(graph.frames().size(), 1u);
  EXPECT_EQ(graph.frames()[0].total_ns, 0u);
}

TEST(FlameGraph, FramesComeDepthFirstEachFramesChildrenLargestFirst) {
  const FlameGraph graph = graph_of(15, 75, {&kThreadA, &kThreadB});
  std::vector<std::vector<uint32_t>> order;
  for (size_t k = 1; k < graph.frames().size(); ++k) {
    std::vector<uint32_t> names;
    for (size_t f = k; f != 0; f = graph.frames()[f].parent) names.insert(names.begin(), graph.frames()[f].name);
    EXPECT_LT(graph.frames()[k].parent, k) << "a parent comes before its children";
    order.push_back(names);
  }
  const std::vector<std::vector<uint32_t>> expected = {
      {kMain}, {kMain, kWork}, {kMain, kWork, kRead}, {kMain, kWork, kParse}, {kMain, kRead}, {kMain, kRead, kParse},
      {kWork}, {kWork, kParse}};
  EXPECT_EQ(order, expected);
}

TEST(FlameGraph, AStackThatDoesNotNestNeverGivesANegativeSelfTime) {
  // y begins in x but ends after it: it counts only within x. z begins where nothing of depth 0
  // is: it is taken as outermost.
  const Thread thread({{{0, 10, kMain}}, {{5, 15, kRead}, {20, 30, kOther}}});
  const FlameGraph graph = graph_of(0, 100, {&thread});
  expect_frames(graph, {{{kMain}, 10, 5, 1}, {{kMain, kRead}, 5, 5, 1}, {{kOther}, 10, 10, 1}});
  EXPECT_EQ(graph.frames()[0].total_ns, 20u);
}

TEST(FlameGraph, CallSitesOfOneNameAreOneFrame) {
  // Items 10 and 11 are two call sites of "read", 12 one of "main".
  const Thread thread({{{0, 50, 12}, {60, 100, 12}}, {{10, 20, 10}, {70, 75, 11}}});
  FlameGraph graph(0, 100);
  const auto levels = thread.levels();
  graph.add_thread(levels, [](uint32_t item) { return item == 12 ? uint32_t{kMain} : uint32_t{kRead}; });
  graph.finish();
  expect_frames(graph, {{{kMain}, 90, 75, 2}, {{kMain, kRead}, 15, 15, 2}});
}

// Split by thread: a frame per thread under the root, named as the caller says (two threads of
// one name stay apart), each holding what the flame graph of that thread alone holds.
enum ThreadName : uint32_t { kThreadNameA = 100, kThreadNameB = 101 };

// The frames under `top` (the root, or a thread's frame) by call path below it: total, self, count.
std::map<std::vector<uint32_t>, std::tuple<uint64_t, uint64_t, uint64_t>> paths_under(const FlameGraph& graph,
                                                                                      size_t top) {
  std::map<std::vector<uint32_t>, std::tuple<uint64_t, uint64_t, uint64_t>> out;
  const auto& frames = graph.frames();
  for (size_t k = 1; k < frames.size(); ++k) {
    std::vector<uint32_t> names;
    size_t f = k;
    for (; f != top && f != 0; f = frames[f].parent) names.insert(names.begin(), frames[f].name);
    if (f == top && k != top) out[names] = {frames[k].total_ns, frames[k].self_ns, frames[k].count};
  }
  return out;
}

FlameGraph split_graph_of(uint64_t begin, uint64_t end,
                          const std::vector<std::pair<uint32_t, const Thread*>>& threads) {
  FlameGraph graph(begin, end);
  for (const auto& [name, thread] : threads) {
    const auto levels = thread->levels();
    graph.add_thread_apart(name, levels);
  }
  graph.finish();
  return graph;
}

TEST(FlameGraph, SplitByThreadEachThreadHasARootOfItsOwn) {
  for (const auto& [begin, end] : std::vector<std::pair<uint64_t, uint64_t>>{{0, 200}, {15, 75}, {65, 110}}) {
    SCOPED_TRACE(testing::Message() << "range [" << begin << ", " << end << "]");
    const FlameGraph split = split_graph_of(begin, end, {{kThreadNameA, &kThreadA}, {kThreadNameB, &kThreadB}});
    const auto& frames = split.frames();
    std::map<uint32_t, size_t> thread_frames;
    for (size_t k = 1; k < frames.size(); ++k)
      if (frames[k].parent == 0) thread_frames[frames[k].name] = k;
    ASSERT_EQ(thread_frames.size(), 2u) << "a frame per thread right under the root, nothing else";
    uint64_t threads_total = 0;
    for (const auto& [name, thread] : {std::pair{kThreadNameA, &kThreadA}, std::pair{kThreadNameB, &kThreadB}}) {
      const FlameGraph alone = graph_of(begin, end, {thread});
      const FlameFrame& frame = frames[thread_frames.at(name)];
      EXPECT_EQ(frame.depth, 1u);
      EXPECT_EQ(frame.total_ns, alone.frames()[0].total_ns) << "thread " << name << ": its spans' time";
      EXPECT_EQ(frame.self_ns, 0u);
      EXPECT_EQ(paths_under(split, thread_frames.at(name)), paths_under(alone, 0))
          << "thread " << name << ": the frames of its flame graph alone";
      threads_total += frame.total_ns;
    }
    EXPECT_EQ(frames[0].total_ns, threads_total) << "the root holds the threads' totals";
    EXPECT_EQ(frames[0].total_ns, graph_of(begin, end, {&kThreadA, &kThreadB}).frames()[0].total_ns);
  }
}

TEST(FlameGraph, SplitByThreadKeepsThreadsOfOneNameApartAndSkipsIdleOnes) {
  // Two threads named alike stay two frames; one without a span in the range gets none.
  const Thread idle({{{500, 600, kMain}}});
  const FlameGraph split =
      split_graph_of(0, 200, {{kThreadNameA, &kThreadA}, {kThreadNameA, &kThreadB}, {kThreadNameB, &idle}});
  std::vector<uint64_t> totals;
  for (const FlameFrame& frame : split.frames())
    if (frame.parent == 0) {
      EXPECT_EQ(frame.name, kThreadNameA);
      totals.push_back(frame.total_ns);
    }
  EXPECT_EQ(totals, (std::vector<uint64_t>{100, 90})) << "A's 100, then B's 90: largest first";
}

TEST(FlameGraph, SampledStacksGoIntoTheSameFrames) {
  FlameGraph graph(0, 100);
  const std::vector<uint32_t> deep = {kMain, kRead};
  const std::vector<uint32_t> shallow = {kMain};
  graph.add_stack(deep, 5);
  graph.add_stack(deep, 5);
  graph.add_stack(shallow, 3);
  graph.finish();
  EXPECT_EQ(graph.frames()[0].total_ns, 13u);
  expect_frames(graph, {{{kMain}, 13, 3, 3}, {{kMain, kRead}, 10, 10, 2}});
}

// Wall mode: whole spans, each under its parent. Two coroutines' "main" spans [0,100] and
// [20,150] overlap on one thread (each suspended while the other ran), with a read [10,30] and a
// parse [40,60] in the first, a work [30,140] in the second; a third main [160,170] with no parent
// given. Overlapping spans are no problem, as they would be for add_thread's levels.
TEST(FlameGraph, WholeSpansNestUnderTheirParentsWhateverOverlaps) {
  const std::vector<uint64_t> begins{0, 10, 20, 30, 40, 160};
  const std::vector<uint64_t> ends{100, 30, 150, 140, 60, 170};
  const std::vector<uint32_t> names{kMain, kRead, kMain, kWork, kParse, kMain};
  constexpr uint32_t kNone = WholeSpanList::kNoParent;
  const std::vector<uint32_t> parents{kNone, 0, kNone, 2, 0, kNone};
  const WholeSpanList spans{begins, ends, names, parents};
  const std::vector<uint32_t> all{0, 1, 2, 3, 4, 5};
  FlameGraph whole(0, 200);
  whole.add_whole_spans(spans, all);
  whole.finish();
  EXPECT_EQ(whole.frames()[0].total_ns, 100u + 130 + 10);
  expect_frames(whole, {
                           {{kMain}, 240, 240 - 20 - 20 - 110, 3},
                           {{kMain, kRead}, 20, 20, 1},
                           {{kMain, kParse}, 20, 20, 1},
                           {{kMain, kWork}, 110, 110, 1},
                       });
  // [50, 120], the spans in it (the read, which ends before it, and the last main left out):
  // clipped to it; split by thread, the outermost under a frame per thread name.
  FlameGraph clipped(50, 120);
  clipped.add_whole_spans(spans, std::vector<uint32_t>{0, 2, 3, 4}, {},
                          [](uint32_t span) { return span == 0 ? kOther : kOther + 1; });
  clipped.finish();
  EXPECT_EQ(clipped.frames()[0].total_ns, 50u + 70);
  expect_frames(clipped, {
                             {{kOther}, 50, 0, 0},
                             {{kOther, kMain}, 50, 40, 1},
                             {{kOther, kMain, kParse}, 10, 10, 1},
                             {{kOther + 1}, 70, 0, 0},
                             {{kOther + 1, kMain}, 70, 0, 1},
                             {{kOther + 1, kMain, kWork}, 70, 70, 1},
                         });
}

}  // namespace
}  // namespace chronicle::analysis
