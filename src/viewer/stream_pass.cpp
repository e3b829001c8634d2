#include "viewer/stream_pass.hpp"

#include <algorithm>

#include "analysis/counter_series.hpp"
#include "viewer/timeline_index_internal.hpp"

namespace chronicle::viewer::index_internal {

namespace {

constexpr uint64_t kProgressBatch = uint64_t{1} << 16;

// As the pairing ends a run at a task_run_end: the innermost run of that task on the thread.
void end_innermost_run(std::vector<uint64_t>& runs, uint64_t task) {
  const auto found = std::find(runs.rbegin(), runs.rend(), task);
  if (found != runs.rend()) runs.erase(std::next(found).base());
}

class StreamPass {
 public:
  StreamPass(const reader::Trace& trace, const TimelineIndex& index, size_t stream,
             const std::vector<analysis::SeriesKind>& counter_kinds, Lane& lane, StreamPart& part,
             std::atomic<bool>& apart)
      : trace_(trace),
        index_(index),
        stream_(static_cast<uint32_t>(stream)),
        counter_kinds_(counter_kinds),
        lane_(lane),
        part_(part),
        apart_(apart),
        pairing_(trace, reader::SpanPairing::Identities::left_out_unless_traced) {}

  void run(const std::function<void(uint64_t)>& progress) {
    reserve_by_counting();
    reader::Trace::StreamCursor cursor(trace_, stream_);
    cursor_ = &cursor;
    reader::Event event;
    uint64_t unreported = 0;
    for (uint64_t place = 0; cursor.next(event); ++place) {
      if (++unreported == kProgressBatch) {
        if (progress) progress(unreported);
        unreported = 0;
      }
      ++part_.events;
      part_.first_ticks = std::min(part_.first_ticks, event.ticks);
      index_lane_event(event);
      if (apart_.load(std::memory_order_relaxed)) index_span_event(event, place);
      part_.last_ticks = std::max(part_.last_ticks, event.ticks);
    }
    if (progress && unreported > 0) progress(unreported);
    lane_.markers.shrink_to_fit();  // vectors grown by doubling hold up to twice what they need
    part_.open = std::move(open_);
    part_.problems = pairing_.problems();
  }

 private:
  // The pass's arrays made once at the size they will have, from a first read of the stream that
  // only decodes it and counts (several times faster than the pass), rather than grown by
  // doubling: each doubling makes fresh pages present, which the kernel clears (a fifth of a
  // first open's time at 10 M events, `perf`), and copies what was there. The counts follow the
  // pass's rules loosely (a span is counted at the depth it began at, an unmatched end still
  // lowers the depth): a count a little off costs one regrowth or a little unused room, never a
  // different index. A compressed stream is not read twice (its decoding is the dear part).
  void reserve_by_counting() {
    const reader::StreamInfo& info = trace_.streams()[stream_];
    for (const std::string& file : info.files)
      if (file.ends_with(".ctfz")) return;
    StreamCounts counts = count_stream();
    lane_.markers.times.reserve(counts.markers);
    lane_.markers.sites.reserve(counts.markers);
    lane_.markers.types.reserve(counts.markers);
    lane_.markers.texts.reserve(counts.markers, counts.marker_text_bytes);
    part_.counter_samples.reserve(counts.counter_samples);
    if (!apart_.load(std::memory_order_relaxed)) return;  // no spans are indexed here
    part_.run_bases.reserve(counts.runs);
    part_.spans.parents.reserve(counts.own_spans);
    part_.begins.reserve(counts.own_spans);
    closes_by_depth_ = std::move(counts.own_spans_by_depth);
    part_.merged_pieces_by_depth = std::move(counts.task_pieces_by_depth);
  }

  struct StreamCounts {
    uint64_t own_spans = 0;  // begun outside task runs
    uint64_t runs = 0;
    std::vector<uint64_t> own_spans_by_depth;
    std::vector<uint64_t> task_pieces_by_depth;  // the tasks' spans' first pieces, by the depth they begin at
    uint64_t markers = 0;
    uint64_t marker_text_bytes = 0;  // the notes' texts
    uint64_t counter_samples = 0;
  };

