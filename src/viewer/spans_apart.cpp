// The second half of indexing spans with the streams read apart (stream_pass.hpp says why the
// halves add up to the one merged pass): the events that tie the streams, merged in time order,
// feed the task graph and place the tasks' span pieces on their lanes; then both halves' spans
// and rows are put together in the merged pass's order.
#include <algorithm>
#include <optional>
#include <queue>
#include <span>
#include <stdexcept>
#include <unordered_map>

#include "viewer/spans_apart.hpp"
#include "viewer/timeline_index_internal.hpp"

namespace chronicle::viewer::index_internal {
namespace {

constexpr uint64_t kOpen = std::numeric_limits<uint64_t>::max();

// A piece the merge closed on a lane (a task's span's, at a depth above the thread's own spans),
// or one the trace's end cut.
struct ClosedPiece {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint32_t site = 0;
  uint32_t span = 0;  // in the merge's spans, or the lane's own when `own`
  uint32_t depth = 0;
  bool own = false;
  uint64_t closed_at = 0;  // the closing event's place in the stream; kOpen: the trace's end
};

struct LaneState {
  RunBase base;  // the thread's own spans under its current run (ids of all spans, see Ids)
  size_t next_base = 0;
  std::vector<OpenPiece> open;  // tasks' pieces, outermost first
  std::vector<ClosedPiece> closed;
};

// Spans are numbered first as the halves made them: stream 0's own, stream 1's, ..., then the
// merge's. `final` then gives each its place in the index, by begin.
struct Ids {
  std::vector<uint32_t> own_first;  // per stream, and the merge's first last
  std::vector<uint32_t> final;
  uint32_t of_own(size_t stream, uint32_t local) const { return final[own_first[stream] + local]; }
  uint32_t of_merged(uint32_t local) const { return final[own_first.back() + local]; }
};

class SpansApart {
 public:
  SpansApart(const reader::Trace& trace, const TimelineIndex& clock, std::vector<StreamPart>& parts,
             std::vector<Lane>& lanes, WholeSpans& whole)
      : trace_(trace), clock_(clock), parts_(parts), lanes_(lanes), whole_(whole), states_(lanes.size()) {
    ids_.own_first.assign(1, 0);
    size_t task_spans = 0;
    for (const StreamPart& part : parts_) {
      ids_.own_first.push_back(ids_.own_first.back() + static_cast<uint32_t>(part.own_spans()));
      for (const uint64_t pieces : part.merged_pieces_by_depth) task_spans += pieces;
    }
    reserve_merged(task_spans);
  }

  ApartResult run(model::TaskGraphFeed& feed, IndexSteps& steps,
                  const std::function<void(TyingEventsMerged)>& tying_events_merged) {
    std::vector<reader::Trace::EventRanges> ranges;
    uint64_t last_ticks = 0;
    for (StreamPart& part : parts_) {
      ranges.push_back(std::move(part.merged));
      feed.add_times(part.first_ticks, part.last_ticks);
      last_ticks = std::max(last_ticks, part.last_ticks);
    }
    reader::SpanPairing pairing(trace_, reader::SpanPairing::Identities::left_out_unless_traced);
    std::optional<uint32_t> first_unmatched_stream;
    trace_.for_each_event_in(pairing, ranges, [&](const reader::Event& event, uint64_t place) {
      feed.add(event, pairing);
      follow(event, place, pairing);
      if (!first_unmatched_stream && pairing.problems().unmatched_ends > 0) first_unmatched_stream = event.stream;
      return true;
    });
    feed.close();  // the graph's thread goes on beside the spans put together here
    steps.done("tying events merged");
    const uint64_t last = clock_.to_ns(last_ticks);
    tying_events_merged({.last = last, .task_attribute_texts = task_attribute_texts_of(pairing)});
    close_at_end(last);
    merge_spans(last);
    steps.done("spans put in order");
    fill_rows();
    steps.done("rows put together");
    link_pieces(last);
    steps.done("spans linked to their pieces");
    ApartResult result;
    result.last = last;
    result.problems = problems(pairing, first_unmatched_stream);
    return result;
  }

