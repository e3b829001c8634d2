// The OTLP push options and their run, shared by `export --otlp-endpoint` and
// `record --otlp-endpoint` (which pushes the spans while the program runs, the rest at its end).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

#include "export/otlp_live.hpp"

namespace chronicle::cli {

struct OtlpPushCliOptions {
  std::string endpoint;
  bool endpoint_is_traces_url = false;  // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: used as it is
  bool from_environment = false;        // --otlp: the endpoint from the OTEL_EXPORTER_OTLP_* environment
  std::string protocol;                 // "" until given or resolved: http/protobuf
  std::string compression;              // "" until given or resolved: none
  std::vector<std::pair<std::string, std::string>> headers;  // from OTEL_EXPORTER_OTLP_(TRACES_)HEADERS
  std::string service_name;                                  // --service-name: over OTEL_SERVICE_NAME
  std::string spool;
  std::string resend;  // export only
  // export only: also push the spans other services gave merge as OTLP input (not by default:
  // they sent them to their own collector; a backend would hold each twice under one id)
  bool include_merged_input = false;
  size_t batch_spans = 2048;
  double retry_seconds = 30;
  double timeout_seconds = 0;  // 0 until given or resolved: 10
};

// Fills what the command line left out from OpenTelemetry's exporter environment, as an OTel SDK
// reads it (the signal's variable first, then the general one): OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// (a URL used as it is) or OTEL_EXPORTER_OTLP_ENDPOINT (a base URL, /v1/traces appended) when --otlp
// asks for it; _HEADERS (key=value,... URL-encoded), _COMPRESSION (gzip, none), _TIMEOUT
// (milliseconds), _PROTOCOL (http/protobuf, http/json). Then the defaults. Throws
// CLI::ValidationError for a value it cannot take (grpc, an unknown compression, no endpoint).
void resolve_otlp_environment(OtlpPushCliOptions& options);

// --otlp-endpoint, --otlp-protocol, --otlp-batch-spans, --otlp-retry-seconds, --otlp-timeout,
// --otlp-spool, and --otlp-resend and --otlp-include-merged-input when `with_resend` (export).
void add_otlp_push_options(CLI::App& command, OtlpPushCliOptions& options, bool with_resend);

// Pushes the traces in `directory` (or resends options.resend), prints the counts and says what
// is left to do; 0 when every span was delivered, else kExitFailure.
int run_otlp_push(const std::string& directory, const OtlpPushCliOptions& options);

// The options of a push of the traces in `directory` (the spool next to it unless given).
exports::OtlpPushOptions otlp_push_options(const std::string& directory, const OtlpPushCliOptions& options);

// `record`'s end: the rest of the run's traces in `directory` pushed by `live`, then the counts
// of the whole run as run_otlp_push prints them, and its exit code.
int finish_live_otlp_push(exports::OtlpLivePush& live, const std::string& directory, const OtlpPushCliOptions& options);

}  // namespace chronicle::cli
