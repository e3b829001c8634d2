#include "export/otlp_json.hpp"

#include <fmt/format.h>
#include <cmath>

namespace chronicle::exports {

using namespace std::string_view_literals;

OtlpIds::OtlpIds(const std::array<uint8_t, 16>& trace_uuid) : trace_id_bytes_(trace_uuid) {
  trace_id_ = otlp_hex(trace_uuid);
  for (size_t i = 0; i < 8; ++i) salt_ = salt_ << 8 | trace_uuid[i];
}

uint64_t OtlpIds::mix(uint64_t key) const {
  // SplitMix64's finalizer: a bijection on 64-bit values, so distinct keys keep distinct ids.
  uint64_t x = key ^ salt_;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  // OTLP reads an all-zero span id as "none"; one key in 2^64 lands there.
  return x == 0 ? 1 : x;
}

namespace {

// A list of OTLP KeyValue objects: "attributes":[...].
void append_attributes(std::string& out, const std::vector<OtlpAttribute>& attributes) {
  out += "\"attributes\":["sv;
  bool first = true;
  for (const OtlpAttribute& attribute : attributes) {
    out += first ? "{\"key\":"sv : ",{\"key\":"sv;
    first = false;
    append_json_string(out, attribute.key);
    out += ",\"value\":"sv;
    switch (attribute.type) {
      case OtlpAttribute::Type::string:
        out += "{\"stringValue\":"sv;
        append_json_string(out, attribute.text);
        out += "}}"sv;
        break;
      case OtlpAttribute::Type::integer:
        // int64 values are strings in the JSON encoding (as in protobuf's JSON mapping).
        out += "{\"intValue\":\""sv;
        append_decimal(out, attribute.number);
        out += "\"}}"sv;
        break;
      case OtlpAttribute::Type::boolean:
        out += attribute.number != 0 ? "{\"boolValue\":true}}"sv : "{\"boolValue\":false}}"sv;
        break;
      case OtlpAttribute::Type::real:
        // Protobuf's JSON mapping: a number, or a string for what JSON numbers cannot say.
        out += "{\"doubleValue\":"sv;
        if (std::isfinite(attribute.real))
          fmt::format_to(std::back_inserter(out), "{}", attribute.real);
        else
          out += std::isnan(attribute.real) ? "\"NaN\""sv : attribute.real > 0 ? "\"Infinity\""sv : "\"-Infinity\""sv;
        out += "}}"sv;
        break;
    }
  }
  out += ']';
}

void append_events(std::string& out, const OtlpSpan& span) {
  out += ",\"events\":["sv;
  bool first = true;
  for (const OtlpEvent& event : span.events) {
    out += first ? "{\"timeUnixNano\":\""sv : ",{\"timeUnixNano\":\""sv;
    append_decimal(out, event.unix_ns);
    out += "\",\"name\":"sv;
    first = false;
    append_json_string(out, event.name);
    out += ',';
    append_attributes(out, event.attributes);
    out += '}';
  }
  out += ']';
  if (span.dropped_events > 0)
    fmt::format_to(std::back_inserter(out), ",\"droppedEventsCount\":{}", span.dropped_events);
}

void append_links(std::string& out, const OtlpSpan& span) {
  out += ",\"links\":["sv;
  bool first = true;
  for (const OtlpLink& link : span.links) {
    out += first ? "{\"traceId\":\""sv : ",{\"traceId\":\""sv;
    first = false;
    append_hex_bytes(out, link.trace_id);
    out += "\",\"spanId\":\""sv;
    append_hex64(out, link.span_id);
    out += "\","sv;
    append_attributes(out, link.attributes);
    out += '}';
  }
  out += ']';
}

}  // namespace

void append_otlp_json_resource(std::string& out, const OtlpResource& resource, bool first) {
  out += first ? "\n{\"resource\":{"sv : ",\n{\"resource\":{"sv;
  append_attributes(out, resource.attributes);
  out += "},\"scopeSpans\":["sv;
}

void append_otlp_json_resource_end(std::string& out, std::string& open_scope) {
  if (!open_scope.empty()) out += "]}"sv;
  open_scope.clear();
  out += "]}"sv;
}

void append_otlp_json_span(std::string& out, const OtlpSpan& span, std::string& open_scope) {
  const bool first = open_scope != span.scope;
  if (first) {
    out += open_scope.empty() ? "{\"scope\":{\"name\":"sv : "]},{\"scope\":{\"name\":"sv;
    append_json_string(out, span.scope);
    out += "},\"spans\":["sv;
    open_scope = span.scope;
  }
  out += first ? "\n{\"traceId\":\""sv : ",\n{\"traceId\":\""sv;
  append_hex_bytes(out, span.trace_id);
  out += "\",\"spanId\":\""sv;
  append_hex64(out, span.span_id);
  out += '"';
  if (!span.trace_state.empty()) {
    out += ",\"traceState\":"sv;
    append_json_string(out, span.trace_state);
  }
  if (span.parent_span_id != 0) {
    out += ",\"parentSpanId\":\""sv;
    append_hex64(out, span.parent_span_id);
    out += '"';
  }
  out += ",\"name\":"sv;
  append_json_string(out, span.name);
  out += ",\"kind\":"sv;
  append_decimal(out, span.kind);
  out += ",\"startTimeUnixNano\":\""sv;
  append_decimal(out, span.start_unix_ns);
  out += "\",\"endTimeUnixNano\":\""sv;
  append_decimal(out, span.end_unix_ns);
  out += "\","sv;
  append_attributes(out, span.attributes);
  append_events(out, span);
  // A task's links are written even when it has none, as they always were.
  if (span.task || !span.links.empty()) append_links(out, span);
  if (span.status) {
    fmt::format_to(std::back_inserter(out), ",\"status\":{{\"code\":{},\"message\":", span.status->code);
    append_json_string(out, span.status->message);
    out += '}';
  }
  out += '}';
}

namespace {

// The file export: one request, every resource of the record run in it.
class OtlpJsonFileSink final : public OtlpSpanSink {
 public:
  explicit OtlpJsonFileSink(OutputFile& out) : out_(out) {}
  void begin_resource(const OtlpResource& resource) override {
    append_otlp_json_resource(out_.buffer(), resource, first_resource_);
    first_resource_ = false;
  }
  void span(const OtlpSpan& span) override {
    append_otlp_json_span(out_.buffer(), span, open_scope_);
    out_.flush_if_large();
  }
  void end_resource() override { append_otlp_json_resource_end(out_.buffer(), open_scope_); }

 private:
  OutputFile& out_;
  bool first_resource_ = true;
  std::string open_scope_;
};

}  // namespace

void export_otlp_json(const std::vector<reader::Trace>& traces, const std::string& path, const ExportOptions& options) {
  ProgressCounter progress(options);
  OutputFile out(path, options.when_exists);
  out.write("{\"resourceSpans\":[");
  OtlpJsonFileSink sink(out);
  produce_otlp_spans(traces, sink, progress);
  out.write("\n]}\n");
  out.close();
}

}  // namespace chronicle::exports