 private:
  // The merge's columns made once at the count of spans begun in task runs, not grown by doubling.
  void reserve_merged(size_t task_spans) {
    for (Column<uint64_t>* column : {&merged_.begins, &merged_.ends, &merged_.running}) column->reserve(task_spans);
    for (Column<uint32_t>* column : {&merged_.sites, &merged_.lanes}) column->reserve(task_spans);
    merged_keys_.reserve(task_spans);
    merged_parents_.reserve(task_spans);
  }

  // The merged pass's span handling (IndexBuilder::index_spans), for the tasks' spans only.
  void follow(const reader::Event& event, uint64_t place, const reader::SpanPairing& pairing) {
    LaneState& lane = states_[event.stream];
    switch (event.type) {
      case format::EventId::span_begin: {
        const reader::PairedSpan& span = *event.span;
        const auto local = static_cast<uint32_t>(merged_.size());
        const uint64_t begin = clock_.to_ns(event.ticks);
        // Around it: its owner's span, else (a task's outermost) the span its thread was in then.
        const auto parent = merged_of_sequence_.find(span.parent_sequence);
        merged_parents_.push_back(parent != merged_of_sequence_.end() ? Parent{parent->second, true}
                                  : !lane.open.empty()                ? Parent{lane.open.back().span, true}
                                                                      : Parent{lane.base.innermost, false});
        lane.open.push_back({begin, span.site_id, local, span.sequence, span.task});
        merged_of_sequence_[span.sequence] = local;
        merged_.begins.push_back(begin);
        merged_.ends.push_back(kOpen);
        merged_.running.push_back(0);
        merged_.sites.push_back(span.site_id);
        merged_.lanes.push_back(event.stream);
        merged_keys_.push_back({event.ticks, event.stream, place});
        break;
      }
      case format::EventId::span_end:
        if (!event.span) break;
        if (const auto found = merged_of_sequence_.find(event.span->sequence); found != merged_of_sequence_.end()) {
          merged_.ends[found->second] = clock_.to_ns(event.ticks);
          add_attribute_texts(merged_, found->second, *event.span);
          merged_of_sequence_.erase(found);
        }
        for (size_t depth = lane.open.size(); depth-- > 0;)
          if (lane.open[depth].sequence == event.span->sequence) {
            close(lane, depth, clock_.to_ns(event.ticks), place);
            break;
          }
        break;
      case format::EventId::task_run_begin: {
        const StreamPart& part = parts_[event.stream];
        if (lane.next_base < part.run_bases.size()) lane.base = part.run_bases[lane.next_base++];
        if (const auto* spans = pairing.open_in_task(event.task))
          for (const reader::PairedSpan& span : *spans)
            lane.open.push_back({clock_.to_ns(event.ticks), span.site_id, merged_of_sequence_.at(span.sequence),
                                 span.sequence, span.task});
        break;
      }
      case format::EventId::task_run_end:
        // The task's spans go on in its next run, wherever that is.
        for (size_t depth = lane.open.size(); depth-- > 0;)
          if (lane.open[depth].task == event.task) close(lane, depth, clock_.to_ns(event.ticks), place);
        break;
      default:
        break;
    }
  }

  void close(LaneState& lane, size_t depth, uint64_t end, uint64_t place) {
    const OpenPiece& piece = lane.open[depth];
    lane.closed.push_back(
        {piece.begin, end, piece.site, piece.span, lane.base.depth + static_cast<uint32_t>(depth), false, place});
    merged_.running[piece.span] += end > piece.begin ? end - piece.begin : 0;
    lane.open.erase(lane.open.begin() + static_cast<std::ptrdiff_t>(depth));
  }

  // Cut by the trace's end, innermost first: the tasks' pieces, then the thread's own.
  void close_at_end(uint64_t last) {
    for (size_t stream = 0; stream < lanes_.size(); ++stream) {
      LaneState& lane = states_[stream];
      while (!lane.open.empty()) close(lane, lane.open.size() - 1, last, kOpen);
      std::vector<OpenPiece>& own = parts_[stream].open;
      for (size_t depth = own.size(); depth-- > 0;) {
        const OpenPiece& piece = own[depth];
        lane.closed.push_back({piece.begin, last, piece.site, piece.span, static_cast<uint32_t>(depth), true, kOpen});
      }
      own.clear();
    }
  }

