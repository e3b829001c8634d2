#include "cli/otlp_push_cli.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <chrono>
#include <cstdlib>

#include "cli/common.hpp"
#include "export/otel_environment.hpp"
#include "export/otlp_push.hpp"
#include "format/metadata.hpp"

namespace chronicle::cli {
namespace {

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
    tell("chronicle: sent {} in {} to {}{}\n", plural(result.spans_sent, "span"),
         plural(result.batches_sent, "request"), result.url,
         result.retries == 0   ? std::string()
         : result.retries == 1 ? std::string(" (1 retry)")
                               : fmt::format(" ({} retries)", result.retries));
    return 0;
  }
  if (!result.last_error.empty())
    tell("chronicle: error: not every span reached {}: {}\n", result.url, result.last_error);
  else if (result.read_failure)
    tell("chronicle: the trace could not be read to its end; the spans read before are counted here\n");
  tell("chronicle: {} of {} spans sent in {}", result.spans_sent, result.spans_produced,
       plural(result.batches_sent, "request"));
  if (result.spans_rejected > 0) tell(", {} rejected by the collector", result.spans_rejected);
  if (result.spans_spooled > 0)
    tell(", {} spooled in {} in {}", result.spans_spooled, plural(result.batches_spooled, "file"), spool);
  if (result.spans_lost > 0) tell(", {} LOST (the spool could not be written)", result.spans_lost);
  tell("\n");
  if (result.spans_spooled > 0)
    tell("chronicle: send them later with: chronicle export --otlp-endpoint {} --otlp-resend {}\n", endpoint, spool);
  return kExitFailure;
}

}  // namespace

namespace {

// The signal's variable, else the general one ("ENDPOINT": OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
// then OTEL_EXPORTER_OTLP_ENDPOINT); empty when neither is set. `from_signal` says which.
std::string otel_variable(std::string_view suffix, bool* from_signal = nullptr) {
  const std::string signal = fmt::format("OTEL_EXPORTER_OTLP_TRACES_{}", suffix);
  const std::string general = fmt::format("OTEL_EXPORTER_OTLP_{}", suffix);
  if (const char* value = std::getenv(signal.c_str()); value && *value) {
    if (from_signal) *from_signal = true;
    return value;
  }
  const char* value = std::getenv(general.c_str());
  return value ? value : "";
}

}  // namespace

void resolve_otlp_environment(OtlpPushCliOptions& options) {
  // The exporter reads the resource from the environment (export/otel_environment.hpp): the flag
  // is the variable's value for this command; a malformed list is said before anything is read.
  if (!options.service_name.empty()) setenv("OTEL_SERVICE_NAME", options.service_name.c_str(), 1);
  try {
    exports::otel_resource_from_environment();
  } catch (const std::invalid_argument& error) {
    throw CLI::ValidationError("OTEL_RESOURCE_ATTRIBUTES", error.what());
  }
  if (options.from_environment && options.endpoint.empty()) {
    options.endpoint = otel_variable("ENDPOINT", &options.endpoint_is_traces_url);
    if (options.endpoint.empty())
      throw CLI::ValidationError("--otlp",
                                 "neither OTEL_EXPORTER_OTLP_TRACES_ENDPOINT nor OTEL_EXPORTER_OTLP_ENDPOINT is set");
  }
  if (options.protocol.empty()) options.protocol = otel_variable("PROTOCOL");
  if (options.protocol.empty()) options.protocol = "http/protobuf";
  if (options.protocol != "http/protobuf" && options.protocol != "http/json")
    throw CLI::ValidationError("OTEL_EXPORTER_OTLP_PROTOCOL",
                               fmt::format("{}: only http/protobuf and http/json are supported", options.protocol));
  if (options.compression.empty()) options.compression = otel_variable("COMPRESSION");
  if (options.compression.empty()) options.compression = "none";
  if (options.compression != "gzip" && options.compression != "none")
    throw CLI::ValidationError("OTEL_EXPORTER_OTLP_COMPRESSION", fmt::format("{}: gzip or none", options.compression));
  if (options.timeout_seconds == 0) {
    const std::string milliseconds = otel_variable("TIMEOUT");
    if (!milliseconds.empty()) {
      char* end = nullptr;
      const double value = std::strtod(milliseconds.c_str(), &end);
      if (end == milliseconds.c_str() || *end != '\0' || !(value > 0))
        throw CLI::ValidationError("OTEL_EXPORTER_OTLP_TIMEOUT",
                                   fmt::format("{}: a number of milliseconds above 0", milliseconds));
      options.timeout_seconds = value / 1000;
    }
  }
  if (options.timeout_seconds == 0) options.timeout_seconds = 10;
  try {
    options.headers = exports::otel_key_values(otel_variable("HEADERS"), "OTEL_EXPORTER_OTLP_HEADERS");
  } catch (const std::invalid_argument& error) {
    throw CLI::ValidationError("OTEL_EXPORTER_OTLP_HEADERS", error.what());
  }
}

