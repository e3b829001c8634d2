// A flame graph of the spans in a time range, merged by call path (the names from the outermost
// span down, over every thread), each frame's width its total time within the range (spans
// clipped to the range's edges), with its self time (its total less its children's) and how many
// spans were merged into it. Two modes (analysis/span_time.hpp defines the times):
// - running: the pieces of spans as they ran on threads, nested by each thread's stack
//   (add_thread): a task's span is a piece per run, suspension left out;
// - wall: whole spans (add_whole_spans), from begin to end, suspension included, each under the
//   span around it that it lies within: what `stats` counts.
//
// Spans are the first source; sampled call stacks (a later sampling profiler) go into the same
// frames through add_stack, each sample weighing the time it stands for.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

namespace chronicle::analysis {

struct FlameFrame {
  static constexpr uint32_t kNoParent = UINT32_MAX;
  static constexpr uint32_t kRootName = UINT32_MAX;
  uint32_t parent = kNoParent;  // frame index; only the root (frame 0) has none
  uint32_t name = kRootName;    // the caller's name id; the root, which holds everything, has none
  uint32_t depth = 0;           // the root is 0, outermost spans 1
  uint64_t total_ns = 0;        // within the range
  uint64_t self_ns = 0;         // total less the children's totals
  uint64_t count = 0;           // spans (or samples) merged into the frame
};

// One depth of one thread's spans: sorted by begin and never overlapping; each span of depth
// d + 1 lies within one of depth d (the stack nests). `names` are the caller's ids: names, or
// items (call sites) that add_thread maps to names.
struct SpanLevel {
  std::span<const uint64_t> begins;
  std::span<const uint64_t> ends;
  std::span<const uint32_t> names;
};

// Whole spans (wall time), by begin, each with the span around it (an index here, before it;
// viewer::WholeSpans says which) or kNoParent.
struct WholeSpanList {
  static constexpr uint32_t kNoParent = UINT32_MAX;
  std::span<const uint64_t> begins;
  std::span<const uint64_t> ends;
  std::span<const uint32_t> names;
  std::span<const uint32_t> parents;
};

// One of those spans, as a caller that keeps them otherwise reads it.
struct WholeSpanEntry {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint32_t name = 0;
  uint32_t parent = WholeSpanList::kNoParent;
};

class FlameGraph {
 public:
  // Times are ns; spans are clipped to [begin, end].
  FlameGraph(uint64_t begin, uint64_t end);

  // One thread's spans, outermost depth first. Every span that overlaps the range counts once
  // (as range stats count them), under the span of the depth above that holds its begin, with
  // its time clipped to the range and to that parent (so a self time is never negative); a span
  // whose begin no parent holds (a stack that did not nest) is taken as outermost.
  // `name_of` maps the levels' items to names (call sites of one name merge); none: they are names.
  using NameOf = std::function<uint32_t(uint32_t item)>;
  void add_thread(std::span<const SpanLevel> levels, const NameOf& name_of = {});
  // The same, under a frame of the thread's own named `thread_name` (a caller's name id), right
  // under the root: the flame graph split by thread, a root per thread holding what the flame
  // graph of that thread alone would. Each call makes a frame of its own, so two threads of one
  // name stay apart; a thread with no span in the range gets none.
  void add_thread_apart(uint32_t thread_name, std::span<const SpanLevel> levels, const NameOf& name_of = {});
  // The spans `which` (indexes into `spans`, ascending) whole: each under its parent's frame when
  // its parent is among them, else outermost: under the root, or (`thread_of` given) under a
  // frame of its own per thread name, as add_thread_apart makes. Times are clipped to the range
  // and to the parent, as add_thread clips them; each span counts once.
  using ThreadOf = std::function<uint32_t(uint32_t span)>;
  void add_whole_spans(const WholeSpanList& spans, std::span<const uint32_t> which, const NameOf& name_of = {},
                       const ThreadOf& thread_of = {});
  // The same, one span at a time (in order of index, each given its index), for a caller that
  // keeps them otherwise: the adder holds where each span went until it is destroyed.
  class WholeSpanAdder {
   public:
    WholeSpanAdder(FlameGraph& graph, const NameOf& name_of = {}, const ThreadOf& thread_of = {});
    void add(uint32_t k, const WholeSpanEntry& span);

   private:
    struct Placed {
      uint32_t span;
      uint32_t frame;
      uint64_t from, to;
    };
    FlameGraph& graph_;
    NameOf name_of_;  // copies: an adder made with the defaults outlives their temporaries
    ThreadOf thread_of_;
    // By span, ascending: a parent comes before its children. An array rather than a hash map: a
    // node per span made the whole trace's flame graph mostly malloc and free.
    std::vector<Placed> placed_;
    std::unordered_map<uint32_t, uint32_t> thread_frames_;
  };
  // A call stack (outermost name first) standing for `weight_ns`: its innermost frame gets the
  // time as its own, every frame on the path it as part of its total.
  void add_stack(std::span<const uint32_t> names, uint64_t weight_ns);

  // Computes self times and orders the frames depth-first, each frame's children by total time,
  // largest first (parents before children). Call once everything is added.
  void finish();

  const std::vector<FlameFrame>& frames() const { return frames_; }
  uint64_t begin() const { return begin_; }
  uint64_t end() const { return end_; }

 private:
  uint32_t child_of(uint32_t parent, uint32_t name);
  uint32_t outer_frame();
  uint32_t frame_apart(uint32_t thread_name);
  void add_outermost_time(uint32_t outer, uint64_t time);
  void add_level(const SpanLevel& level, const SpanLevel* above, size_t above_first,
                 const std::vector<uint32_t>& above_frames, const NameOf& name_of, size_t& first,
                 std::vector<uint32_t>& frames);

  uint64_t begin_;
  uint64_t end_;
  std::vector<FlameFrame> frames_;
  std::unordered_map<uint64_t, uint32_t> children_;  // (parent << 32 | name) -> frame
  // Where a thread's outermost spans go: the root, or (add_thread_apart) its own frame, made
  // when its first span is met.
  static constexpr uint32_t kNotMadeYet = UINT32_MAX;
  uint32_t outer_ = 0;
  uint32_t outer_name_ = FlameFrame::kRootName;
};

}  // namespace chronicle::analysis
