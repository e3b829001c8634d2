// A W3C Trace Context (https://www.w3.org/TR/trace-context/, the Level 1 Recommendation): the ids
// that tie this process's work to a distributed trace, read from and written to the
// `traceparent` and `tracestate` headers.
//
//   std::optional<chronicle::TraceContext> ctx = chronicle::TraceContext::parse(header);
//   if (!ctx) ctx = chronicle::TraceContext::new_trace();   // restart the trace
//   chronicle::TraceContext outgoing = ctx->child();         // same trace, a new span id
//   request.set("traceparent", outgoing.traceparent());
//
// Plain data: it does not touch the recorder, and stays available with CHRONICLE_DISABLE.
// Ids are made without coordination: no lock and no system call per id (see new_trace()).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace chronicle {

struct TraceContextParseResult;

struct TraceContext {
  using ParseResult = TraceContextParseResult;

  // "trace-flags": only the sampled bit is defined by the Level 1 specification.
  static constexpr uint8_t kSampledFlag = 0x01;

  std::array<uint8_t, 16> trace_id{};  // never all zero in a valid context
  std::array<uint8_t, 8> span_id{};    // the "parent-id" of the traceparent header; never all zero
  uint8_t flags = 0;
  std::string tracestate;  // carried through as received (empty: none)

  // The context a `traceparent` header (and its companion `tracestate`, when given) describes,
  // or nothing when the traceparent is malformed: then the caller restarts the trace. A
  // malformed tracestate never rejects the context; it is dropped (parse_with_reason says why).
  static std::optional<TraceContext> parse(std::string_view traceparent, std::string_view tracestate = {});
  // The same, and why a header was rejected, dropped or truncated.
  static ParseResult parse_with_reason(std::string_view traceparent, std::string_view tracestate = {});

  // A new trace: a fresh trace id and span id, sampled unless told otherwise (a recorder that
  // keeps every event has made a definitive recording decision; see "Sampled flag").
  static TraceContext new_trace(bool sampled = true);
  // The context for work this context's span starts (an outgoing request): the same trace id and
  // tracestate, a new span id, the sampled bit kept and the undefined flag bits cleared ("Mutating
  // the traceparent Field": update parent-id; "Other Flags": vendors MUST set those to zero).
  TraceContext child() const;

  // Version 00, always 55 characters, lowercase: "00-<trace-id>-<span-id>-<flags>". A context
  // parsed from a higher version is written as 00 ("Downgrade the version").
  std::string traceparent() const;
  std::string trace_id_hex() const;
  std::string span_id_hex() const;
  bool sampled() const { return (flags & kSampledFlag) != 0; }
  bool valid() const;  // neither id all zero

  friend bool operator==(const TraceContext&, const TraceContext&) = default;
};

struct TraceContextParseResult {
  std::optional<TraceContext> context;
  // Why the traceparent was rejected; empty when it was accepted.
  std::string_view error;
  // Empty when the tracestate was carried through as given (or none was given); otherwise why it
  // was dropped, or which entries were left out to fit the size limit.
  std::string tracestate_note;
};

// Checks a `tracestate` value against the specification's list grammar and limits. Returns
// the value to carry (the input without its surrounding whitespace, or whole entries left out
// when it is longer than 512 characters) or nothing with `why` set when it must be dropped.
std::optional<std::string> checked_tracestate(std::string_view tracestate, std::string& why);

}  // namespace chronicle