exports::OtlpPushOptions otlp_push_options(const std::string& directory, const OtlpPushCliOptions& options) {
  exports::OtlpPushOptions push;
  push.endpoint = options.endpoint;
  push.endpoint_is_traces_url = options.endpoint_is_traces_url;
  push.headers = options.headers;
  push.gzip = options.compression == "gzip";
  push.protocol =
      options.protocol == "http/json" ? exports::OtlpProtocol::http_json : exports::OtlpProtocol::http_protobuf;
  push.spans_per_batch = options.batch_spans;
  push.retry_budget = milliseconds(options.retry_seconds);
  push.request_timeout = milliseconds(options.timeout_seconds);
  const bool resend = !options.resend.empty();
  push.spool_directory = resend ? options.resend : !options.spool.empty() ? options.spool : default_spool(directory);
  return push;
}

int finish_live_otlp_push(exports::OtlpLivePush& live, const std::string& directory,
                          const OtlpPushCliOptions& options) {
  const std::vector<reader::Trace> traces = exports::open_traces(directory);
  for (const auto& trace : traces) warn_about_damage(trace);
  const exports::OtlpPushResult result = live.finish(traces);
  const int exit_code = report_push(result, otlp_push_options(directory, options).spool_directory, options.endpoint);
  if (result.read_failure) std::rethrow_exception(result.read_failure);
  return exit_code;
}

// Removes the traces merge made of other services' OTLP spans, and says so: those services
// pushed their spans themselves, and a second copy under the same ids is not another span.
void leave_out_merged_input(std::vector<reader::Trace>& traces) {
  std::vector<std::string> services;
  std::vector<reader::Trace> kept;  // (a Trace moves, but is not move-assigned)
  for (reader::Trace& trace : traces) {
    if (trace.description().source == format::kSourceOtlp)
      services.push_back(trace.description().process_name);
    else
      kept.push_back(std::move(trace));
  }
  traces = std::move(kept);
  if (services.empty()) return;
  tell(
      "chronicle: not sending the spans of {} merged from OTLP input ({}): each service exports its own; "
      "--otlp-include-merged-input sends them too\n",
      plural(services.size(), "service"), fmt::join(services, ", "));
}

int run_otlp_push(const std::string& directory, const OtlpPushCliOptions& options) {
  exports::OtlpPushOptions push = otlp_push_options(directory, options);
  const bool resend = !options.resend.empty();
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
    std::vector<reader::Trace> traces = exports::open_traces(directory);
    for (const auto& trace : traces) warn_about_damage(trace);
    if (!options.include_merged_input) leave_out_merged_input(traces);
    result = exports::push_otlp(traces, push);
  }
  if (show_progress) fmt::print(stderr, "\r\033[K");
  const int exit_code = report_push(result, push.spool_directory, options.endpoint);
  // The counts first, then the reading error as every command reports it (exit code 2).
  if (result.read_failure) std::rethrow_exception(result.read_failure);
  return exit_code;
}

void add_otlp_push_options(CLI::App& command, OtlpPushCliOptions& options, bool with_resend) {
  command.add_option("--otlp-endpoint", options.endpoint,
                     "Push the spans to an OTLP/HTTP collector, e.g. http://127.0.0.1:4318 (POST to URL/v1/traces)");
  command.add_option("--service-name", options.service_name,
                     "service.name of the OTLP spans (default: OTEL_SERVICE_NAME, else the process's name)");
  command.add_flag("--otlp", options.from_environment,
                   "Push to the collector OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT names");
  command.add_option("--otlp-protocol", options.protocol, "http/protobuf (default) or http/json")
      ->check(CLI::IsMember({"http/protobuf", "http/json"}));
  command.add_option("--otlp-compression", options.compression, "gzip or none (default)")
      ->check(CLI::IsMember({"gzip", "none"}));
  command.add_option("--otlp-batch-spans", options.batch_spans, "Spans per request (default 2048)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  command
      .add_option("--otlp-retry-seconds", options.retry_seconds,
                  "How long a request is retried before the collector counts as down (default 30)")
      ->check(CLI::Range(0.0, 86400.0));
  command.add_option("--otlp-timeout", options.timeout_seconds, "Seconds per request attempt (default 10)")
      ->check(CLI::Range(0.001, 3600.0));
  command.add_option("--otlp-spool", options.spool,
                     "Where batches go when the collector is down (default: DIR.otlp-spool next to the trace)");
  if (with_resend) {
    command.add_option("--otlp-resend", options.resend,
                       "Send the batches a failed push spooled in this directory (instead of a trace)");
    command.add_flag("--otlp-include-merged-input", options.include_merged_input,
                     "Also send the spans of other services that merge read as OTLP input (not by default: "
                     "each service exports its own)");
  }
}

}  // namespace chronicle::cli
