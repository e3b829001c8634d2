// The enabled paths of the trace point macros that are called out of line (writer.hpp): the
// inline hot path's code, compiled once here instead of at every site. Scoped spans stay inline
// (writer.hpp, end_span).
#include <fmt/format.h>

#include "chronicle/detail/writer.hpp"

namespace chronicle::detail {

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
