// Profiling a trace with its threads read apart, on threads of their own (profile.hpp says when it
// may): a pass per thread, or per piece of a large thread's stream, and their parts merged.
#include "analysis/profile_internal.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <deque>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "reader/run_on_threads.hpp"

namespace chronicle::analysis {

namespace profile_internal {

// Events that tie the threads together: task runs carry spans from thread to thread, and the task
// graph (tasks, loops and their problems) follows them in time order across threads. Bit 31: ids
// no sound packet holds.
bool threads_are_apart(const reader::Trace& trace) {
  uint32_t tying = uint32_t{1} << 31;
  for (uint32_t id = 0; id < 31; ++id)
    if (reader::ties_threads(id)) tying |= format::event_type_bit(id);
  for (size_t stream = 0; stream < trace.streams().size(); ++stream)
    if (trace.event_types(stream) & tying) return false;
  return true;
}

}  // namespace profile_internal

namespace {

// Where an event stands in the time-ordered merge of streams that each go forward in time.
struct MergePlace {
  uint64_t ticks = 0;
  uint32_t stream = 0;
  bool operator<(const MergePlace& other) const {
    return ticks != other.ticks ? ticks < other.ticks : stream < other.stream;
  }
};

// A counter series' samples on one thread. Levels and observations are as shown; increments are
// kept as traced (their running total needs the other threads'), with their sum: when all are
// whole numbers of 0 or more and every sum is below 2^53, a double holds each sum exactly, and
// the running totals of the merge come out the same in any order.
struct CounterPart {
  CounterAccumulator values;
  uint32_t first_stream = 0, last_stream = 0;
  double sum = 0;
  // False: a value whose order matters to the result (a NaN or -0 to min and max, an increment
  // the sum would round): the trace is then read in the merge.
  bool exact = true;
};

constexpr double kExactSums = 9007199254740992.0;  // 2^53

// One thread's streams (usually one: a thread id is used again by a later thread of the process)
// read in time order, its spans paired as SpanPairing pairs a thread's spans outside any task:
// each end with the innermost open span of its name. Memory: the open spans, the names and series.
//
// A pass can also read a piece of one stream (a range of its packets) on a thread of its own, not
// knowing which spans the pieces before it left open: the carried spans, below all of its own.
// An end that finds no span of its own to close would close a carried one (or none); the pass
// keeps it as a dangling end, to be settled by append(), and the ends cut the piece into
// segments. What its own outermost spans (begun with none of its own open) do depends on the
// carried spans too: the time of those closed in each segment, which is busy time if nothing
// was carried open then, and children's time of the carried span then innermost (per segment
// of their beginning and of their end). The first piece knows that nothing is carried, and reads
// as a whole thread does. Memory: a few words per dangling end (at most kMaxDanglingEnds, beyond
// which the piece gives up and the thread is read whole).
class ThreadPass {
 public:
  ThreadPass(const reader::Trace& trace, const TimelineClock& timeline, const reader::SpanPairing& names,
             std::vector<size_t> streams)
      : trace_(trace),
        timeline_(timeline),
        names_(names),
        streams_(std::move(streams)),
        by_site_(trace.sites().size() + 1, nullptr),
        catalog_(trace.sites()) {}

  // The pass over packets [first_packet, end_packet) of a thread's one stream, the first piece of
  // it or a later one.
  ThreadPass(const reader::Trace& trace, const TimelineClock& timeline, const reader::SpanPairing& names, size_t stream,
             size_t first_packet, size_t end_packet)
      : ThreadPass(trace, timeline, names, std::vector<size_t>{stream}) {
    first_packet_ = first_packet;
    end_packet_ = end_packet;
  }

  // `count(n)`: n more events seen.
  template <typename Count>
  void run(Count&& count) {
    if (first_packet_ > 0)  // a later piece of its stream
      read<true>(count);
    else
      read<false>(count);
  }

