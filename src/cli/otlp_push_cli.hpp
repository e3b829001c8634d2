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

// The options of a push of the traces in `directory` (the spool next to it unless given).
exports::OtlpPushOptions otlp_push_options(const std::string& directory, const OtlpPushCliOptions& options);

// `record`'s end: the rest of the run's traces in `directory` pushed by `live`, then the counts
// of the whole run as run_otlp_push prints them, and its exit code.
int finish_live_otlp_push(exports::OtlpLivePush& live, const std::string& directory, const OtlpPushCliOptions& options);

}  // namespace chronicle::cli