  // All spans in the merged pass's order of begins (by time, then stream, then place in the
  // stream): each stream's own and the merge's are each in that order already, and are merged.
  // Their places are found first; then their parents and lanes are put together one column at a
  // time, each list's copy let go once it is placed. Their begins, ends and sites are not put
  // together: most spans' are those of their one piece on a lane, which link_pieces finds once the
  // rows are whole (20 bytes a span, 0.7 GB at 100 M events).
  void merge_spans(uint64_t last) {
    place_spans();
    find_paused(last);
    // Before the lanes: a merged span's parent may be a span of its lane's own. (The merge's own
    // spans keep their parents apart, in merged_parents_.)
    whole_.parents = gather(&WholeSpans::parents, [this](uint32_t list, uint32_t k) { return parent_of(list, k); });
    whole_.lanes = gather(&WholeSpans::lanes, [this](uint32_t list, uint32_t k) {
      return list == parts_.size() ? merged_.lanes[k] : list;  // a stream's own spans are on its lane
    });
    take_attribute_texts();
  }

  // The spans whose running time is not their wall time, as WholeSpans::keep_paused_only keeps
  // them (`running` is never made whole, as the merged pass makes it: 8 bytes a span): a stream's
  // own span runs in one piece, from its begin to its end (its stream goes forward in time), so
  // only a task's span, whose pieces the merge summed, can be paused. The merge's spans are in
  // the order they began, so their places ascend.
  void find_paused(uint64_t last) {
    Column<uint32_t>::Built paused;
    Column<uint64_t>::Built paused_running;
    for (uint32_t k = 0; k < merged_.size(); ++k) {
      const WholeSpan span = merged_span(k, last);
      if (merged_.running[k] == span.end - span.begin) continue;
      paused.push_back(ids_.of_merged(k));
      paused_running.push_back(merged_.running[k]);
    }
    merged_.running = Column<uint64_t>::Built();
    whole_.running = Column<uint64_t>::Built();
    whole_.paused = std::move(paused);
    whole_.paused_running = std::move(paused_running);
  }

  // ids_.final: each span's place among all, by the merge order of their begins. The keys are let
  // go once read.
  void place_spans() {
    struct Head {
      MergeKey key;
      uint32_t list;  // a stream's own spans, or parts_.size(): the merge's
      uint32_t next;
    };
    auto later = [](const Head& a, const Head& b) { return b.key < a.key; };
    std::priority_queue<Head, std::vector<Head>, decltype(later)> heads(later);
    const auto merged_list = static_cast<uint32_t>(parts_.size());
    // A stream's keys are read once each, in order (BeginKeys): k is always its reader's next.
    std::vector<BeginKeys::Reader> readers;
    readers.reserve(parts_.size());
    for (const StreamPart& part : parts_) readers.emplace_back(part.begins);
    auto key_of = [&](uint32_t list, uint32_t k) -> MergeKey {
      if (list == merged_list) return merged_keys_[k];
      const auto [ticks, place] = readers[list].next();
      return {ticks, list, place};
    };
    for (uint32_t list = 0; list <= merged_list; ++list)
      if (count_of(list) > 0) heads.push({key_of(list, 0), list, 0});
    const size_t count = ids_.own_first.back() + merged_.size();
    ids_.final.assign(count, 0);
    uint32_t placed = 0;
    while (!heads.empty()) {
      Head head = heads.top();
      heads.pop();
      const size_t size = count_of(head.list);
      // A list's spans go on until one comes after another list's next (spans begin in runs).
      do {
        ids_.final[ids_.own_first[head.list] + head.next] = placed++;
        if (++head.next == size) break;
        head.key = key_of(head.list, head.next);
        if (!heads.empty() && heads.top().key < head.key) {
          heads.push(head);
          break;
        }
      } while (true);
    }
    for (StreamPart& part : parts_) part.begins.clear();
    std::vector<MergeKey>().swap(merged_keys_);
  }

  WholeSpans& spans_of(uint32_t list) { return list == parts_.size() ? merged_ : parts_[list].spans; }
  // A list's spans (a stream's own keep no lanes, which WholeSpans::size counts).
  size_t count_of(uint32_t list) const { return list == parts_.size() ? merged_.size() : parts_[list].own_spans(); }

