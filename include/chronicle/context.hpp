// A W3C Trace Context (https://www.w3.org/TR/trace-context/, the Level 1 Recommendation): the ids
// that tie this process's work to a distributed trace, read from and written to the
// `traceparent` and `tracestate` headers.
//
//   std::optional<chronicle::TraceContext> ctx = chronicle::TraceContext::parse(header);
//   if (!ctx) ctx = chronicle::TraceContext::new_trace();   // restart the trace
//   chronicle::TraceContext outgoing = ctx->child();         // same trace, a new span id
//   request.set("traceparent", outgoing.traceparent());
//
// TraceContext is plain data. The functions after it tie the process's work to traces:
//
//   std::string wire = chronicle::send_traceparent();  // records a send; put it on the message
//   chronicle::ReceiveScope scope(wire);               // records the receive; work here continues it
//   chronicle::TraceContext now = chronicle::current_context();
//
// Tasks carry the context they were created in: a chronicle::task and an Asio handler continue
// their creator's trace wherever they resume. All of it stays available with CHRONICLE_DISABLE
// (contexts then propagate and nothing is recorded). Ids are made without coordination: no lock
// and no system call per id (see new_trace()). send_traceparent(), inject() and ReceiveScope build
// strings: they allocate, so they are not for signal handlers.
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

// The context of the work in scope: of the current task (a chronicle::task or Asio handler, which
// carry one), or of the innermost ReceiveScope; its span id is that task's or receive's span.
// Outside both, a thread's outermost open span (begun outside any task) is the root of a trace:
// the context is that span's (its trace id and span id, as every export shows them). With none of
// these, nothing is in scope and the result is not valid().
TraceContext current_context();

// Records a send (a span of kind CLIENT/PRODUCER, a child of the innermost open span, or of the
// current task) and returns the traceparent to put on the message: the context in scope with the
// send's span id. Outside any task and ReceiveScope, the sends inside a thread's outermost open
// span all continue that span's trace (one trace per request: `CHRONICLE_SPAN("client",
// "request")` and the sends in it); with no span open either, a new trace starts at the send.
// Works with no session running (then nothing is recorded and the context still propagates).
std::string send_traceparent();

// Work in the scope handles a received message: records the receive (a span of kind
// SERVER/CONSUMER, a child of the sender's span) and makes its context the one in scope, so spans
// and tasks created here continue the sender's trace. A missing or malformed traceparent starts a
// new trace (continued() says which; why() says why).
class ReceiveScope {
 public:
  explicit ReceiveScope(std::string_view traceparent, std::string_view tracestate = {});
  explicit ReceiveScope(const TraceContext& sender);
  ~ReceiveScope();
  ReceiveScope(const ReceiveScope&) = delete;
  ReceiveScope& operator=(const ReceiveScope&) = delete;

  // The receive's own context (its span id is the receive's span).
  const TraceContext& context() const { return context_; }
  bool continued() const { return continued_; }
  std::string_view why() const { return why_; }

 protected:
  struct NewTrace {
    bool sampled;
  };
  explicit ReceiveScope(NewTrace start);

 private:
  void open(const std::optional<TraceContext>& sender, bool sampled = true);
  TraceContext context_;
  bool continued_ = false;
  std::string_view why_;
  void* slot_ = nullptr;  // the slot it changed, restored as it was
  // When that slot is a thread's own (not a task's): that thread's state, so that a scope closed
  // on another thread (a coroutine type that carries no context) never writes it.
  const void* owning_thread_ = nullptr;
  alignas(8) unsigned char saved_slot_[48] = {};  // the slot as it was (detail::ContextSlot)
  uint32_t generation_ = 0;                       // the session it recorded the receive in; 0: none
};

// Work in the scope is a trace of its own, whatever context is around it (a background job begun
// while serving a request, a batch step, a request a thread makes inside another's span): its
// spans, sends and tasks belong to a new trace whose root is the scope, recorded as a receive
// with no parent (a SERVER span with no parent in the exports). When it ends, the context around
// it is back. To continue a trace that came with a message instead: ReceiveScope.
class NewTraceScope : public ReceiveScope {
 public:
  explicit NewTraceScope(bool sampled = true) : ReceiveScope(NewTrace{sampled}) {}
};

// Header maps (std::map<std::string, std::string>, httplib::Headers, ...): `inject` records a send
// and sets "traceparent"; `extract` reads "traceparent" and "tracestate" back, for a ReceiveScope.
// A received tracestate is carried on: `inject` sets "tracestate" to the one in scope, if any.
template <typename Headers>
void inject(Headers& headers) {
  headers.erase("traceparent");
  headers.erase("tracestate");
  headers.emplace("traceparent", send_traceparent());
  std::string tracestate = current_context().tracestate;
  if (!tracestate.empty()) headers.emplace("tracestate", std::move(tracestate));
}
template <typename Headers>
std::optional<TraceContext> extract(const Headers& headers) {
  const auto parent = headers.find("traceparent");
  if (parent == headers.end()) return std::nullopt;
  const auto state = headers.find("tracestate");
  return TraceContext::parse(parent->second,
                             state == headers.end() ? std::string_view{} : std::string_view(state->second));
}

}  // namespace chronicle
