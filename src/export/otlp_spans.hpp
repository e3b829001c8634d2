// The spans OTLP gets from a trace, as plain data: one producer walks each trace once and hands
// every span (thread spans and task lifecycles) to a sink, which encodes it (OTLP/JSON text for
// the file export, OTLP protobuf or JSON requests for the push). What a span is made of (its
// ids, parent, kind, attributes, events, links, status) is decided here and only here.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "export/export_common.hpp"
#include "reader/messages.hpp"

namespace chronicle::exports {

using OtlpTraceId = std::array<uint8_t, 16>;

// An attribute value: OTLP's AnyValue, restricted to the types chronicle writes.
struct OtlpAttribute {
  enum class Type { string, integer, boolean, real };
  std::string key;
  Type type = Type::string;
  std::string text;    // a string's
  int64_t number = 0;  // an integer's; a boolean's as 0 or 1
  double real = 0;     // a double's
};

struct OtlpEvent {
  int64_t unix_ns = 0;
  std::string name;
  std::vector<OtlpAttribute> attributes;
};

struct OtlpLink {
  OtlpTraceId trace_id{};
  uint64_t span_id = 0;
  std::vector<OtlpAttribute> attributes;
};

struct OtlpStatus {
  int code = 0;  // OTLP's StatusCode: 0 unset, 1 ok, 2 error
  std::string message;
};

struct OtlpSpan {
  OtlpTraceId trace_id{};
  uint64_t span_id = 0;
  uint64_t parent_span_id = 0;  // 0: a root span
  std::string name;
  int kind = 1;  // OTLP's SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer
  int64_t start_unix_ns = 0;
  int64_t end_unix_ns = 0;
  std::vector<OtlpAttribute> attributes;
  std::vector<OtlpEvent> events;
  uint64_t dropped_events = 0;
  std::vector<OtlpLink> links;
  std::optional<OtlpStatus> status;
  std::string trace_state;  // W3C tracestate, as the trace's remote parent sent it; empty: none
  // The instrumentation scope: a thread span's category; "chronicle" for tasks, sends and receives.
  std::string scope = "chronicle";
  // A task's lifecycle (its links are always written in OTLP/JSON, empty or not), else a span
  // of a thread.
  bool task = false;
};

// A process: OTLP's Resource. Its spans go in ScopeSpans by their scope (OtlpSpan::scope).
struct OtlpResource {
  std::vector<OtlpAttribute> attributes;
};

// Where the producer hands the spans, in this order per trace: begin_resource, span..., end_resource.
// A span is valid only during the call (the producer reuses it).
class OtlpSpanSink {
 public:
  virtual ~OtlpSpanSink() = default;
  virtual void begin_resource(const OtlpResource& resource) = 0;
  virtual void span(const OtlpSpan& span) = 0;
  virtual void end_resource() = 0;
};

// Walks every trace once (its task graph first, then its events) and hands its spans to `sink`:
// thread spans as they end, then one span per task. Throws reader::TraceError on malformed input
// and whatever the sink throws.
void produce_otlp_spans(const std::vector<reader::Trace>& traces, OtlpSpanSink& sink, ProgressCounter& progress);

// The same rules for a trace read in rounds while it is written (otlp_live.hpp): each round
// hands out the spans that ended in it; the pairing and the open spans carry on to the next.
class OtlpLiveSpanProducer {
 public:
  OtlpLiveSpanProducer();
  ~OtlpLiveSpanProducer();
  // A round over `trace` (the directory read again, or the finished trace for the last round).
  void begin_round(const reader::Trace& trace, OtlpSpanSink& sink);
  // The round's events in time order; pairs each as Trace::for_each_event does.
  void follow(reader::Event& event);
  void end_round();
  // Instead of end_round() after the last round: what is still open, then one span per task of
  // `graph` (the finished trace's).
  void finish(const model::TaskGraph& graph);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Hex text of ids, as the OTLP JSON encoding writes them.
std::string otlp_hex(const OtlpTraceId& trace_id);

}  // namespace chronicle::exports