  // One column of all spans at their places, each span's value as `value(list, k)` gives it; each
  // stream's `column` is let go once placed.
  template <class T, class Value>
  Column<T> gather(Column<T> WholeSpans::*column, Value value) {
    typename Column<T>::Built out(ids_.final.size());
    for (uint32_t list = 0; list <= parts_.size(); ++list) {
      const uint32_t first = ids_.own_first[list];
      const uint32_t last = list < parts_.size() ? ids_.own_first[list + 1] : static_cast<uint32_t>(ids_.final.size());
      for (uint32_t k = 0; k < last - first; ++k) out[ids_.final[first + k]] = value(list, k);
      if (list < parts_.size()) spans_of(list).*column = typename Column<T>::Built();
    }
    return Column<T>(std::move(out));
  }

  uint32_t parent_of(uint32_t list, uint32_t k) const {
    if (list < parts_.size()) {
      const uint32_t parent = parts_[list].spans.parents[k];
      return parent == WholeSpans::kNoParent ? WholeSpans::kNoParent : ids_.of_own(list, parent);
    }
    const Parent& parent = merged_parents_[k];
    return parent.span == WholeSpans::kNoParent ? WholeSpans::kNoParent
           : parent.merged                      ? ids_.of_merged(parent.span)
                                                : ids_.of_own(merged_.lanes[k], parent.span);
  }

  void take_attribute_texts() {
    for (size_t stream = 0; stream < parts_.size(); ++stream) {
      WholeSpans& own = parts_[stream].spans;
      for (size_t a = 0; a < own.attribute_spans.size(); ++a) {
        whole_.attribute_spans.push_back(ids_.of_own(stream, own.attribute_spans[a]));
        whole_.attribute_texts.add(own.attribute_texts[a]);
      }
      own = WholeSpans();
    }
    for (size_t a = 0; a < merged_.attribute_spans.size(); ++a) {
      whole_.attribute_spans.push_back(ids_.of_merged(merged_.attribute_spans[a]));
      whole_.attribute_texts.add(merged_.attribute_texts[a]);
    }
  }

  // Each lane's rows: its own pieces (in place, their spans renumbered), and those the merge closed
  // or the trace's end cut, merged in by the place of the event that closed them.
  void fill_rows() {
    for (size_t stream = 0; stream < lanes_.size(); ++stream) {
      Lane& lane = lanes_[stream];
      for (auto& spans : lane.depth_spans)
        for (uint32_t& span : spans) span = ids_.of_own(stream, span);
      std::vector<ClosedPiece>& closed = states_[stream].closed;
      for (ClosedPiece& piece : closed)
        piece.span = piece.own ? ids_.of_own(stream, piece.span) : ids_.of_merged(piece.span);
      // By depth, each depth's in the order they were closed.
      std::stable_sort(closed.begin(), closed.end(),
                       [](const ClosedPiece& a, const ClosedPiece& b) { return a.depth < b.depth; });
      for (size_t first = 0, end = 0; first < closed.size(); first = end) {
        while (end < closed.size() && closed[end].depth == closed[first].depth) ++end;
        merge_into_row(stream, {closed.data() + first, end - first});
      }
      lane.span_count += closed.size();
      std::vector<ClosedPiece>().swap(closed);
      std::vector<Column<uint64_t>::Built>().swap(parts_[stream].closed_at);
      for (IntervalRow& row : lane.depths) row.shrink_to_fit();
      for (Column<uint32_t>& column : lane.depth_spans) column.shrink_to_fit();
    }
  }

