// `chronicle stats --counters DIR`: counter history over a window of a trace (the last 5
// minutes, since a time, between two times), answered from prefix sums built in one pass.
#include <fnmatch.h>

#include <cmath>
#include <ctime>
#include <fmt/format.h>

#include "analysis/counter_windows.hpp"
#include "cli/common.hpp"
#include "reader/trace_directory.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::cli {
namespace {

struct StatsOptions {
  std::string directory;
  bool counters = false;
  std::string last;
  std::string since;
  std::vector<std::string> between;
  std::string name;
};

std::string cell(double value) {
  if (std::isnan(value)) return "-";
  return fmt::format("{:.6g}", value);
}

std::string utc_time(int64_t unix_ns) {
  const time_t seconds = static_cast<time_t>(unix_ns / 1'000'000'000);
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}", parts.tm_year + 1900, parts.tm_mon + 1,
                     parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, unix_ns % 1'000'000'000 / 1'000'000);
}

int print_counter_windows(const StatsOptions& options) {
  const auto traces = reader::find_traces(options.directory);
  if (traces.empty())
    throw reader::TraceError(options.directory, 0, "no trace here (no metadata file in it or its subdirectories)");
  for (const auto& directory : traces) {
    reader::Trace trace(directory);
    const analysis::CounterWindows windows(trace);
    int64_t from = windows.first_ns();
    int64_t to = windows.last_ns();
    if (!options.last.empty()) from = to - analysis::parse_duration(options.last);
    if (!options.since.empty()) from = analysis::parse_time_point(options.since, windows.first_ns(), windows.last_ns());
    if (options.between.size() == 2) {
      from = analysis::parse_time_point(options.between[0], windows.first_ns(), windows.last_ns());
      to = analysis::parse_time_point(options.between[1], windows.first_ns(), windows.last_ns());
    }
    if (to < from) throw std::invalid_argument("the window ends before it begins");
    fmt::print("# {}: window {} .. {} UTC ({:.3f} s)\n", directory, utc_time(from), utc_time(to),
               static_cast<double>(to - from) / 1e9);
    fmt::print("{:<48} {:<9} {:>9} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "SERIES", "KIND", "SAMPLES", "SUM", "MEAN",
               "TIME_AVG", "RATE/S", "LAST");
    for (const auto& series : windows.series()) {
      if (!options.name.empty() && fnmatch(options.name.c_str(), series.label().c_str(), 0) != 0) continue;
      const analysis::WindowStats stats = series.window(from, to);
      fmt::print("{:<48} {:<9} {:>9} {:>12} {:>12} {:>12} {:>12} {:>12}\n", series.label(),
                 analysis::kind_name(series.kind()), stats.samples, cell(stats.sum), cell(stats.mean),
                 cell(stats.time_average), cell(stats.rate_per_second), cell(stats.last));
    }
  }
  return 0;
}

}  // namespace

Command add_stats(CLI::App& app) {
  auto options = std::make_shared<StatsOptions>();
  CLI::App* command = app.add_subcommand("stats", "Summaries of a trace");
  command->add_option("directory", options->directory, "Trace directory")->required();
  command->add_flag("--counters", options->counters,
                    "Counter and metric series over a window: samples, sum, mean, time-weighted average, rate");
  auto* last = command->add_option("--last", options->last, "Window: the trace's last DURATION (e.g. 5m, 30s)");
  auto* since = command->add_option("--since", options->since,
                                    "Window: from TIME to the end (+30s after the start, -30s before the end, "
                                    "2024-05-01T12:00:00Z, or Unix seconds)");
  auto* between = command->add_option("--between", options->between, "Window: between two TIMEs")->expected(2);
  last->excludes(since)->excludes(between);
  since->excludes(between);
  command->add_option("--name", options->name, "Only series whose name matches this glob pattern");
  return {command, [options] {
            if (!options->counters) {
              fmt::print(stderr, "chronicle stats: say what to summarize (--counters)\n");
              return kExitFailure;
            }
            return print_counter_windows(*options);
          }};
}

}  // namespace chronicle::cli
