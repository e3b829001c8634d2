// The hot path: what a trace point does when its session and category are on. Header-only so
// the compiler inlines it into the caller; everything rare goes through the out-of-line slow
// paths declared here and defined in src/recorder.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <exception>
#include <type_traits>

#include "chronicle/detail/context_state.hpp"
#include "chronicle/detail/layout.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define CHRONICLE_INLINE inline __attribute__((always_inline))

namespace chronicle::detail {

// One per trace point, constant-initialized, so touching it needs no guard variable.
struct Site {
  const char* category;
  const char* name;
  const char* file;
  uint32_t line;
  uint8_t kind;                 // format::SiteKind
  uint8_t level = 0;            // recorded while its category's state is above it (layout.hpp)
  std::atomic<uint32_t> id{0};  // 0 until interned in this process
  uint16_t category_index = 0;  // valid once id != 0 (id is stored with release)
};

// What the calling thread is doing with its session, read by stop() (which waits for
// kWritingEvents to end before it unmaps) and by a signal handler on the same thread (which
// drops its event when it finds the thread inside a trace point).
enum TracePointState : uint8_t {
  kOutsideTracePoint = 0,
  kWritingEvents = 1,  // touching the session's memory; never blocks
  kInSlowPath = 2,     // holds or waits for the registry lock; revalidates the session under it
};

// The calling thread's write position in its channel. Trivial, so thread_local needs no guard.
// With no open packet (no channel, or a reused channel whose next slot is not free yet) pos and
// end are both null, so every event takes the slow path.
struct ThreadWriter {
  uint8_t* pos;
  uint8_t* end;
  format::PacketHeader* packet;
  uint64_t last_ticks;
  uint32_t generation;  // the session this state belongs to; 0: none
  uint32_t channel;
  uint32_t events_in_packet;
  std::atomic<uint8_t> state;               // TracePointState; never copied or reset with the rest
  uint32_t releases_seen;                   // without a channel: the session's channel releases when it looked
  uint64_t discarded_published;             // the channel's discard count its last closed packet carries
  format::CategoryCounts* category_counts;  // the channel's row (layout.hpp); null without a channel
  // Spans of this thread open outside any task (begun written, not yet ended), and the begin
  // time of the outermost: the root of the trace its sends start (implicit_thread_context).
  uint32_t open_thread_spans;
  uint64_t outer_span_ticks;
  // The C++ runtime's count of this thread's exceptions in flight (what std::uncaught_exceptions
  // returns, read without a call into another shared object), or null where its place is not
  // known (src/recorder/exception_count.cpp). Kept across sessions: it lives as long as the thread.
  const unsigned* exceptions_in_flight;
};

// 0 when no session runs; otherwise the running session's generation. Trace points test this
// and nothing else when tracing is off. It is loaded with acquire (a plain load on x86), which
// publishes what start() set before it stored the generation (the session, the category flags,
// the clock choice).
extern std::atomic<uint32_t> g_generation;
extern std::atomic<uint8_t> g_category_state[format::kMaxCategories];  // format::kCategoryOff, or level + 1
extern std::atomic<bool> g_clock_is_tsc;
extern thread_local constinit ThreadWriter t_writer __attribute__((tls_model("initial-exec")));

// Slow paths.
bool attach_thread(ThreadWriter& writer, uint32_t generation);
// `category`: the event's, whose discard it counts when it finds no room.
bool switch_packet(ThreadWriter& writer, uint16_t category, uint64_t ticks, size_t needed);
uint32_t intern_site(Site& site);
uint64_t read_monotonic_ns();
// Counts an event dropped because this thread was already inside a trace point (a signal
// handler interrupted it): atomically, as the interrupted code may be updating the same count.
// `category` is the event's, or format::kNoCategory before it is known. Counted under the guard
// stop() waits for before it unmaps (src/recorder/session.cpp, "Trace points and stop()").
void count_nested_drop(ThreadWriter& writer, uint16_t category);
// Counts `events` more lost events of an EventGroup as its first was counted: a nested drop, or
// no room in the channel (or no channel) of `generation`'s session. Called inside the trace point.
void count_group_drops(ThreadWriter& writer, uint32_t generation, uint16_t category, uint32_t events, bool nested);

CHRONICLE_INLINE uint64_t read_ticks() {
#if defined(__x86_64__) || defined(__i386__)
  if (g_clock_is_tsc.load(std::memory_order_relaxed)) [[likely]]
    return __rdtsc();
#endif
  return read_monotonic_ns();
}

// Ready to write to this thread's channel, and the site's category is on at the site's level.
CHRONICLE_INLINE ThreadWriter* writer_for(Site& site, uint32_t generation) {
  uint32_t id = site.id.load(std::memory_order_acquire);
  if (id == 0) [[unlikely]] {
    if (intern_site(site) == 0) return nullptr;
  }
  if (g_category_state[site.category_index].load(std::memory_order_relaxed) <= site.level) return nullptr;
  ThreadWriter& writer = t_writer;
  if (writer.generation != generation) [[unlikely]] {
    if (!attach_thread(writer, generation)) return nullptr;
  }
  return &writer;
}

// The nesting guard and the session check of every event (the protocol is in
// src/recorder/session.cpp, "Trace points and stop()"). A signal handler that finds its thread
// already inside a trace point drops its event and counts it; a writer that finds the session
// stopped since it looked writes nothing.
CHRONICLE_INLINE bool enter_trace_point(ThreadWriter& writer, uint16_t category) {
  if (writer.state.load(std::memory_order_relaxed) != kOutsideTracePoint) [[unlikely]] {
    count_nested_drop(writer, category);
    return false;
  }
  writer.state.store(kWritingEvents, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (g_generation.load(std::memory_order_relaxed) != writer.generation) [[unlikely]] {
    writer.state.store(kOutsideTracePoint, std::memory_order_release);
    return false;
  }
  return true;
}

CHRONICLE_INLINE void leave_trace_point(ThreadWriter& writer) {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  writer.state.store(kOutsideTracePoint, std::memory_order_release);
}

// Enters the trace point, writes the event header and returns where the payload goes, or
// nullptr when the event is dropped (stream policy with the collector behind, a nested event,
// no channel), having left the trace point again. A non-null result is followed by
// commit_event(), which leaves it. `category` is the trace point's (Site::category_index).
CHRONICLE_INLINE uint8_t* begin_event(ThreadWriter& writer, uint16_t category, uint32_t event_id, size_t payload_size,
                                      uint64_t& ticks) {
  if (!enter_trace_point(writer, category)) return nullptr;
  // Ticks of one thread never go backwards in its stream, whatever core it runs on.
  if (ticks < writer.last_ticks) ticks = writer.last_ticks;
  bool compact = format::takes_compact_header(event_id, ticks - writer.last_ticks);
  size_t needed = (compact ? format::kCompactHeaderSize : format::kExtendedHeaderSize) + payload_size;
  if (needed > static_cast<size_t>(writer.end - writer.pos)) [[unlikely]] {
    if (!switch_packet(writer, category, ticks, needed)) {
      leave_trace_point(writer);
      return nullptr;
    }
    compact = event_id < format::kExtendedId;  // a new packet starts at this event's time
  }
  return format::write_event_header(writer.pos, compact, event_id, ticks);
}

// Publishes the `events` events written since the last commit (one, or an EventGroup's, all at
// `ticks`): end time first, then the size that makes them visible (release; step 6 of
// ring_protocol.md), so a reader in another process never sees a torn event or an end time
// before its last event. The category's
// counts go first: they are the monitor's figures, not what publishes the events. `category` is
// the one begin_event() was given. Leaves the trace point.
CHRONICLE_INLINE void commit_events(ThreadWriter& writer, uint16_t category, uint8_t* events_end, uint64_t ticks,
                                    uint32_t events) {
  format::CategoryCounts& counts = writer.category_counts[category];
  counts.events.store(counts.events.load(std::memory_order_relaxed) + events, std::memory_order_relaxed);
  counts.bytes.store(counts.bytes.load(std::memory_order_relaxed) + static_cast<uint64_t>(events_end - writer.pos),
                     std::memory_order_relaxed);
  writer.pos = events_end;
  writer.last_ticks = ticks;
  writer.events_in_packet += events;
  writer.packet->timestamp_end.store(ticks, std::memory_order_relaxed);
  writer.packet->content_size_bits.store(
      static_cast<uint64_t>(events_end - reinterpret_cast<uint8_t*>(writer.packet)) * 8, std::memory_order_release);
  leave_trace_point(writer);
}

CHRONICLE_INLINE void commit_event(ThreadWriter& writer, uint16_t category, uint8_t* event_end, uint64_t ticks) {
  commit_events(writer, category, event_end, ticks, 1);
}

// Events of one category that happen at one instant (one clock read), written as one: one entry
// into the trace point, one check for room (for kMaxBytes, the most the group writes), one
// commit, so a reader sees all of them or none. The bytes are those the events would take written
// one by one with begin_event(): the first header compact when the time since the thread's last
// event allows it, the others compact when their id does (no time passes between them).
//
// A group that finds no room (the stream's collector is behind, no channel) or finds its thread
// already inside a trace point (a signal handler) drops all its events and counts each. From the
// first add() to commit() the thread is inside the trace point: nothing there may block or take
// a lock (stop() waits for the thread to leave; a signal handler's events are dropped and counted
// meanwhile), so callers compute what they write before the first add().
template <size_t kMaxBytes>
class EventGroup {
  static_assert(kMaxBytes + format::kPacketHeaderSize <= 1024, "a group fits the smallest packet");

 public:
  // `writer` may be null for a group that writes nothing (tracing off): it is used at the first add().
  // `max_bytes` (at most kMaxBytes): the most this group writes, when the caller knows it better.
  CHRONICLE_INLINE EventGroup(ThreadWriter* writer, uint16_t category, uint64_t ticks, size_t max_bytes = kMaxBytes)
      : writer_(writer),
        category_(category),
        ticks_(ticks),
        max_bytes_(max_bytes < kMaxBytes ? max_bytes : kMaxBytes) {}
  EventGroup(const EventGroup&) = delete;
  EventGroup& operator=(const EventGroup&) = delete;
  CHRONICLE_INLINE ~EventGroup() {
    if (state_ != State::idle) [[unlikely]]  // a group never added to (tracing off) has nothing to do
      commit();
  }

  // Writes the event's header and returns where its `payload_size` bytes go, or nullptr when
  // the event is dropped (counted). `events`: how many events it counts as (a compound event's,
  // format::events_of), written or lost.
  CHRONICLE_INLINE uint8_t* add(uint32_t event_id, size_t payload_size, uint32_t events = 1) {
    if (state_ == State::idle) {
      open();
      if (state_ != State::open) {  // open() counted one event's loss; the rest are the commit's
        if (state_ != State::stopped) dropped_ += events - 1;
        return nullptr;
      }
    } else if (state_ != State::open || pos_ + format::kExtendedHeaderSize + payload_size > room_end_) [[unlikely]] {
      dropped_ += events;
      return nullptr;
    }
    const bool compact = event_id < format::kExtendedId && (written_ > 0 || first_compact_);
    uint8_t* payload = format::write_event_header(pos_, compact, event_id, ticks_);
    pos_ = payload + payload_size;
    written_ += events;
    return payload;
  }

  // Opens the group only when nothing stands in the way: the thread is outside any trace point,
  // its session is the current one and its packet has room for `max_bytes`. Otherwise it writes
  // and counts nothing, leaves the group done, and returns false: the caller starts over with a
  // group that add()s, whose open() switches packets and counts what it must drop. For writers
  // that know every event of the group up front (add_within_room only): their common case
  // without a call.
  CHRONICLE_INLINE bool open_if_room() {
    ThreadWriter& writer = *writer_;
    state_ = State::done;
    if (writer.state.load(std::memory_order_relaxed) != kOutsideTracePoint) [[unlikely]]
      return false;
    writer.state.store(kWritingEvents, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    // Inside the trace point: a signal handler's events no longer move `pos` under this check.
    if (g_generation.load(std::memory_order_relaxed) != writer.generation ||
        max_bytes_ > static_cast<size_t>(writer.end - writer.pos)) [[unlikely]] {
      leave_trace_point(writer);
      return false;
    }
    generation_ = writer.generation;
    if (ticks_ < writer.last_ticks) ticks_ = writer.last_ticks;  // a thread's times never go back
    first_compact_ = ticks_ - writer.last_ticks <= format::kCompactTimestampMask;
    take_room();
    return true;
  }

  // add() for an event the group's room was made for, after an add() that returned non-null or
  // open_if_room() that returned true: the group is open and `max_bytes` counted this event (with
  // an extended header), so neither is checked again. Its header is compact when its id allows
  // and, for the group's first event, when the time since the thread's last event does.
  CHRONICLE_INLINE uint8_t* add_within_room(uint32_t event_id, size_t payload_size) {
    const bool compact = event_id < format::kExtendedId && (written_ > 0 || first_compact_);
    uint8_t* payload = format::write_event_header(pos_, compact, event_id, ticks_);
    pos_ = payload + payload_size;
    ++written_;
    return payload;
  }

  // Publishes what was added and counts what was dropped; the group is done.
  CHRONICLE_INLINE void commit() {
    if (state_ == State::open) [[likely]] {
      if (dropped_ != 0) [[unlikely]]  // past kMaxBytes: a caller's mistake, counted all the same
        count_group_drops(*writer_, generation_, category_, dropped_, false);
      commit_events(*writer_, category_, pos_, ticks_, written_);
    } else if (state_ == State::no_room || state_ == State::nested) [[unlikely]] {
      if (dropped_ != 0) count_group_drops(*writer_, generation_, category_, dropped_, state_ == State::nested);
      if (state_ == State::no_room) leave_trace_point(*writer_);
    }
    state_ = State::done;
  }

 private:
  enum class State : uint8_t { idle, open, nested, no_room, stopped, done };

  // Enters the trace point and makes room for the whole group. On failure the first event is
  // counted here (as begin_event() would count it) and the others at commit().
  CHRONICLE_INLINE void open() {
    generation_ = writer_->generation;
    const bool nested = writer_->state.load(std::memory_order_relaxed) != kOutsideTracePoint;
    if (!enter_trace_point(*writer_, category_)) {  // counts this event when nested
      state_ = nested ? State::nested : State::stopped;
      return;
    }
    if (ticks_ < writer_->last_ticks) ticks_ = writer_->last_ticks;  // a thread's times never go back
    first_compact_ = ticks_ - writer_->last_ticks <= format::kCompactTimestampMask;
    if (max_bytes_ > static_cast<size_t>(writer_->end - writer_->pos)) [[unlikely]] {
      if (!switch_packet(*writer_, category_, ticks_, max_bytes_)) {  // counts this event
        state_ = State::no_room;  // still inside the trace point: the others are counted at commit()
        return;
      }
      first_compact_ = true;  // a new packet starts at this instant
    }
    take_room();
  }

  // The group's room starts at the packet's end: it is open.
  CHRONICLE_INLINE void take_room() {
    pos_ = writer_->pos;
    room_end_ = pos_ + max_bytes_;
    state_ = State::open;
  }

  ThreadWriter* writer_;
  uint32_t generation_ = 0;  // the writer's session when the group opened
  uint16_t category_;
  State state_ = State::idle;
  bool first_compact_ = false;
  uint32_t written_ = 0;
  uint32_t dropped_ = 0;
  uint64_t ticks_;
  size_t max_bytes_;
  uint8_t* pos_ = nullptr;
  uint8_t* room_end_ = nullptr;
};

enum class Emitted : uint8_t { off, written, dropped };

// `event` of `site` by `writer`, which writer_for() gave for a site of the same category; `site`
// is interned.
CHRONICLE_INLINE Emitted emit_name_by(ThreadWriter* writer, Site& site, format::EventId event) {
  uint64_t ticks = read_ticks();
  uint8_t* out =
      begin_event(*writer, site.category_index, static_cast<uint32_t>(event), sizeof(format::NamePayload), ticks);
  if (!out) return Emitted::dropped;
  const format::NamePayload payload{site.id.load(std::memory_order_relaxed)};
  std::memcpy(out, &payload, sizeof payload);
  commit_event(*writer, site.category_index, out + sizeof payload, ticks);
  return Emitted::written;
}

CHRONICLE_INLINE Emitted emit_with_name(Site& site, uint32_t generation, format::EventId event) {
  ThreadWriter* writer = writer_for(site, generation);
  if (!writer) return Emitted::off;
  return emit_name_by(writer, site, event);
}

// A span begun (written) on this thread: outside any task, it may be the root of a trace
// (format::derived_root_trace_id), whose begin time is the one just written.
CHRONICLE_INLINE void note_span_begun() {
  if (t_context.current != nullptr) return;  // a task's span: the task carries its context
  ThreadWriter& writer = t_writer;
  if (writer.open_thread_spans++ == 0) writer.outer_span_ticks = writer.last_ticks;
}
CHRONICLE_INLINE void note_span_ending(ThreadWriter& writer) {
  if (t_context.current == nullptr && writer.open_thread_spans != 0) --writer.open_thread_spans;
}

// Counts one more discarded event on this thread's channel without writing anything: the end of
// a span whose begin was dropped, so that the discarded count covers both halves.
void count_discarded(uint32_t generation, uint16_t category);

// The end of a span begun at `site`: on the thread it ends on, which for a coroutine resumed
// elsewhere is not the one it began on (so this thread may have to attach first). Written even
// if the site's category was switched off since the begin, which must not stay open.
CHRONICLE_INLINE void emit_span_end(Site& site, uint32_t generation) {
  ThreadWriter& writer = t_writer;
  note_span_ending(writer);
  if (writer.generation != generation) [[unlikely]] {
    if (!attach_thread(writer, generation)) return;  // the session ended, or no channel (counted)
  }
  uint64_t ticks = read_ticks();
  uint8_t* out = begin_event(writer, site.category_index, static_cast<uint32_t>(format::EventId::span_end),
                             sizeof(format::NamePayload), ticks);
  if (!out) return;
  const format::NamePayload payload{site.id.load(std::memory_order_relaxed)};
  std::memcpy(out, &payload, sizeof payload);
  commit_event(writer, site.category_index, out + sizeof payload, ticks);
}

template <typename Value>
CHRONICLE_INLINE void emit_counter(Site& site, uint32_t generation, Value value) {
  ThreadWriter* writer = writer_for(site, generation);
  if (!writer) return;
  uint64_t ticks = read_ticks();
  if constexpr (std::is_floating_point_v<Value>) {
    const format::CounterFloatPayload payload{site.id.load(std::memory_order_relaxed), static_cast<double>(value)};
    uint8_t* out = begin_event(*writer, site.category_index, static_cast<uint32_t>(format::EventId::counter_float),
                               sizeof payload, ticks);
    if (!out) return;
    std::memcpy(out, &payload, sizeof payload);
    commit_event(*writer, site.category_index, out + sizeof payload, ticks);
  } else {
    const format::CounterPayload payload{site.id.load(std::memory_order_relaxed), static_cast<int64_t>(value)};
    uint8_t* out = begin_event(*writer, site.category_index, static_cast<uint32_t>(format::EventId::counter),
                               sizeof payload, ticks);
    if (!out) return;
    std::memcpy(out, &payload, sizeof payload);
    commit_event(*writer, site.category_index, out + sizeof payload, ticks);
  }
}

// The enabled paths of the trace point macros, out of line (src/recorder/trace_points.cpp, which
// compiles the inline code above once): a site holds the load of the generation, a test and a
// call, some bytes of text instead of a kilobyte. `generation` is the nonzero one the site loaded.
ThreadWriter* recorded_writer(Site& site, uint32_t generation);  // writer_for()
void emit_named_event(Site& site, uint32_t generation, format::EventId event);
void emit_span_begin_event(Site& site, uint32_t generation);  // CHRONICLE_SPAN_BEGIN
void emit_span_end_event(Site& site, uint32_t generation);    // CHRONICLE_SPAN_END
void emit_counter_value(Site& site, uint32_t generation, int64_t value);
void emit_counter_value(Site& site, uint32_t generation, double value);

// A counter's value as its event stores it: a floating-point number as a double, else an int64.
template <typename Value>
CHRONICLE_INLINE void emit_counter_at(Site& site, uint32_t generation, Value value) {
  if constexpr (std::is_floating_point_v<Value>)
    emit_counter_value(site, generation, static_cast<double>(value));
  else
    emit_counter_value(site, generation, static_cast<int64_t>(value));
}

// Free text: truncated to what one packet holds.
void emit_note(Site& site, uint32_t generation, const char* text, size_t length);

// An event whose payload is `fixed_size` bytes of fixed fields followed by a NUL-terminated
// string (embedded NULs become spaces; the text is cut to what one packet holds). For a writer
// that writer_for() returned.
void emit_with_text(ThreadWriter& writer, uint16_t category, format::EventId event, const void* fixed,
                    size_t fixed_size, const char* text, size_t length);

// Marks the innermost open span of `site`'s name failed: an exception is leaving its scope.
// (C++ gives a destructor no access to the exception in flight, so its what() is not known.)
void mark_span_unwound(Site& site);

// std::uncaught_exceptions(), in two loads where the runtime's count was found.
CHRONICLE_INLINE unsigned exceptions_in_flight(const ThreadWriter& writer) {
  if (writer.exceptions_in_flight != nullptr) [[likely]]
    return *writer.exceptions_in_flight;
  return static_cast<unsigned>(std::uncaught_exceptions());
}

// What the end of a scoped span needs to know of its begin.
struct SpanBegun {
  uint32_t generation = 0;  // 0: not recorded
  bool dropped = false;     // its end is not written either, but counted as discarded
  // Exceptions in flight at the begin: a span that begins and ends inside a destructor run by
  // unwinding is not failed by the exception passing by.
  unsigned exceptions = 0;

  CHRONICLE_INLINE void record(Emitted begin, uint32_t session) {
    if (begin != Emitted::off) generation = session;
    dropped = begin == Emitted::dropped;
    if (begin == Emitted::written) {
      note_span_begun();
      exceptions = exceptions_in_flight(t_writer);
    }
  }
};

// The end of a scoped span begun at `site`. An exception leaving the scope marks the span
// failed first. Scoped spans stay inline: out of line (one call for the begin, one for the end)
// a span took 43 ns instead of 32 at the median (docs/performance.md, "Code per trace point").
CHRONICLE_INLINE void end_span(Site& site, const SpanBegun& begun) {
  if (begun.generation != 0) [[unlikely]] {
    if (begun.dropped) {
      count_discarded(begun.generation, site.category_index);
      return;
    }
    if (exceptions_in_flight(t_writer) > begun.exceptions) [[unlikely]]
      mark_span_unwound(site);
    emit_span_end(site, begun.generation);
  }
}

class ScopedSpan {
 public:
  CHRONICLE_INLINE explicit ScopedSpan(Site& site) : site_(site) {
    const uint32_t generation = g_generation.load(std::memory_order_acquire);
    if (generation != 0) [[unlikely]]
      begun_.record(emit_with_name(site, generation, format::EventId::span_begin), generation);
  }
  CHRONICLE_INLINE ~ScopedSpan() { end_span(site_, begun_); }
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  Site& site_;
  SpanBegun begun_;
};

}  // namespace chronicle::detail
