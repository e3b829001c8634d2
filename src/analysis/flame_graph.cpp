#include "analysis/flame_graph.hpp"

#include <algorithm>
#include <stdexcept>

namespace chronicle::analysis {

FlameGraph::FlameGraph(uint64_t begin, uint64_t end) : begin_(begin), end_(std::max(begin, end)) {
  frames_.push_back(FlameFrame{});
}

uint32_t FlameGraph::child_of(uint32_t parent, uint32_t name) {
  const uint64_t key = (static_cast<uint64_t>(parent) << 32) | name;
  const auto [found, inserted] = children_.try_emplace(key, static_cast<uint32_t>(frames_.size()));
  if (inserted) {
    FlameFrame frame;
    frame.parent = parent;
    frame.name = name;
    frame.depth = frames_[parent].depth + 1;
    frames_.push_back(frame);
  }
  return found->second;
}

uint32_t FlameGraph::outer_frame() {
  if (outer_ == kNotMadeYet) outer_ = frame_apart(outer_name_);
  return outer_;
}

// Not through child_of: threads of one name are frames apart.
uint32_t FlameGraph::frame_apart(uint32_t thread_name) {
  FlameFrame frame;
  frame.parent = 0;
  frame.name = thread_name;
  frame.depth = 1;
  frames_.push_back(frame);
  return static_cast<uint32_t>(frames_.size() - 1);
}

// An outermost span's time is its outer frame's (the root, or a thread's under it) and the root's.
void FlameGraph::add_outermost_time(uint32_t outer, uint64_t time) {
  frames_[outer].total_ns += time;
  if (outer != 0) frames_[0].total_ns += time;
}

void FlameGraph::add_whole_spans(const WholeSpanList& spans, std::span<const uint32_t> which, const NameOf& name_of,
                                 const ThreadOf& thread_of) {
  WholeSpanAdder adder(*this, name_of, thread_of);
  for (const uint32_t k : which) adder.add(k, {spans.begins[k], spans.ends[k], spans.names[k], spans.parents[k]});
}

FlameGraph::WholeSpanAdder::WholeSpanAdder(FlameGraph& graph, const NameOf& name_of, const ThreadOf& thread_of)
    : graph_(graph), name_of_(name_of), thread_of_(thread_of) {}

void FlameGraph::WholeSpanAdder::add(uint32_t k, const WholeSpanEntry& span) {
  uint64_t from = std::max(span.begin, graph_.begin_);
  uint64_t to = std::min(span.end, graph_.end_);
  const uint32_t name = name_of_ ? name_of_(span.name) : span.name;
  if (!placed_.empty() && k <= placed_.back().span) throw std::invalid_argument("whole spans out of order");
  auto parent = placed_.end();
  if (span.parent != WholeSpanList::kNoParent) {
    parent = std::lower_bound(placed_.begin(), placed_.end(), span.parent,
                              [](const Placed& placed, uint32_t wanted) { return placed.span < wanted; });
    if (parent != placed_.end() && parent->span != span.parent) parent = placed_.end();
  }
  uint32_t frame = 0;
  if (parent != placed_.end()) {
    from = std::max(from, parent->from);
    to = std::min(to, parent->to);
    frame = graph_.child_of(parent->frame, name);
  } else {
    uint32_t outer = 0;
    if (thread_of_) {
      const uint32_t thread = thread_of_(k);
      const auto [found, added] = thread_frames_.try_emplace(thread, 0);
      if (added) found->second = graph_.frame_apart(thread);
      outer = found->second;
    }
    frame = graph_.child_of(outer, name);
    graph_.add_outermost_time(outer, to > from ? to - from : 0);
  }
  graph_.frames_[frame].total_ns += to > from ? to - from : 0;
  ++graph_.frames_[frame].count;
  placed_.push_back({k, frame, from, std::max(from, to)});
}

void FlameGraph::add_thread_apart(uint32_t thread_name, std::span<const SpanLevel> levels, const NameOf& name_of) {
  outer_ = kNotMadeYet;
  outer_name_ = thread_name;
  add_thread(levels, name_of);
  outer_ = 0;
}

void FlameGraph::add_thread(std::span<const SpanLevel> levels, const NameOf& name_of) {
  // The frame of each span of the depth above that overlaps the range, from `above_first` on:
  // a child overlapping the range lies in a parent that does, so this is all it can need.
  std::vector<uint32_t> above_frames;
  std::vector<uint32_t> frames;
  size_t above_first = 0;
  const SpanLevel* above = nullptr;
  for (const SpanLevel& level : levels) {
    size_t first = 0;
    add_level(level, above, above_first, above_frames, name_of, first, frames);
    above = &level;
    above_first = first;
    above_frames.swap(frames);
  }
}

void FlameGraph::add_level(const SpanLevel& level, const SpanLevel* above, size_t above_first,
                           const std::vector<uint32_t>& above_frames, const NameOf& name_of, size_t& first,
                           std::vector<uint32_t>& frames) {
  // Overlapping the range as range stats count it: ending at or after its begin, beginning at or
  // before its end.
  first = static_cast<size_t>(std::lower_bound(level.ends.begin(), level.ends.end(), begin_) - level.ends.begin());
  const size_t last = std::max(
      first,
      static_cast<size_t>(std::upper_bound(level.begins.begin(), level.begins.end(), end_) - level.begins.begin()));
  frames.clear();
  const size_t above_last = above_first + above_frames.size();
  size_t parent = above_first;
  for (size_t k = first; k < last; ++k) {
    uint64_t from = std::max(level.begins[k], begin_);
    uint64_t to = std::min(level.ends[k], end_);
    uint32_t parent_frame = kNotMadeYet;
    if (above) {
      // Both depths are sorted by begin: the parent only moves forward.
      while (parent + 1 < above_last && above->begins[parent + 1] <= level.begins[k]) ++parent;
      if (parent < above_last && above->begins[parent] <= level.begins[k] && level.begins[k] <= above->ends[parent]) {
        parent_frame = above_frames[parent - above_first];
        from = std::max(from, above->begins[parent]);
        to = std::min(to, above->ends[parent]);
      }
    }
    const bool outermost = parent_frame == kNotMadeYet;
    if (outermost) parent_frame = outer_frame();
    const uint32_t frame = child_of(parent_frame, name_of ? name_of(level.names[k]) : level.names[k]);
    const uint64_t time = to > from ? to - from : 0;
    frames_[frame].total_ns += time;
    ++frames_[frame].count;
    if (outermost) add_outermost_time(parent_frame, time);
    frames.push_back(frame);
  }
}

void FlameGraph::add_stack(std::span<const uint32_t> names, uint64_t weight_ns) {
  uint32_t frame = 0;
  frames_[0].total_ns += weight_ns;
  for (const uint32_t name : names) {
    frame = child_of(frame, name);
    frames_[frame].total_ns += weight_ns;
    ++frames_[frame].count;
  }
}

void FlameGraph::finish() {
  // Children are made after their parents: going backwards, a frame's children are all summed
  // before it is reached.
  std::vector<uint64_t> children_total(frames_.size(), 0);
  for (size_t k = frames_.size(); k-- > 1;) children_total[frames_[k].parent] += frames_[k].total_ns;
  for (size_t k = 0; k < frames_.size(); ++k)
    frames_[k].self_ns = frames_[k].total_ns - std::min(frames_[k].total_ns, children_total[k]);

  std::vector<std::vector<uint32_t>> children(frames_.size());
  for (uint32_t k = 1; k < frames_.size(); ++k) children[frames_[k].parent].push_back(k);
  for (auto& list : children)
    std::sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      return frames_[a].total_ns != frames_[b].total_ns ? frames_[a].total_ns > frames_[b].total_ns
                                                        : frames_[a].name < frames_[b].name;
    });
  std::vector<FlameFrame> ordered;
  ordered.reserve(frames_.size());
  std::vector<uint32_t> new_index(frames_.size(), 0);
  std::vector<uint32_t> pending{0};
  while (!pending.empty()) {
    const uint32_t frame = pending.back();
    pending.pop_back();
    new_index[frame] = static_cast<uint32_t>(ordered.size());
    ordered.push_back(frames_[frame]);
    if (frame != 0) ordered.back().parent = new_index[frames_[frame].parent];
    pending.insert(pending.end(), children[frame].rbegin(), children[frame].rend());
  }
  frames_ = std::move(ordered);
  children_.clear();
  for (uint32_t k = 1; k < frames_.size(); ++k)
    children_.emplace((static_cast<uint64_t>(frames_[k].parent) << 32) | frames_[k].name, k);
}

}  // namespace chronicle::analysis