 private:
  // The events, each followed as a later piece (kLaterPiece) or a first piece or whole thread
  // follows it: two loops, so that the common one carries no test of which it is.
  template <bool kLaterPiece, typename Count>
  void read(Count&& count) {
    constexpr uint64_t kBatch = 1 << 14;
    uint64_t batch = 0;
    auto visit = [&](const reader::Event& event) {
      follow<kLaterPiece>(event);
      if (++batch == kBatch) {
        count(batch);
        batch = 0;
      }
    };
    reader::Event event;
    if (streams_.size() == 1) {
      reader::Trace::StreamCursor cursor(trace_, streams_.front(), first_packet_, end_packet_);
      uint64_t previous = 0;
      while (cursor.next(event)) {
        in_order_ &= event.ticks >= previous;
        previous = event.ticks;
        visit(event);
      }
    } else {
      // The merge of a few streams: the one whose next event is earliest (then the lowest stream).
      struct Head {
        reader::Trace::StreamCursor cursor;
        reader::Event event;
        bool more;
      };
      std::vector<Head> heads;
      heads.reserve(streams_.size());
      for (const size_t stream : streams_) {
        heads.push_back({reader::Trace::StreamCursor(trace_, stream), {}, false});
        heads.back().more = heads.back().cursor.next(heads.back().event);
      }
      while (true) {
        Head* next = nullptr;
        for (Head& head : heads)
          if (head.more && (!next || MergePlace{head.event.ticks, head.event.stream} <
                                         MergePlace{next->event.ticks, next->event.stream}))
            next = &head;
        if (!next) break;
        visit(next->event);
        const uint64_t previous = next->event.ticks;
        next->more = next->cursor.next(next->event);
        if (next->more) in_order_ &= next->event.ticks >= previous;
      }
    }
    count(batch);
  }

 public:
  // Each stream went forward in time: only then is the merge's order that of (ticks, stream).
  bool in_order() const { return in_order_; }
  uint32_t thread_id() const { return trace_.streams()[streams_.front()].thread_id; }
  uint64_t seen() const { return seen_; }
  uint64_t first() const { return first_; }
  uint64_t last() const { return last_; }
  const ThreadAccumulator& thread() const { return thread_; }
  const std::unordered_map<uint32_t, SpanAccumulator>& spans() const { return spans_; }
  const std::vector<SeriesInfo>& series() const { return catalog_.series(); }
  const std::vector<CounterPart>& counters() const { return counters_; }
  const reader::PairingProblems& problems() const { return problems_; }
  uint32_t first_unmatched_stream() const { return first_unmatched_stream_; }
  // A later piece met more dangling ends than it keeps: the thread must be read whole.
  bool gave_up() const { return gave_up_; }

  // Takes in the piece that follows this pass in its stream, as if this pass had gone on to read
  // it: its dangling ends are settled against the spans this pass left open, in order.
  void append(const ThreadPass& next) {
    in_order_ &=
        next.in_order_ && (thread_.events == 0 || next.thread_.events == 0 || next.thread_.first >= thread_.last);
    seen_ += next.seen_;
    first_ = std::min(first_, next.first_);
    last_ = std::max(last_, next.last_);
    if (next.thread_.events > 0) {
      if (thread_.events == 0) thread_.first = next.thread_.first;
      thread_.last = next.thread_.last;
      thread_.events += next.thread_.events;
      thread_.runs_tasks = thread_.runs_tasks || next.thread_.runs_tasks;
    }
    for (const auto& [site, accumulator] : next.spans_) span_accumulator(site).merge(accumulator);
    problems_.out_of_order_ends += next.problems_.out_of_order_ends;
    append_counters(next);

    const uint64_t base = next_sequence_ - 1;  // the next piece's sequence n is base + n here
    next_sequence_ += next.next_sequence_ - 1;
    std::vector<uint64_t> innermost_at(next.segment_ + 1);  // per segment: the carried innermost (0: none)
    size_t close = 0;
    for (uint32_t segment = 0;; ++segment) {
      innermost_at[segment] = open_.empty() ? 0 : open_.back().sequence;
      // With nothing carried open, the piece's outermost spans were the thread's.
      if (open_.empty()) thread_.busy.add_closed(next.busy_if_nothing_carried_[segment]);
      for (; close < next.outer_closes_.size() && next.outer_closes_[close].end_segment == segment; ++close) {
        const OuterCloses& closes = next.outer_closes_[close];
        add_to_parent(open_.size(), innermost_at[closes.begin_segment], closes.time);
      }
      if (segment == next.segment_) break;
      settle(next.dangling_[segment]);
    }
    for (OpenSpan span : next.open_) {
      span.parent_sequence = span.parent_sequence == 0 ? innermost_at[span.segment] : base + span.parent_sequence;
      span.sequence += base;
      if (span.parent_sequence == 0) thread_.busy.open_span(timeline_.ns(span.begin));
      open_.push_back(span);
    }
  }