  void merge_into_row(size_t stream, std::span<const ClosedPiece> pieces) {
    Lane& lane = lanes_[stream];
    const uint32_t depth = pieces.front().depth;
    if (lane.depths.size() <= depth) {
      lane.depths.resize(depth + 1);
      lane.depth_spans.resize(depth + 1);
    }
    static const Column<uint64_t>::Built kNone;
    const Column<uint64_t>::Built& own_closed =
        depth < parts_[stream].closed_at.size() ? parts_[stream].closed_at[depth] : kNone;
    if (merge_in_place(lane.depths[depth], lane.depth_spans[depth], own_closed, pieces)) return;
    const IntervalRow& own = lane.depths[depth];
    const Column<uint32_t>& own_spans = lane.depth_spans[depth];
    IntervalRow row;
    Column<uint32_t> spans;
    const size_t count = own.size() + pieces.size();
    row.reserve(count);
    spans.reserve(count);
    size_t k = 0;
    for (const ClosedPiece& piece : pieces) {
      for (; k < own.size() && own_closed[k] < piece.closed_at; ++k) {
        row.add(own.begins[k], own.ends[k], own.items[k]);
        spans.push_back(own_spans[k]);
      }
      row.add(piece.begin, piece.end, piece.site);
      spans.push_back(piece.span);
    }
    for (; k < own.size(); ++k) {
      row.add(own.begins[k], own.ends[k], own.items[k]);
      spans.push_back(own_spans[k]);
    }
    lane.depths[depth] = std::move(row);
    lane.depth_spans[depth] = std::move(spans);
  }

  // The same merge in the row's own columns, from the back, when the stream's pass left room for
  // the pieces (StreamPart::merged_pieces_by_depth): no copy of the row. An own piece closed at
  // the same place as a merged one goes after it, as in the merge above.
  static bool merge_in_place(IntervalRow& row, Column<uint32_t>& spans, const Column<uint64_t>::Built& own_closed,
                             std::span<const ClosedPiece> pieces) {
    const size_t own = row.size();
    const size_t count = own + pieces.size();
    if (row.begins.values().capacity() < count || row.ends.values().capacity() < count ||
        row.items.values().capacity() < count || spans.values().capacity() < count)
      return false;
    for (Column<uint64_t>* column : {&row.begins, &row.ends}) column->resize(count);
    row.items.resize(count);
    spans.resize(count);
    size_t k = own;
    size_t p = pieces.size();
    for (size_t to = count; p > 0;) {
      --to;
      if (k > 0 && own_closed[k - 1] >= pieces[p - 1].closed_at) {
        --k;
        row.begins[to] = row.begins[k];
        row.ends[to] = row.ends[k];
        row.items[to] = row.items[k];
        spans[to] = spans[k];
      } else {
        const ClosedPiece& piece = pieces[--p];
        row.begins[to] = piece.begin;
        row.ends[to] = std::max(piece.begin, piece.end);
        row.items[to] = piece.site;
        spans[to] = piece.span;
      }
    }
    return true;
  }

