// `chronicle export DIR --format chrome|otlp|sqlite -o FILE`: the trace in another tool's format.
// `chronicle export DIR --otlp-endpoint URL`: its spans pushed to an OpenTelemetry collector;
// `chronicle export --otlp-endpoint URL --otlp-resend SPOOL`: what a failed push spooled.
#include <unistd.h>

#include <fmt/format.h>
#include <chrono>
#include <filesystem>

#include "cli/common.hpp"
#include "export/chrome_json.hpp"
#include "export/otlp_json.hpp"
#include "export/otlp_push.hpp"
#include "export/sqlite_export.hpp"

namespace chronicle::cli {
namespace {

struct ExportCliOptions {
  std::string directory;
  std::string format;
  std::string output;
  bool force = false;
  // OTLP push
  std::string otlp_endpoint;
  std::string otlp_protocol = "http/protobuf";
  std::string otlp_spool;
  std::string otlp_resend;
  size_t otlp_batch_spans = 2048;
  double otlp_retry_seconds = 30;
  double otlp_timeout_seconds = 10;
};

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// The spool of a push from DIR, unless given: next to the trace, not in it (a trace directory
// holds traces only).
std::string default_spool(const std::string& directory) {
  std::string trimmed = directory;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  return trimmed + ".otlp-spool";
}

std::string plural(uint64_t count, std::string_view noun) {
  return fmt::format("{} {}{}", count, noun, count == 1 ? "" : "s");
}

int report_push(const exports::OtlpPushResult& result, const std::string& spool, const std::string& endpoint) {
  if (result.delivered()) {
    fmt::print(stderr, "chronicle: sent {} in {} to {}{}\n", plural(result.spans_sent, "span"),
               plural(result.batches_sent, "request"), result.url,
               result.retries > 0 ? fmt::format(" ({} retries)", result.retries) : "");
    return 0;
  }
  fmt::print(stderr, "chronicle: error: not every span reached {}: {}\n", result.url, result.last_error);
  fmt::print(stderr, "chronicle: {} of {} spans sent in {}", result.spans_sent, result.spans_produced,
             plural(result.batches_sent, "request"));
  if (result.spans_rejected > 0) fmt::print(stderr, ", {} rejected by the collector", result.spans_rejected);
  if (result.spans_spooled > 0)
    fmt::print(stderr, ", {} spooled in {} in {}", result.spans_spooled, plural(result.batches_spooled, "file"), spool);
  if (result.spans_lost > 0) fmt::print(stderr, ", {} LOST (the spool could not be written)", result.spans_lost);
  fmt::print(stderr, "\n");
  if (result.spans_spooled > 0)
    fmt::print(stderr, "chronicle: send them later with: chronicle export --otlp-endpoint {} --otlp-resend {}\n",
               endpoint, spool);
  return kExitFailure;
}

int run_push(const ExportCliOptions& options) {
  exports::OtlpPushOptions push;
  push.endpoint = options.otlp_endpoint;
  push.protocol =
      options.otlp_protocol == "http/json" ? exports::OtlpProtocol::http_json : exports::OtlpProtocol::http_protobuf;
  push.spans_per_batch = options.otlp_batch_spans;
  push.retry_budget = milliseconds(options.otlp_retry_seconds);
  push.request_timeout = milliseconds(options.otlp_timeout_seconds);
  const bool resend = !options.otlp_resend.empty();
  push.spool_directory = resend                        ? options.otlp_resend
                         : !options.otlp_spool.empty() ? options.otlp_spool
                                                       : default_spool(options.directory);
  const bool show_progress = stderr_is_terminal();
  if (show_progress)
    push.on_progress = [](const exports::OtlpPushProgress& progress) {
      fmt::print(stderr, "\rchronicle: export: {} events read, {} spans made, {} sent, {} spooled",
                 human_count(progress.events_read), human_count(progress.spans_produced),
                 human_count(progress.spans_sent), human_count(progress.spans_spooled));
    };
  exports::OtlpPushResult result;
  if (resend) {
    result = exports::resend_otlp_spool(push);
  } else {
    const std::vector<reader::Trace> traces = exports::open_traces(options.directory);
    for (const auto& trace : traces) warn_about_damage(trace);
    result = exports::push_otlp(traces, push);
  }
  if (show_progress) fmt::print(stderr, "\r\033[K");
  return report_push(result, push.spool_directory, options.otlp_endpoint);
}

// What the parser cannot say alone: a file export needs a trace, --format and -o; a push
// needs a trace or a spool to resend, and no file options.
void check_combination(const ExportCliOptions& options) {
  if (options.otlp_endpoint.empty()) {
    if (options.directory.empty() || options.format.empty() || options.output.empty())
      throw CLI::ValidationError("export", "a trace directory, --format and -o are required (or --otlp-endpoint)");
    if (!options.otlp_resend.empty() || !options.otlp_spool.empty())
      throw CLI::ValidationError("export", "--otlp-resend and --otlp-spool need --otlp-endpoint");
    return;
  }
  if (!options.format.empty() || !options.output.empty())
    throw CLI::ValidationError("export", "--otlp-endpoint pushes to a collector: --format and -o do not apply");
  if (options.otlp_resend.empty() == options.directory.empty())
    throw CLI::ValidationError("export", "--otlp-endpoint takes either a trace directory or --otlp-resend SPOOL");
}

int run_export(const ExportCliOptions& options) {
  namespace fs = std::filesystem;
  if (!options.otlp_endpoint.empty()) return run_push(options);
  if (!options.force && fs::exists(options.output)) {
    fmt::print(stderr, "chronicle: error: {} exists (--force overwrites it)\n", options.output);
    return kExitFailure;
  }
  const std::vector<reader::Trace> traces = exports::open_traces(options.directory);
  for (const auto& trace : traces) warn_about_damage(trace);

  exports::ExportOptions export_options;
  const bool show_progress = stderr_is_terminal();
  if (show_progress)
    export_options.on_progress = [](uint64_t events) {
      fmt::print(stderr, "\rchronicle: export: {} events read", human_count(events));
    };

  // Written next to the output and renamed at the end: a failed export (bad input halfway, a
  // full disk) leaves no partial file under the name asked for, nor destroys what was there.
  const std::string partial = options.output + ".partial";
  std::error_code ignored;
  fs::remove(partial, ignored);
  try {
    if (options.format == "chrome")
      exports::export_chrome_json(traces, partial, export_options);
    else if (options.format == "otlp")
      exports::export_otlp_json(traces, partial, export_options);
    else
      exports::export_sqlite(traces, partial, export_options);
    fs::rename(partial, options.output);
  } catch (...) {
    if (show_progress) fmt::print(stderr, "\n");
    fs::remove(partial, ignored);
    throw;
  }
  if (show_progress) fmt::print(stderr, "\r\033[K");
  fmt::print(stderr, "chronicle: wrote {} ({}, {}, {} process{})\n", options.output, options.format,
             human_bytes(fs::file_size(options.output)), traces.size(), traces.size() == 1 ? "" : "es");
  return 0;
}

}  // namespace

Command add_export(CLI::App& app) {
  auto options = std::make_shared<ExportCliOptions>();
  CLI::App* command = app.add_subcommand(
      "export", "Write a trace (every process of a record run) as Chrome/Perfetto JSON, OTLP/JSON or SQLite");
  command->add_option("directory", options->directory, "Trace directory");
  command
      ->add_option("--format", options->format,
                   "chrome: Chrome Trace Event JSON (Perfetto UI, chrome://tracing); "
                   "otlp: OTLP/JSON ExportTraceServiceRequest; sqlite: a database")
      ->check(CLI::IsMember({"chrome", "otlp", "sqlite"}));
  command->add_option("-o,--output", options->output, "The file to write");
  command->add_flag("--force", options->force, "Overwrite the output file if it exists");
  command->add_option("--otlp-endpoint", options->otlp_endpoint,
                      "Push the spans to an OTLP/HTTP collector, e.g. http://127.0.0.1:4318 (POST to URL/v1/traces)");
  command->add_option("--otlp-protocol", options->otlp_protocol, "http/protobuf (default) or http/json")
      ->check(CLI::IsMember({"http/protobuf", "http/json"}));
  command->add_option("--otlp-batch-spans", options->otlp_batch_spans, "Spans per request (default 2048)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  command
      ->add_option("--otlp-retry-seconds", options->otlp_retry_seconds,
                   "How long a request is retried before the collector counts as down (default 30)")
      ->check(CLI::Range(0.0, 86400.0));
  command->add_option("--otlp-timeout", options->otlp_timeout_seconds, "Seconds per request attempt (default 10)")
      ->check(CLI::Range(0.001, 3600.0));
  command->add_option("--otlp-spool", options->otlp_spool,
                      "Where batches go when the collector is down (default: DIR.otlp-spool next to the trace)");
  command->add_option("--otlp-resend", options->otlp_resend,
                      "Send the batches a failed push spooled in this directory (instead of a trace)");
  command->parse_complete_callback([options] { check_combination(*options); });
  return {command, [options] { return run_export(*options); }};
}

}  // namespace chronicle::cli