  StreamCounts count_stream() const {
    using format::EventId;
    StreamCounts counts;
    reader::Trace::StreamCursor cursor(trace_, stream_);
    reader::Event event;
    std::vector<uint64_t> runs;
    size_t depth = 0;
    // The tasks' spans open on the lane, above the thread's own, and how many were open when each
    // run began (a run's end cuts those it leaves open).
    size_t task_depth = 0;
    std::vector<size_t> task_depth_at_run;
    while (cursor.next(event)) {
      const bool own = runs.empty() && !reader::ties_threads(static_cast<uint32_t>(event.type));
      switch (event.type) {
        case EventId::instant:
        case EventId::note:
          ++counts.markers;
          counts.marker_text_bytes += event.type == EventId::note ? event.text.size() : 0;
          break;
        case EventId::counter:
        case EventId::counter_float:
          ++counts.counter_samples;
          break;
        case EventId::task_run_begin:
          ++counts.runs;
          if (event.task != 0) {
            runs.push_back(event.task);
            task_depth_at_run.push_back(task_depth);
          }
          break;
        case EventId::task_run_end:
          end_innermost_run(runs, event.task);
          for (; task_depth_at_run.size() > runs.size(); task_depth_at_run.pop_back())
            task_depth = task_depth_at_run.back();
          break;
        case EventId::span_begin:
          if (!own) {  // inside a task run (a span's begin never ties threads)
            if (counts.task_pieces_by_depth.size() <= depth + task_depth)
              counts.task_pieces_by_depth.resize(depth + task_depth + 1);
            ++counts.task_pieces_by_depth[depth + task_depth++];
            break;
          }
          ++counts.own_spans;
          if (counts.own_spans_by_depth.size() <= depth) counts.own_spans_by_depth.resize(depth + 1);
          ++counts.own_spans_by_depth[depth++];
          break;
        case EventId::span_end:
          if (own) {
            if (depth > 0) --depth;
          } else if (task_depth > task_depth_at_run.back()) {
            --task_depth;
          }
          break;
        default:
          break;
      }
    }
    return counts;
  }

  void index_lane_event(const reader::Event& event) {
    using format::EventId;
    switch (event.type) {
      case EventId::instant:
      case EventId::note:
        lane_.markers.add(index_.to_ns(event.ticks), event.name_id, event.type,
                          event.type == EventId::note ? event.text : std::string_view());
        break;
      case EventId::counter:
      case EventId::counter_float: {
        const bool known_site = event.name_id < counter_kinds_.size();
        const analysis::SeriesKind kind = known_site ? counter_kinds_[event.name_id] : analysis::SeriesKind::level;
        part_.counter_samples.push_back(
            {index_.to_ns(event.ticks), analysis::traced_value(event, kind), event.name_id});
        if (known_site) {
          if (part_.counter_samples_by_site.empty()) part_.counter_samples_by_site.resize(counter_kinds_.size());
          ++part_.counter_samples_by_site[event.name_id];
        }
        break;
      }
      case EventId::task_create:
        ++part_.task_creations;
        break;
      case EventId::task_wait:
      case EventId::task_resolve:
        ++part_.task_waits_and_resolutions;
        break;
      default:
        break;
    }
  }

  void index_span_event(const reader::Event& event, uint64_t place) {
    using format::EventId;
    if (event.ticks < part_.last_ticks) return give_up();  // the merge would order it otherwise
    const bool ties = reader::ties_threads(static_cast<uint32_t>(event.type));
    const bool merged = ties || !runs_.empty();
    if (merged && !ties) check_inside_run(event);
    if (reader::is_attribute_event(static_cast<uint32_t>(event.type)) || event.type == EventId::span_status)
      if (last_instant_ && last_instant_->ticks == event.ticks && last_instant_->merged != merged) give_up();
    if (event.type == EventId::instant) last_instant_ = Instant{event.ticks, merged};
    if (event.type == EventId::task_run_begin) {
      part_.run_bases.push_back(
          {static_cast<uint32_t>(open_.size()), open_.empty() ? WholeSpans::kNoParent : open_.back().span});
      if (event.task != 0) runs_.push_back(event.task);
    } else if (event.type == EventId::task_run_end) {
      end_innermost_run(runs_, event.task);
    }
    if (merged)
      mark_merged(place);
    else
      own_event(event, place);
  }