  // Each span's link to its piece (WholeSpans::pieces), as WholeSpans::keep_apart_only finds it
  // in the finished rows, and the begins, ends and sites of the spans apart only: a stream's own
  // span is its one piece (apart only when deeper than a link reaches); a merged span is linked
  // to a piece that is the whole of it, which one across its task's waits has not.
  void link_pieces(uint64_t last) {
    const size_t count = ids_.final.size();
    const std::span<const uint32_t> merged_ids(ids_.final.data() + ids_.own_first.back(), merged_.size());
    std::vector<bool> is_merged(count);
    for (const uint32_t k : merged_ids) is_merged[k] = true;
    Column<uint8_t>::Built depths(count, WholeSpans::kApart);
    Column<uint32_t>::Built places(count, 0);
    std::vector<std::pair<uint32_t, WholeSpan>> apart;  // span, and what it is
    for (uint32_t l = 0; l < lanes_.size(); ++l) {
      const Lane& lane = lanes_[l];
      for (size_t depth = 0; depth < lane.depths.size(); ++depth) {
        const IntervalRow& row = lane.depths[depth];
        const Column<uint32_t>& owners = lane.depth_spans[depth];
        const bool linked = depth < WholeSpans::kApart;
        for (uint32_t piece = 0; piece < row.size(); ++piece) {
          const uint32_t k = owners[piece];
          if (!linked) {  // a merged span's values are the merge's, found below
            if (!is_merged[k]) apart.emplace_back(k, WholeSpan{row.begins[piece], row.ends[piece], row.items[piece]});
            continue;
          }
          if (is_merged[k] && !whole_piece(k, merged_ids, l, row, piece, last)) continue;
          depths[k] = static_cast<uint8_t>(depth);
          places[k] = piece;
        }
      }
    }
    for (uint32_t m = 0; m < merged_ids.size(); ++m)
      if (depths[merged_ids[m]] == WholeSpans::kApart) apart.emplace_back(merged_ids[m], merged_span(m, last));
    merged_ = WholeSpans();
    // Every span is either linked to a piece or among `apart`, once.
    std::sort(apart.begin(), apart.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    size_t next = 0;
    whole_.keep_links(std::move(depths), std::move(places), [&](uint32_t k) {
      if (next == apart.size() || apart[next].first != k) throw std::logic_error("a span neither linked nor apart");
      return apart[next++].second;
    });
    if (next != apart.size()) throw std::logic_error("a span both linked to a piece and apart");
  }

  // Merged span m as the index keeps it: cut by the trace's end at `last`.
  WholeSpan merged_span(uint32_t m, uint64_t last) const {
    return {merged_.begins[m], merged_.ends[m] == kOpen ? last : merged_.ends[m], merged_.sites[m]};
  }

  // Merged span k (of places `merged_ids`) is the whole of piece `piece` of `row`, on lane `lane`.
  bool whole_piece(uint32_t k, std::span<const uint32_t> merged_ids, uint32_t lane, const IntervalRow& row,
                   uint32_t piece, uint64_t last) const {
    const auto m =
        static_cast<uint32_t>(std::lower_bound(merged_ids.begin(), merged_ids.end(), k) - merged_ids.begin());
    return merged_.lanes[m] == lane && WholeSpans::is_whole_piece(row, piece, merged_span(m, last));
  }

  struct MergeKey {
    uint64_t ticks;
    uint32_t stream;
    uint64_t place;
    bool operator<(const MergeKey& other) const {
      return ticks != other.ticks     ? ticks < other.ticks
             : stream != other.stream ? stream < other.stream
                                      : place < other.place;
    }
  };
  struct Parent {
    uint32_t span;
    bool merged;  // a span of the merge's, else one of the lane's own
  };

  // Both halves' problems as one pairing would have found them: the first unmatched end is the
  // first in the merge's order.
  std::vector<std::string> problems(const reader::SpanPairing& pairing, std::optional<uint32_t> first_stream) const {
    reader::PairingProblems all = pairing.problems();
    std::optional<std::pair<uint64_t, uint32_t>> first;
    if (all.unmatched_ends > 0 && first_stream) first = {{all.first_unmatched_ticks, *first_stream}};
    for (uint32_t stream = 0; stream < parts_.size(); ++stream) {
      const reader::PairingProblems& own = parts_[stream].problems;
      if (own.unmatched_ends > 0 && (!first || std::pair{own.first_unmatched_ticks, stream} < *first)) {
        first = {{own.first_unmatched_ticks, stream}};
        all.first_unmatched_site = own.first_unmatched_site;
        all.first_unmatched_ticks = own.first_unmatched_ticks;
        all.first_unmatched_thread = own.first_unmatched_thread;
      }
      all.unmatched_ends += own.unmatched_ends;
      all.out_of_order_ends += own.out_of_order_ends;
      all.orphan_attributes += own.orphan_attributes;
      all.unclosed += own.unclosed;
    }
    return reader::describe_pairing_problems(trace_, all);
  }

  const reader::Trace& trace_;
  const TimelineIndex& clock_;
  std::vector<StreamPart>& parts_;
  std::vector<Lane>& lanes_;
  WholeSpans& whole_;
  std::vector<LaneState> states_;
  Ids ids_;
  WholeSpans merged_;  // the tasks' spans, as the merge began them
  std::vector<MergeKey> merged_keys_;
  std::vector<Parent> merged_parents_;
  std::unordered_map<uint64_t, uint32_t> merged_of_sequence_;  // open spans' places in merged_
};

}  // namespace

ApartResult index_spans_apart(const reader::Trace& trace, const TimelineIndex& clock, std::vector<StreamPart>& parts,
                              std::vector<Lane>& lanes, WholeSpans& whole, model::TaskGraphFeed& feed,
                              IndexSteps& steps, const std::function<void(TyingEventsMerged)>& merged) {
  return SpansApart(trace, clock, parts, lanes, whole).run(feed, steps, merged);
}

}  // namespace chronicle::viewer::index_internal