 private:
  struct OpenSpan {
    uint64_t sequence;
    uint64_t parent_sequence;  // 0: outermost when it began
    uint64_t begin;
    uint64_t children;  // time of the spans closed inside it so far
    uint32_t key;       // SpanPairing::name_key of its site
    uint32_t site;
    uint32_t segment;  // of a later piece: the segment it began in
  };

  // An end that closed none of a later piece's own spans, kept to be settled by append().
  struct DanglingEnd {
    uint64_t ticks;
    uint32_t key;
    uint32_t site;
    uint32_t stream;
    uint32_t thread_id;
    bool none_of_its_own_open;  // else it closes a carried span out of order, if any
  };
  // The time of a later piece's outermost spans begun in one segment and closed in another.
  struct OuterCloses {
    uint32_t begin_segment;
    uint32_t end_segment;
    uint64_t time;
  };
  static constexpr size_t kMaxDanglingEnds = size_t{1} << 16;

  template <bool kLaterPiece>
  void follow(const reader::Event& event) {
    ++seen_;
    first_ = std::min(first_, event.ticks);
    last_ = std::max(last_, event.ticks);
    if (thread_.events++ == 0) thread_.first = event.ticks;
    thread_.last = event.ticks;
    if (event.type == format::EventId::task_run_begin) thread_.runs_tasks = true;
    switch (event.type) {
      case format::EventId::span_begin:
        begin_span<kLaterPiece>(event);
        break;
      case format::EventId::span_end:
        end_span<kLaterPiece>(event);
        break;
      case format::EventId::counter:
      case format::EventId::counter_float:
        add_counter(event);
        break;
      default:
        break;
    }
  }

  template <bool kLaterPiece>
  void begin_span(const reader::Event& event) {
    // An outermost span of the thread's own makes it busy (BusyClock).
    if (!kLaterPiece && open_.empty()) thread_.busy.open_span(timeline_.ns(event.ticks));
    open_.push_back({next_sequence_++, open_.empty() ? 0 : open_.back().sequence, event.ticks, 0,
                     names_.name_key(event.name_id), event.name_id, segment_});
  }

  // One past the innermost open span of name key `key`; 0 when none is open.
  size_t innermost_open(uint32_t key) const {
    size_t index = open_.size();
    while (index > 0 && open_[index - 1].key != key) --index;
    return index;
  }

  template <bool kLaterPiece>
  void end_span(const reader::Event& event) {
    const uint32_t key = names_.name_key(event.name_id);
    size_t index = innermost_open(key);
    if (index == 0) {
      if (kLaterPiece) {
        dangle({event.ticks, key, event.name_id, event.stream, event.thread_id, open_.empty()});
        return;
      }
      count_unmatched(event.name_id, event.ticks, event.thread_id, event.stream);
      return;
    }
    --index;
    if (index + 1 != open_.size()) ++problems_.out_of_order_ends;
    close_at<kLaterPiece>(index, event.ticks);
  }

  void count_unmatched(uint32_t site, uint64_t ticks, uint32_t thread_id, uint32_t stream) {
    if (problems_.unmatched_ends++ == 0) {
      problems_.first_unmatched_site = site;
      problems_.first_unmatched_ticks = ticks;
      problems_.first_unmatched_thread = thread_id;
      first_unmatched_stream_ = stream;
    }
  }

  // Closes open_[index] at `ticks`. Times from here on are TimelineClock ns: a thread's own span
  // runs all along its wall time (analysis/span_time.hpp).
  template <bool kLaterPiece>
  void close_at(size_t index, uint64_t ticks) {
    const OpenSpan span = open_[index];
    open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(index));
    const uint64_t end_ns = timeline_.ns(ticks), begin_ns = timeline_.ns(span.begin);
    const uint64_t length = end_ns > begin_ns ? end_ns - begin_ns : 0;
    SpanAccumulator& accumulator = span_accumulator(span.site);
    accumulator.durations.add(length);
    accumulator.total += length;
    accumulator.self += length > span.children ? length - span.children : 0;
    accumulator.running += length;
    if (span.parent_sequence != 0) {
      add_to_parent(index, span.parent_sequence, length);
    } else if (!kLaterPiece) {
      thread_.busy.close_span(end_ns);
    } else {
      busy_if_nothing_carried_[span.segment] += length;
      if (outer_closes_.empty() || outer_closes_.back().begin_segment != span.segment ||
          outer_closes_.back().end_segment != segment_)
        outer_closes_.push_back({span.segment, segment_, 0});
      outer_closes_.back().time += length;
    }
  }

