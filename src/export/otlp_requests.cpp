#include "export/otlp_requests.hpp"

#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>

#include "export/otlp_json.hpp"

namespace chronicle::exports {

std::string_view otlp_protocol_name(OtlpProtocol protocol) {
  return protocol == OtlpProtocol::http_protobuf ? "http/protobuf" : "http/json";
}

std::string_view otlp_content_type(OtlpProtocol protocol) {
  return protocol == OtlpProtocol::http_protobuf ? "application/x-protobuf" : "application/json";
}

namespace {

// --- protobuf wire format -------------------------------------------------------------------
// Field numbers and wire types are opentelemetry-proto's (trace/v1/trace.proto,
// common/v1/common.proto, resource/v1/resource.proto, collector/trace/v1/trace_service.proto).

enum WireType : uint8_t { kVarint = 0, kFixed64 = 1, kLength = 2 };

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>(value | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void put_tag(std::string& out, uint32_t field, WireType type) {
  put_varint(out, field << 3 | type);
}

void put_length_field(std::string& out, uint32_t field, std::string_view bytes) {
  put_tag(out, field, kLength);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_varint_field(std::string& out, uint32_t field, uint64_t value) {
  put_tag(out, field, kVarint);
  put_varint(out, value);
}

void put_fixed64_field(std::string& out, uint32_t field, uint64_t value) {
  put_tag(out, field, kFixed64);
  for (int i = 0; i < 8; ++i) out += static_cast<char>(value >> (8 * i));
}

// A span id as OTLP's 8 bytes: the order of its hex text, most significant first.
void put_span_id_field(std::string& out, uint32_t field, uint64_t id) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(id >> (8 * (7 - i)));
  put_length_field(out, field, std::string_view(bytes, 8));
}

void put_trace_id_field(std::string& out, uint32_t field, const OtlpTraceId& id) {
  put_length_field(out, field, std::string_view(reinterpret_cast<const char*>(id.data()), id.size()));
}

namespace pb {
// AnyValue
constexpr uint32_t kStringValue = 1, kBoolValue = 2, kIntValue = 3, kDoubleValue = 4;
// KeyValue
constexpr uint32_t kKey = 1, kValue = 2;
// Span
constexpr uint32_t kTraceId = 1, kSpanId = 2, kTraceState = 3, kParentSpanId = 4, kName = 5, kKind = 6, kStart = 7,
                   kEnd = 8, kAttributes = 9, kEvents = 11, kDroppedEvents = 12, kLinks = 13, kStatus = 15;
// Span.Event
constexpr uint32_t kEventTime = 1, kEventName = 2, kEventAttributes = 3;
// Span.Link
constexpr uint32_t kLinkTraceId = 1, kLinkSpanId = 2, kLinkAttributes = 4;
// Status
constexpr uint32_t kStatusMessage = 2, kStatusCode = 3;
// Resource, InstrumentationScope, ScopeSpans, ResourceSpans, ExportTraceServiceRequest
constexpr uint32_t kResourceAttributes = 1, kScopeName = 1, kScope = 1, kScopeSpansSpans = 2, kResource = 1,
                   kScopeSpans = 2, kResourceSpans = 1;
// ExportTraceServiceResponse, ExportTracePartialSuccess
constexpr uint32_t kPartialSuccess = 1, kRejectedSpans = 1, kErrorMessage = 2;
}  // namespace pb

class ProtobufEncoder final : public OtlpRequestEncoder {
 public:
  void begin_resource(const OtlpResource& resource) override {
    resource_.clear();
    put_attributes(resource_, pb::kResourceAttributes, resource.attributes);
    scope_spans_.clear();
    spans_.clear();
    open_scope_.clear();
  }

  void add_span(const OtlpSpan& span) override {
    std::string& out = span_;
    out.clear();
    put_trace_id_field(out, pb::kTraceId, span.trace_id);
    put_span_id_field(out, pb::kSpanId, span.span_id);
    if (!span.trace_state.empty()) put_length_field(out, pb::kTraceState, span.trace_state);
    if (span.parent_span_id != 0) put_span_id_field(out, pb::kParentSpanId, span.parent_span_id);
    put_length_field(out, pb::kName, span.name);
    put_varint_field(out, pb::kKind, static_cast<uint64_t>(span.kind));
    put_fixed64_field(out, pb::kStart, static_cast<uint64_t>(span.start_unix_ns));
    put_fixed64_field(out, pb::kEnd, static_cast<uint64_t>(span.end_unix_ns));
    put_attributes(out, pb::kAttributes, span.attributes);
    for (const OtlpEvent& event : span.events) put_event(out, event);
    if (span.dropped_events > 0) put_varint_field(out, pb::kDroppedEvents, span.dropped_events);
    for (const OtlpLink& link : span.links) put_link(out, link);
    if (span.status) put_status(out, *span.status);
    // Consecutive spans of one scope share a ScopeSpans; a change of scope starts another.
    if (span.scope != open_scope_) {
      close_scope_spans();
      open_scope_ = span.scope;
    }
    put_length_field(spans_, pb::kScopeSpansSpans, out);
  }

  void end_resource() override {
    close_scope_spans();
    // ResourceSpans { resource, scope_spans... }, its length counted ahead.
    const size_t resource_spans = field_size(resource_.size()) + scope_spans_.size();
    if (request_.empty()) request_.reserve(last_request_size_);
    put_tag(request_, pb::kResourceSpans, kLength);
    put_varint(request_, resource_spans);
    put_length_field(request_, pb::kResource, resource_);
    request_ += scope_spans_;
    scope_spans_.clear();
  }

  std::string finish() override {
    last_request_size_ = std::max(last_request_size_, request_.size());
    return std::exchange(request_, {});
  }

 private:
  // ScopeSpans { scope { name }, spans... } of the spans of open_scope_, onto scope_spans_.
  void close_scope_spans() {
    if (spans_.empty()) return;
    std::string scope;
    put_length_field(scope, pb::kScopeName, open_scope_);
    put_tag(scope_spans_, pb::kScopeSpans, kLength);
    put_varint(scope_spans_, field_size(scope.size()) + spans_.size());
    put_length_field(scope_spans_, pb::kScope, scope);
    scope_spans_ += spans_;
    spans_.clear();
  }

  // The bytes of a length-delimited field (one-byte tag) whose content is `length` bytes.
  static size_t field_size(size_t length) {
    size_t bytes = 2;
    for (size_t rest = length >> 7; rest != 0; rest >>= 7) ++bytes;
    return bytes + length;
  }

  void put_attribute(std::string& out, uint32_t field, const OtlpAttribute& attribute) {
    std::string& value = value_;
    value.clear();
    switch (attribute.type) {
      case OtlpAttribute::Type::string:
        put_length_field(value, pb::kStringValue, attribute.text);
        break;
      case OtlpAttribute::Type::integer:
        put_varint_field(value, pb::kIntValue, static_cast<uint64_t>(attribute.number));
        break;
      case OtlpAttribute::Type::boolean:
        put_varint_field(value, pb::kBoolValue, attribute.number != 0);
        break;
      case OtlpAttribute::Type::real:
        put_fixed64_field(value, pb::kDoubleValue, std::bit_cast<uint64_t>(attribute.real));
        break;
    }
    std::string& key_value = key_value_;
    key_value.clear();
    put_length_field(key_value, pb::kKey, attribute.key);
    put_length_field(key_value, pb::kValue, value);
    put_length_field(out, field, key_value);
  }

  void put_attributes(std::string& out, uint32_t field, const std::vector<OtlpAttribute>& attributes) {
    for (const OtlpAttribute& attribute : attributes) put_attribute(out, field, attribute);
  }

  void put_event(std::string& out, const OtlpEvent& event) {
    std::string& body = nested_;
    body.clear();
    put_fixed64_field(body, pb::kEventTime, static_cast<uint64_t>(event.unix_ns));
    put_length_field(body, pb::kEventName, event.name);
    put_attributes(body, pb::kEventAttributes, event.attributes);
    put_length_field(out, pb::kEvents, body);
  }

  void put_link(std::string& out, const OtlpLink& link) {
    std::string& body = nested_;
    body.clear();
    put_trace_id_field(body, pb::kLinkTraceId, link.trace_id);
    put_span_id_field(body, pb::kLinkSpanId, link.span_id);
    put_attributes(body, pb::kLinkAttributes, link.attributes);
    put_length_field(out, pb::kLinks, body);
  }

  void put_status(std::string& out, const OtlpStatus& status) {
    std::string& body = nested_;
    body.clear();
    if (!status.message.empty()) put_length_field(body, pb::kStatusMessage, status.message);
    put_varint_field(body, pb::kStatusCode, static_cast<uint64_t>(status.code));
    put_length_field(out, pb::kStatus, body);
  }

  std::string request_;      // the ResourceSpans ended so far
  std::string resource_;     // the current Resource message
  std::string scope_spans_;  // the current resource's ScopeSpans closed so far
  std::string spans_;        // the open ScopeSpans' spans, each as a ScopeSpans.spans field
  std::string open_scope_;   // their scope
  std::string span_;         // scratch: one span
  std::string nested_;       // scratch: an event, a link or a status
  std::string key_value_;    // scratch: one KeyValue
  std::string value_;        // scratch: one AnyValue
  size_t last_request_size_ = 0;
};

class JsonEncoder final : public OtlpRequestEncoder {
 public:
  void begin_resource(const OtlpResource& resource) override {
    if (request_.empty()) {
      request_.reserve(last_request_size_);
      request_ = "{\"resourceSpans\":[";
    }
    append_otlp_json_resource(request_, resource, first_resource_);
    first_resource_ = false;
  }
  void add_span(const OtlpSpan& span) override { append_otlp_json_span(request_, span, open_scope_); }
  void end_resource() override { append_otlp_json_resource_end(request_, open_scope_); }
  std::string finish() override {
    if (request_.empty()) request_ = "{\"resourceSpans\":[";
    request_ += "\n]}\n";
    first_resource_ = true;
    last_request_size_ = std::max(last_request_size_, request_.size());
    return std::exchange(request_, {});
  }

 private:
  std::string request_;
  size_t last_request_size_ = 0;
  bool first_resource_ = true;
  std::string open_scope_;
};

// Reads the varint at `at`, advancing it; false when the bytes end first.
bool read_varint(std::string_view bytes, size_t& at, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64 && at < bytes.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(bytes[at++]);
    value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// Calls `on_field(field, wire type, varint value, length-delimited bytes)` for each field;
// false on bytes that are not a message.
template <typename OnField>
bool for_each_field(std::string_view bytes, OnField on_field) {
  size_t at = 0;
  while (at < bytes.size()) {
    uint64_t tag = 0, value = 0;
    if (!read_varint(bytes, at, tag)) return false;
    std::string_view nested;
    switch (tag & 7) {
      case kVarint:
        if (!read_varint(bytes, at, value)) return false;
        break;
      case kFixed64:
        if (bytes.size() - at < 8) return false;
        at += 8;
        break;
      case kLength:
        if (!read_varint(bytes, at, value) || value > bytes.size() - at) return false;
        nested = bytes.substr(at, value);
        at += value;
        break;
      case 5:
        if (bytes.size() - at < 4) return false;
        at += 4;
        break;
      default:
        return false;
    }
    on_field(static_cast<uint32_t>(tag >> 3), static_cast<int>(tag & 7), value, nested);
  }
  return true;
}

OtlpPartialSuccess parse_protobuf_response(std::string_view body) {
  OtlpPartialSuccess result;
  for_each_field(body, [&](uint32_t field, int type, uint64_t, std::string_view partial) {
    if (field != pb::kPartialSuccess || type != kLength) return;
    for_each_field(partial, [&](uint32_t inner, int inner_type, uint64_t value, std::string_view text) {
      if (inner == pb::kRejectedSpans && inner_type == kVarint) result.rejected_spans = static_cast<int64_t>(value);
      if (inner == pb::kErrorMessage && inner_type == kLength) result.error_message = std::string(text);
    });
  });
  return result;
}

OtlpPartialSuccess parse_json_response(std::string_view body) {
  OtlpPartialSuccess result;
  const auto json = nlohmann::json::parse(body, nullptr, false);
  if (!json.is_object() || !json.contains("partialSuccess") || !json["partialSuccess"].is_object()) return result;
  const auto& partial = json["partialSuccess"];
  // int64 is a decimal string in OTLP/JSON; a number is accepted too.
  if (const auto rejected = partial.find("rejectedSpans"); rejected != partial.end()) {
    if (rejected->is_number_integer())
      result.rejected_spans = rejected->get<int64_t>();
    else if (rejected->is_string())
      result.rejected_spans = std::strtoll(rejected->get<std::string>().c_str(), nullptr, 10);
  }
  if (const auto message = partial.find("errorMessage"); message != partial.end() && message->is_string())
    result.error_message = message->get<std::string>();
  return result;
}

}  // namespace

std::unique_ptr<OtlpRequestEncoder> make_otlp_request_encoder(OtlpProtocol protocol) {
  if (protocol == OtlpProtocol::http_protobuf) return std::make_unique<ProtobufEncoder>();
  return std::make_unique<JsonEncoder>();
}

OtlpPartialSuccess parse_otlp_response(OtlpProtocol protocol, std::string_view body) {
  return protocol == OtlpProtocol::http_protobuf ? parse_protobuf_response(body) : parse_json_response(body);
}

}  // namespace chronicle::exports
