// The spans of an OTLP/JSON input as merge reads them (otlp_input.cpp), and how they are written
// as a chronicle trace (otlp_lanes.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/catalogue.hpp"
#include "format/trace_writer.hpp"

namespace chronicle::merge {

// OTLP's SpanKind values (format::OtlpSpanKind, which span_context records).
inline constexpr int kOtlpKindServer = static_cast<int>(format::OtlpSpanKind::server);
inline constexpr int kOtlpKindClient = static_cast<int>(format::OtlpSpanKind::client);
inline constexpr int kOtlpKindProducer = static_cast<int>(format::OtlpSpanKind::producer);
inline constexpr int kOtlpKindConsumer = static_cast<int>(format::OtlpSpanKind::consumer);

// An attribute as its event stores it: the attribute_* event, the value's bits (an int64 as its
// two's complement, a double as its bits, a bool 0 or 1) or its text.
struct InputAttribute {
  std::string key;
  format::EventId type = format::EventId::attribute_string;
  uint64_t bits = 0;
  std::string text;
};

// A span event: an instant inside its span, with its attributes.
struct InputEvent {
  uint64_t time = 0;  // Unix ns, within its span
  std::string name;
  std::vector<InputAttribute> attributes;
};

struct InputSpan {
  uint64_t trace_high = 0;
  uint64_t trace_low = 0;
  uint64_t id = 0;
  uint64_t parent = 0;
  int kind = 0;
  std::string name;
  std::string scope;
  uint64_t start = 0;  // Unix ns
  uint64_t end = 0;
  std::vector<InputAttribute> attributes;
  std::vector<InputEvent> events;  // by time
  bool failed = false;             // status code ERROR
  std::string status_message;
  std::string trace_state;
};

// Puts `spans` on lanes (the trace's threads) and writes their events there: each lane's spans
// nest, and each span's enclosing span on its lane is its parent. Times are Unix ns less `base_ns`.
void write_span_lanes(std::vector<InputSpan>& spans, format::TraceWriter& writer, uint64_t base_ns);

}  // namespace chronicle::merge