  // Adds `length` to the children's time of the open span `parent` if it is still open below
  // `index` (the stack is in order of sequence).
  void add_to_parent(size_t index, uint64_t parent, uint64_t length) {
    if (parent == 0) return;
    for (size_t below = index; below-- > 0;) {
      if (open_[below].sequence == parent) {
        open_[below].children += length;
        return;
      }
      if (open_[below].sequence < parent) return;
    }
  }

  void dangle(const DanglingEnd& end) {
    if (dangling_.size() == kMaxDanglingEnds) {
      gave_up_ = true;
      return;
    }
    dangling_.push_back(end);
    ++segment_;
    busy_if_nothing_carried_.push_back(0);
  }

  // A later piece's dangling end, met again where this pass stands.
  void settle(const DanglingEnd& end) {
    size_t index = innermost_open(end.key);
    if (index == 0) {
      count_unmatched(end.site, end.ticks, end.thread_id, end.stream);
      return;
    }
    --index;
    if (!end.none_of_its_own_open || index + 1 != open_.size()) ++problems_.out_of_order_ends;
    close_at<false>(index, end.ticks);  // this pass is a first piece: nothing is carried below it
  }

  void append_counters(const ThreadPass& next) {
    if (counters_.size() < next.counters_.size()) counters_.resize(next.counters_.size());
    for (size_t series = 0; series < next.counters_.size(); ++series) {
      const CounterPart& later = next.counters_[series];
      if (later.values.samples == 0) continue;
      CounterPart& part = counters_[series];
      if (part.values.samples == 0) {
        part = later;
        continue;
      }
      part.values.add_count_and_extremes(later.values);
      part.values.last = later.values.last;
      part.values.last_ticks = later.values.last_ticks;
      part.last_stream = later.last_stream;
      part.sum += later.sum;
      part.exact = part.exact && later.exact && part.sum < kExactSums;
    }
  }

  SpanAccumulator& span_accumulator(uint32_t site) {
    if (site >= by_site_.size()) return spans_[site];
    SpanAccumulator*& slot = by_site_[site];
    if (!slot) slot = &spans_[site];  // an unordered_map's elements keep their address
    return *slot;
  }

  void add_counter(const reader::Event& event) {
    const std::optional<uint32_t> series = catalog_.series_of(event.name_id);
    if (!series) return;
    const SeriesKind kind = catalog_.series()[*series].kind;
    const double change = traced_value(event, kind);
    if (counters_.size() <= *series) counters_.resize(*series + 1);
    CounterPart& part = counters_[*series];
    if (std::isnan(change) || (change == 0 && std::signbit(change))) part.exact = false;
    if (kind == SeriesKind::increments) {
      if (change < 0 || change >= kExactSums || change != std::floor(change)) part.exact = false;
      part.sum += change;
      if (part.sum >= kExactSums) part.exact = false;
    }
    if (part.values.samples == 0) part.first_stream = event.stream;
    part.last_stream = event.stream;
    part.values.add(event.ticks, change);
  }

