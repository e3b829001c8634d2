// The OTLP push options and their run, shared by `export --otlp-endpoint` and
// `record --otlp-endpoint` (which pushes the trace once the program has exited).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

namespace chronicle::cli {

struct OtlpPushCliOptions {
  std::string endpoint;
  std::string protocol = "http/protobuf";
  std::string spool;
  std::string resend;  // export only
  size_t batch_spans = 2048;
  double retry_seconds = 30;
  double timeout_seconds = 10;
};

// --otlp-endpoint, --otlp-protocol, --otlp-batch-spans, --otlp-retry-seconds, --otlp-timeout,
// --otlp-spool, and --otlp-resend when `with_resend`.
void add_otlp_push_options(CLI::App& command, OtlpPushCliOptions& options, bool with_resend);

// Pushes the traces in `directory` (or resends options.resend), prints the counts and says what
// is left to do; 0 when every span was delivered, else kExitFailure.
int run_otlp_push(const std::string& directory, const OtlpPushCliOptions& options);

}  // namespace chronicle::cli
