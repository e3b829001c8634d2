// OTLP requests (ExportTraceServiceRequest) built span by span, in the two encodings OTLP/HTTP
// takes: protobuf (application/x-protobuf) and JSON (application/json). A request holds one or
// more resources, each with the spans the producer gave it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "export/otlp_spans.hpp"

namespace chronicle::exports {

enum class OtlpProtocol { http_protobuf, http_json };

// "http/protobuf" or "http/json", as OTEL_EXPORTER_OTLP_PROTOCOL names them.
std::string_view otlp_protocol_name(OtlpProtocol protocol);
std::string_view otlp_content_type(OtlpProtocol protocol);

class OtlpRequestEncoder {
 public:
  virtual ~OtlpRequestEncoder() = default;
  virtual void begin_resource(const OtlpResource& resource) = 0;
  virtual void add_span(const OtlpSpan& span) = 0;
  virtual void end_resource() = 0;
  // The request's bytes (every resource ended); the encoder is then empty, ready for the next.
  virtual std::string finish() = 0;
};

std::unique_ptr<OtlpRequestEncoder> make_otlp_request_encoder(OtlpProtocol protocol);

// What a collector answers (ExportTraceServiceResponse): the spans it accepted only in part.
struct OtlpPartialSuccess {
  int64_t rejected_spans = 0;
  std::string error_message;
};
// Reads a response body; a body that is empty or not understood reads as no rejection.
OtlpPartialSuccess parse_otlp_response(OtlpProtocol protocol, std::string_view body);

}  // namespace chronicle::exports