  const reader::Trace& trace_;
  const TimelineClock& timeline_;
  const reader::SpanPairing& names_;
  std::vector<size_t> streams_;
  size_t first_packet_ = 0, end_packet_ = SIZE_MAX;  // first_packet_ > 0: a later piece of its stream
  bool in_order_ = true;
  uint64_t seen_ = 0;
  uint64_t first_ = std::numeric_limits<uint64_t>::max(), last_ = 0;
  ThreadAccumulator thread_;
  std::vector<OpenSpan> open_;
  uint64_t next_sequence_ = 1;
  std::unordered_map<uint32_t, SpanAccumulator> spans_;  // by site id
  std::vector<SpanAccumulator*> by_site_;                // the same, for the defined ids
  SeriesCatalog catalog_;
  std::vector<CounterPart> counters_;  // by series of catalog_
  reader::PairingProblems problems_;
  uint32_t first_unmatched_stream_ = 0;
  // A later piece's: its dangling ends, and per segment between them what its outermost spans did.
  uint32_t segment_ = 0;
  std::vector<DanglingEnd> dangling_;
  std::vector<uint64_t> busy_if_nothing_carried_ = std::vector<uint64_t>(1, 0);
  std::vector<OuterCloses> outer_closes_;
  bool gave_up_ = false;
};

// Progress from several threads: the count of all, reported every 2^20 events by whichever
// thread passes the mark.
class SharedProgress {
 public:
  SharedProgress(const ProgressCallback& progress, uint64_t expected) : progress_(progress), expected_(expected) {}
  void add(uint64_t events) {
    const uint64_t before = seen_.fetch_add(events, std::memory_order_relaxed);
    if (!progress_ || (before >> 20) == ((before + events) >> 20)) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    progress_(before + events, expected_);
  }

 private:
  const ProgressCallback& progress_;
  uint64_t expected_;
  std::atomic<uint64_t> seen_{0};
  std::mutex mutex_;
};

}  // namespace

