// The enabled paths of the trace points that are called out of line (writer.hpp): the inline hot
// path's code, compiled once here instead of at every site.
#include <fmt/format.h>

#include "chronicle/detail/attributes.hpp"
#include "chronicle/detail/writer.hpp"

namespace chronicle::detail {
namespace {

// A name event of an interned `site` written with no call, so that the functions below need no
// frame on their common path: true when it is written; false, with nothing written or counted,
// when only the general way can (the clock is not the TSC, a signal handler's nested trace point,
// another session, no room left in the packet).
CHRONICLE_INLINE bool write_name_event_directly(ThreadWriter& writer, const Site& site, format::EventId event) {
#if defined(__x86_64__) || defined(__i386__)
  if (!g_clock_is_tsc.load(std::memory_order_relaxed) ||
      writer.state.load(std::memory_order_relaxed) != kOutsideTracePoint) [[unlikely]]
    return false;
  writer.state.store(kWritingEvents, std::memory_order_relaxed);  // enter_trace_point()'s protocol
  std::atomic_signal_fence(std::memory_order_seq_cst);
  uint64_t ticks = __rdtsc();
  if (g_generation.load(std::memory_order_relaxed) != writer.generation) [[unlikely]] {
    leave_trace_point(writer);
    return false;
  }
  if (ticks < writer.last_ticks) ticks = writer.last_ticks;
  const uint32_t id = static_cast<uint32_t>(event);
  const bool compact = format::takes_compact_header(id, ticks - writer.last_ticks);
  const size_t needed =
      (compact ? format::kCompactHeaderSize : format::kExtendedHeaderSize) + sizeof(format::NamePayload);
  if (needed > static_cast<size_t>(writer.end - writer.pos)) [[unlikely]] {
    leave_trace_point(writer);
    return false;
  }
  uint8_t* out = format::write_event_header(writer.pos, compact, id, ticks);
  const format::NamePayload payload{site.id.load(std::memory_order_relaxed)};
  std::memcpy(out, &payload, sizeof payload);
  commit_event(writer, site.category_index, out + sizeof payload, ticks);
  return true;
#else
  (void)writer, (void)site, (void)event;
  return false;
#endif
}

[[gnu::noinline]] SpanBegun begin_scoped_span_generally(Site& site, uint32_t generation) {
  SpanBegun begun;
  begun.record(emit_with_name(site, generation, format::EventId::span_begin), generation);
  return begun;
}

[[gnu::noinline]] void end_scoped_span_generally(Site& site, SpanBegun begun) {
  if (begun.dropped) {
    count_discarded(begun.generation, site.category_index);
    return;
  }
  if (exceptions_in_flight(t_writer) > begun.exceptions) [[unlikely]]
    mark_span_unwound(site);
  emit_span_end(site, begun.generation);
}

}  // namespace

// The common case (an interned site of a recorded category, this thread attached to the session,
// the C++ runtime's exception count found) written directly; anything else the general way.
SpanBegun begin_scoped_span(Site& site, uint32_t generation) {
  ThreadWriter& writer = t_writer;
  if (site.id.load(std::memory_order_acquire) == 0 || writer.generation != generation ||
      writer.exceptions_in_flight == nullptr) [[unlikely]]
    return begin_scoped_span_generally(site, generation);
  if (g_category_state[site.category_index].load(std::memory_order_relaxed) <= site.level) return {};
  if (!write_name_event_directly(writer, site, format::EventId::span_begin)) [[unlikely]]
    return begin_scoped_span_generally(site, generation);
  if (t_context.current == nullptr && writer.open_thread_spans++ == 0) writer.outer_span_ticks = writer.last_ticks;
  SpanBegun begun;
  begun.generation = generation;
  begun.exceptions = *writer.exceptions_in_flight;
  return begun;
}

SpanBegun span_begun(Emitted begin, uint32_t generation) {
  SpanBegun begun;
  begun.record(begin, generation);
  return begun;
}

DynamicSpanBegun begin_dynamic_span(ThreadWriter& writer, Site& category_site, uint32_t generation,
                                    std::string_view name) {
  // Of the category just checked; interned by dynamic_site() unless a signal handler found this
  // thread inside the registry (counted there). Acquire: the site's category index is set before
  // its id is (by whichever thread interned it).
  Site& site = dynamic_site(category_site, name);
  if (site.id.load(std::memory_order_acquire) == 0) [[unlikely]]
    return {};
  return {&site, span_begun(emit_name_by(&writer, site, format::EventId::span_begin), generation)};
}

void end_scoped_span(Site& site, SpanBegun begun) {
  ThreadWriter& writer = t_writer;
  if (begun.dropped || writer.generation != begun.generation || writer.exceptions_in_flight == nullptr ||
      *writer.exceptions_in_flight > begun.exceptions) [[unlikely]]
    return end_scoped_span_generally(site, begun);
  if (!write_name_event_directly(writer, site, format::EventId::span_end)) [[unlikely]]
    return end_scoped_span_generally(site, begun);
  note_span_ending(writer);
}

ThreadWriter* recorded_writer(Site& site, uint32_t generation) {
  return writer_for(site, generation);
}

void emit_named_event(Site& site, uint32_t generation, format::EventId event) {
  emit_with_name(site, generation, event);
}

void emit_span_begin_event(Site& site, uint32_t generation) {
  if (emit_with_name(site, generation, format::EventId::span_begin) == Emitted::written) note_span_begun();
}

void emit_span_end_event(Site& site, uint32_t generation) {
  if (writer_for(site, generation)) emit_span_end(site, generation);
}

void emit_counter_value(Site& site, uint32_t generation, int64_t value) {
  emit_counter(site, generation, value);
}

void emit_counter_value(Site& site, uint32_t generation, double value) {
  emit_counter(site, generation, value);
}

// Declared in chronicle.hpp, which a build with CHRONICLE_DISABLE reduces to nothing.
void emit_note_vformat(Site& site, uint32_t generation, fmt::string_view format, fmt::format_args args);
void emit_note_vformat(Site& site, uint32_t generation, fmt::string_view format, fmt::format_args args) {
  char text[1024];
  const auto result = fmt::vformat_to_n(text, sizeof text, format, args);
  emit_note(site, generation, text, result.size < sizeof text ? result.size : sizeof text);
}

}  // namespace chronicle::detail