  // Inside a run the thread's own spans are still, unless an end or attribute of a task's span
  // falls back on them (span_pairing.hpp): whenever one could, the merge must decide.
  void check_inside_run(const reader::Event& event) {
    using format::EventId;
    uint32_t site = 0;
    if (event.type == EventId::span_end)
      site = event.name_id;
    else if (reader::is_attribute_event(static_cast<uint32_t>(event.type)) || event.type == EventId::span_status)
      site = event.span_site;
    if (site == 0) return;  // an end always names its site; an attribute of site 0 stays in its task
    const uint32_t key = pairing_.name_key(site);
    for (const OpenPiece& piece : open_)
      if (pairing_.name_key(piece.site) == key) return give_up();
  }

  void give_up() { apart_.store(false, std::memory_order_relaxed); }

  void mark_merged(uint64_t place) {
    auto& ranges = part_.merged;
    if (!ranges.empty() && ranges.back().end == place)
      ++ranges.back().end;
    else
      ranges.push_back({place, place + 1, cursor_->mark()});
  }

  // An event of the thread's own spans, as the merged pass indexes it (IndexBuilder::index_spans).
  void own_event(const reader::Event& event, uint64_t place) {
    using format::EventId;
    const reader::PairedSpan* span = pairing_.follow(event);
    WholeSpans& spans = part_.spans;
    if (event.type == EventId::span_begin && span) {
      const auto local = static_cast<uint32_t>(part_.own_spans());
      const uint64_t begin = index_.to_ns(event.ticks);
      spans.parents.push_back(open_.empty() ? WholeSpans::kNoParent : open_.back().span);
      open_.push_back({begin, span->site_id, local, span->sequence, 0});
      part_.begins.push(event.ticks, place);
    } else if (event.type == EventId::span_end && span) {
      for (size_t depth = open_.size(); depth-- > 0;)
        if (open_[depth].sequence == span->sequence) {
          add_attribute_texts(spans, open_[depth].span, *span);
          close(depth, index_.to_ns(event.ticks), place);
          break;
        }
    }
  }

  void close(size_t depth, uint64_t end, uint64_t place) {
    if (lane_.depths.size() <= depth) {
      const size_t first_new = lane_.depths.size();
      lane_.depths.resize(depth + 1);
      lane_.depth_spans.resize(depth + 1);
      part_.closed_at.resize(depth + 1);
      for (size_t added = first_new; added <= depth && added < closes_by_depth_.size(); ++added)
        reserve_row(added, closes_by_depth_[added]);
    }
    const OpenPiece& piece = open_[depth];
    lane_.depths[depth].add(piece.begin, end, piece.site);
    lane_.depth_spans[depth].push_back(piece.span);
    part_.closed_at[depth].push_back(place);
    ++lane_.span_count;
    open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(depth));
  }

  // With room for the pieces the merge will add (StreamPart::merged_pieces_by_depth), which it
  // then merges in place.
  void reserve_row(size_t depth, uint64_t count) {
    const uint64_t with_merged = count + part_.merged_pieces_at(depth);
    lane_.depths[depth].reserve(with_merged);
    lane_.depth_spans[depth].reserve(with_merged);
    part_.closed_at[depth].reserve(count);
  }

  struct Instant {
    uint64_t ticks;
    bool merged;
  };

  const reader::Trace& trace_;
  const TimelineIndex& index_;
  uint32_t stream_;
  const std::vector<analysis::SeriesKind>& counter_kinds_;
  Lane& lane_;
  StreamPart& part_;
  std::atomic<bool>& apart_;
  const reader::Trace::StreamCursor* cursor_ = nullptr;  // the pass's, at the event being indexed
  reader::SpanPairing pairing_;                          // of the events outside task runs only
  std::vector<OpenPiece> open_;                          // the thread's own pieces, outermost first
  std::vector<uint64_t> runs_;                           // task runs on the thread, innermost last
  std::optional<Instant> last_instant_;
  std::vector<uint64_t> closes_by_depth_;  // the pieces each depth's row will hold (counted)
};

}  // namespace

void index_stream_alone(const reader::Trace& trace, const TimelineIndex& index, size_t stream,
                        const std::vector<analysis::SeriesKind>& counter_kinds, Lane& lane, StreamPart& part,
                        std::atomic<bool>& apart, const std::function<void(uint64_t)>& progress) {
  StreamPass(trace, index, stream, counter_kinds, lane, part, apart).run(progress);
}

}  // namespace chronicle::viewer::index_internal