namespace profile_internal {

// The threads read apart and their parts merged; nullopt when the trace must be read in the
// merge after all (a stream going back in time, a counter value whose order matters, a read
// that failed: the merge then reads it, and says what failed).
std::optional<EventTotals> follow_threads_apart(const reader::Trace& trace, const TimelineClock& timeline,
                                                const ProgressCallback& progress, uint64_t expected,
                                                const ProfileOptions& options) {
  // Streams by thread id, each thread's in stream order; the largest threads first, so that the
  // last to be read are short.
  std::map<uint32_t, std::vector<size_t>> streams_of;
  std::map<uint32_t, uint64_t> bytes_of;
  for (size_t stream = 0; stream < trace.streams().size(); ++stream) {
    streams_of[trace.streams()[stream].thread_id].push_back(stream);
    bytes_of[trace.streams()[stream].thread_id] += trace.streams()[stream].bytes;
  }
  std::vector<uint32_t> order;
  for (const auto& [thread_id, streams] : streams_of) order.push_back(thread_id);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return bytes_of.at(a) > bytes_of.at(b); });
  const reader::SpanPairing names(trace);
  const size_t threads = options.threads != 0 ? options.threads : reader::default_thread_count();
  uint64_t total_bytes = 0;
  for (const auto& [thread_id, bytes] : bytes_of) total_bytes += bytes;
  // A thread that holds most of the trace would keep one core busy while the others wait: its
  // stream is read in pieces (ThreadPass), put together in order afterwards.
  auto pieces_of = [&](uint32_t thread_id) -> size_t {
    const std::vector<size_t>& streams = streams_of.at(thread_id);
    if (streams.size() != 1 || options.pieces == ProfileOptions::Pieces::never) return 1;
    const size_t wanted = options.pieces == ProfileOptions::Pieces::always
                              ? std::max<size_t>(threads, 2)
                              : (threads >= 2 && bytes_of.at(thread_id) * 2 > total_bytes ? threads : 1);
    return std::max<size_t>(1, std::min(wanted, trace.readable_packet_count(streams.front()) / 2));
  };
  std::vector<ThreadPass> passes;
  std::vector<size_t> first_piece;  // per thread of `order`: its first pass; the rest follow it
  for (const uint32_t thread_id : order) {
    first_piece.push_back(passes.size());
    const size_t pieces = pieces_of(thread_id);
    if (pieces == 1) {
      passes.emplace_back(trace, timeline, names, streams_of.at(thread_id));
      continue;
    }
    const size_t stream = streams_of.at(thread_id).front();
    const size_t packets = trace.readable_packet_count(stream);
    for (size_t piece = 0; piece < pieces; ++piece)
      passes.emplace_back(trace, timeline, names, stream, packets * piece / pieces, packets * (piece + 1) / pieces);
  }
  first_piece.push_back(passes.size());

  SharedProgress shared(progress, expected);
  const std::vector<std::exception_ptr> failures = reader::run_on_threads(
      passes.size(), threads, [&](size_t index) { passes[index].run([&](uint64_t events) { shared.add(events); }); });
  for (const std::exception_ptr& failure : failures)
    if (failure) return std::nullopt;

  EventTotals totals;
  // Each thread's pieces put together in its first; a piece that gave up: the thread read whole.
  std::deque<ThreadPass> read_whole;
  std::vector<ThreadPass*> joined;
  for (size_t thread = 0; thread + 1 < first_piece.size(); ++thread) {
    const size_t first = first_piece[thread], end = first_piece[thread + 1];
    joined.push_back(&passes[first]);
    if (end - first == 1) continue;
    totals.read_in_pieces = true;
    if (std::any_of(passes.begin() + static_cast<std::ptrdiff_t>(first),
                    passes.begin() + static_cast<std::ptrdiff_t>(end),
                    [](const ThreadPass& pass) { return pass.gave_up(); })) {
      joined.back() = &read_whole.emplace_back(trace, timeline, names, streams_of.at(order[thread]));
      joined.back()->run([](uint64_t) {});
      continue;
    }
    for (size_t piece = first + 1; piece < end; ++piece) passes[first].append(passes[piece]);
  }

  reader::PairingProblems problems;
  MergePlace first_unmatched;
  // Counters by what makes a series (SeriesCatalog), with where their first and last samples
  // stand in the merge.
  struct CounterMerge {
    CounterTotals totals;
    MergePlace first, last;
    double sum = 0;
  };
  std::map<std::tuple<SeriesKind, std::string, std::string>, CounterMerge> counters;
  for (const ThreadPass* joined_pass : joined) {
    const ThreadPass& pass = *joined_pass;
    if (!pass.in_order()) return std::nullopt;
    if (pass.seen() == 0) continue;
    totals.seen += pass.seen();
    totals.first = std::min(totals.first, pass.first());
    totals.last = std::max(totals.last, pass.last());
    totals.threads[pass.thread_id()] = pass.thread();
    for (const auto& [site, accumulator] : pass.spans()) totals.spans[span_key(trace, site)].merge(accumulator);
    const reader::PairingProblems& found = pass.problems();
    if (found.unmatched_ends > 0) {
      const MergePlace place{found.first_unmatched_ticks, pass.first_unmatched_stream()};
      if (problems.unmatched_ends == 0 || place < first_unmatched) {
        first_unmatched = place;
        problems.first_unmatched_site = found.first_unmatched_site;
        problems.first_unmatched_ticks = found.first_unmatched_ticks;
        problems.first_unmatched_thread = found.first_unmatched_thread;
      }
      problems.unmatched_ends += found.unmatched_ends;
    }
    problems.out_of_order_ends += found.out_of_order_ends;
    for (size_t series = 0; series < pass.counters().size(); ++series) {
      const CounterPart& part = pass.counters()[series];
      if (!part.exact) return std::nullopt;
      const SeriesInfo& info = pass.series()[series];
      const MergePlace first{part.values.first_ticks, part.first_stream};
      const MergePlace last{part.values.last_ticks, part.last_stream};
      auto [entry, added] = counters.try_emplace({info.kind, info.category, info.name});
      CounterMerge& merged = entry->second;
      CounterAccumulator& values = merged.totals.values;
      if (added) {
        merged.totals.series = info;
        values = part.values;
        merged.first = first;
        merged.last = last;
      } else {
        values.add_count_and_extremes(part.values);
        if (first < merged.first) {
          merged.first = first;
          values.first = part.values.first;
          values.first_ticks = part.values.first_ticks;
        }
        if (merged.last < last) {
          merged.last = last;
          values.last = part.values.last;
          values.last_ticks = part.values.last_ticks;
        }
      }
      merged.sum += part.sum;
    }
  }
  for (auto& [key, merged] : counters) {
    if (merged.totals.series.kind == SeriesKind::increments) {
      // The running total goes up from the first increment to the sum of them all.
      if (merged.sum >= kExactSums) return std::nullopt;
      CounterAccumulator& values = merged.totals.values;
      values.min = values.first;
      values.max = values.last = merged.sum;
    }
    totals.counters.push_back(std::move(merged.totals));
  }
  totals.pairing_problems = problems;
  return totals;
}

}  // namespace profile_internal
}  // namespace chronicle::analysis
