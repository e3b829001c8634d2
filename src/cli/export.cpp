// `chronicle export DIR --format chrome|otlp|sqlite -o FILE`: the trace in another tool's format.
// `chronicle export DIR --otlp-endpoint URL`: its spans pushed to an OpenTelemetry collector;
// `chronicle export --otlp-endpoint URL --otlp-resend SPOOL`: what a failed push spooled.
#include <unistd.h>

#include <fmt/format.h>
#include <filesystem>

#include "cli/common.hpp"
#include "cli/otlp_push_cli.hpp"
#include "export/chrome_json.hpp"
#include "export/otlp_json.hpp"
#include "export/sqlite_export.hpp"

namespace chronicle::cli {
namespace {

struct ExportCliOptions {
  std::string directory;
  std::string format;
  std::string output;
  bool force = false;
  OtlpPushCliOptions otlp;
};

// What the parser cannot say alone: a file export needs a trace, --format and -o; a push
// needs a trace or a spool to resend, and no file options.
void check_combination(ExportCliOptions& options) {
  resolve_otlp_environment(options.otlp);
  if (options.otlp.endpoint.empty()) {
    if (options.directory.empty() || options.format.empty() || options.output.empty())
      throw CLI::ValidationError("export", "a trace directory, --format and -o are required (or --otlp-endpoint)");
    if (!options.otlp.resend.empty() || !options.otlp.spool.empty())
      throw CLI::ValidationError("export", "--otlp-resend and --otlp-spool need --otlp-endpoint");
    return;
  }
  if (!options.format.empty() || !options.output.empty())
    throw CLI::ValidationError("export", "--otlp-endpoint pushes to a collector: --format and -o do not apply");
  if (options.otlp.resend.empty() == options.directory.empty())
    throw CLI::ValidationError("export", "--otlp-endpoint takes either a trace directory or --otlp-resend SPOOL");
}

int run_export(const ExportCliOptions& options) {
  namespace fs = std::filesystem;
  if (!options.otlp.endpoint.empty()) return run_otlp_push(options.directory, options.otlp);
  // A device or a pipe (-o /dev/null, /dev/stdout, a FIFO) is written in place: renaming a file
  // over it would replace it, and as root `-o /dev/null` replaced the machine's /dev/null. Any
  // other output is a new private file renamed into place (format::PrivateFile).
  const bool in_place = format::is_stream_target(options.output);
  std::error_code status_error;
  if ((in_place && options.format == "sqlite") || fs::is_directory(options.output, status_error)) {
    fmt::print(stderr, "chronicle: error: {} is not a regular file ({} output needs one)\n", options.output,
               options.format);
    return kExitFailure;
  }
  if (!in_place && !options.force && fs::exists(fs::symlink_status(options.output, status_error))) {
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

  // A failed export (bad input halfway, a full disk) leaves no partial file under the name asked
  // for, nor destroys what was there: the file is renamed into place only when whole.
  export_options.when_exists = options.force ? format::WhenExists::replace : format::WhenExists::refuse;
  try {
    if (options.format == "chrome")
      exports::export_chrome_json(traces, options.output, export_options);
    else if (options.format == "otlp")
      exports::export_otlp_json(traces, options.output, export_options);
    else
      exports::export_sqlite(traces, options.output, export_options);
  } catch (...) {
    if (show_progress) fmt::print(stderr, "\n");
    throw;
  }
  if (show_progress) fmt::print(stderr, "\r\033[K");
  const std::string size = in_place ? "not a file" : human_bytes(fs::file_size(options.output));
  fmt::print(stderr, "chronicle: wrote {} ({}, {}, {} process{})\n", options.output, options.format, size,
             traces.size(), traces.size() == 1 ? "" : "es");
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
  add_otlp_push_options(*command, options->otlp, true);
  command->parse_complete_callback([options] { check_combination(*options); });
  return {command, [options] { return run_export(*options); }};
}

}  // namespace chronicle::cli
