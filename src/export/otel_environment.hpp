// What OpenTelemetry's environment variables say to an exporter, read as OTel SDKs read them
// (the SDK environment variable specification): the resource (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES) and the W3C-Baggage-like key=value lists they and
// OTEL_EXPORTER_OTLP_HEADERS use.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chronicle::exports {

// "key1=value1,key2=value2": keys and values trimmed and percent-decoded, empty entries skipped.
// Throws std::invalid_argument naming `variable` for an entry without '=' or with an empty key.
std::vector<std::pair<std::string, std::string>> otel_key_values(std::string_view text, std::string_view variable);

// The resource a process's spans go out with, beside what the trace says of the process.
struct OtelResource {
  std::string service_name;                                     // empty: the process's name
  std::vector<std::pair<std::string, std::string>> attributes;  // OTEL_RESOURCE_ATTRIBUTES but service.name
};

// service.name from OTEL_SERVICE_NAME, else OTEL_RESOURCE_ATTRIBUTES' service.name; the other
// attributes of OTEL_RESOURCE_ATTRIBUTES. Throws std::invalid_argument for a malformed list.
OtelResource otel_resource_from_environment();

// Which spans go out, as OTEL_TRACES_SAMPLER names OTel's samplers: "parentbased_always_on" (the
// SDKs' default, also when unset: a trace whose remote parent said "not sampled", trace-flags 00,
// is not exported) or "always_on" (every span). Throws std::invalid_argument for another sampler
// (chronicle records every span: a sampler that drops roots has nothing to decide by here).
enum class OtelSampler { parent_based_always_on, always_on };
OtelSampler otel_sampler_from_environment();

}  // namespace chronicle::exports
