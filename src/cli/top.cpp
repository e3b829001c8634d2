// `chronicle top PID`: a refreshing table of a running process's metrics (values, rates,
// histogram quantiles) and of its trace session's write rate, read from its shared mappings
// with no help from the process.
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <thread>

#include "analysis/counter_windows.hpp"
#include "cli/common.hpp"
#include "collector/collector.hpp"
#include "metrics/query.hpp"
#include "metrics/snapshot.hpp"

namespace chronicle::cli {
namespace {

struct TopOptions {
  int pid = 0;
  std::string interval = "1s";
  bool once = false;
  unsigned iterations = 0;  // 0: until interrupted or the process ends
  std::string sort = "name";
};

// Bytes written and events lost so far by a running trace session of the process, if any.
struct TraceActivity {
  uint64_t bytes = 0;
  uint64_t discarded = 0;
  uint32_t threads = 0;
};

std::optional<TraceActivity> trace_activity(int pid) {
  const uid_t owner = shm::expected_mapping_owner(pid);
  for (const std::string& path : find_session_mappings(pid)) {
    try {
      collector::SessionMapping mapping(path, owner);  // refusals are silent here: top redraws
      if (mapping.finished()) continue;
      TraceActivity activity;
      const uint32_t channels = mapping.channel_count();
      activity.threads = channels;
      for (uint32_t channel = 0; channel < channels; ++channel) {
        const uint64_t committed = mapping.packets_committed(channel);
        activity.bytes += committed * mapping.geometry().packet_size;
        const auto* open = reinterpret_cast<const format::PacketHeader*>(mapping.ring_slot(channel, committed));
        if (open->packet_seq_num.load(std::memory_order_acquire) == committed)
          activity.bytes += open->content_size_bits.load(std::memory_order_acquire) / 8;
        activity.discarded += mapping.channel(channel).events_discarded.load(std::memory_order_relaxed);
      }
      return activity;
    } catch (const std::exception&) {
      continue;  // a mapping being created or torn down, or not the process's user's: not this one
    }
  }
  return std::nullopt;
}

std::string_view kind_label(format::MetricKind kind) {
  switch (kind) {
    case format::MetricKind::counter:
      return "counter";
    case format::MetricKind::gauge:
      return "gauge";
    case format::MetricKind::histogram:
      return "histogram";
  }
  return "?";
}

std::string number(double value) {
  return std::isnan(value) ? "-" : fmt::format("{:.6g}", value);
}

void print_table(const TopOptions& options, const metrics::MetricsSnapshot& before,
                 const metrics::MetricsSnapshot& after, const std::optional<TraceActivity>& trace_before,
                 const std::optional<TraceActivity>& trace_after) {
  const double seconds = static_cast<double>(after.monotonic_ns - before.monotonic_ns) / 1e9;
  std::string out;
  fmt::format_to(std::back_inserter(out), "chronicle top - pid {} ({}): {} metrics, {} threads", after.pid,
                 after.process_name, after.metrics.size(), after.threads);
  if (after.dropped) fmt::format_to(std::back_inserter(out), ", {} metrics refused (full)", after.dropped);
  out += '\n';
  if (trace_after && trace_before && seconds > 0)
    fmt::format_to(
        std::back_inserter(out), "trace session: {} threads, {}/s written, {} events discarded\n", trace_after->threads,
        human_bytes(static_cast<uint64_t>(static_cast<double>(trace_after->bytes - trace_before->bytes) / seconds)),
        human_count(trace_after->discarded));
  else
    out += "trace session: none\n";
  struct Row {
    std::string series;
    format::MetricKind kind;
    double value, rate, p50, p99;
  };
  std::vector<Row> rows;
  for (const metrics::MetricSample& sample : after.metrics) {
    const auto rate = metrics::rates(before, after, sample.name, sample.labels);
    double per_second = std::nan("");
    for (const auto& series : rate)
      if (series.labels == sample.labels) per_second = series.value;
    if (sample.kind == format::MetricKind::gauge) per_second = std::nan("");
    const bool histogram = sample.kind == format::MetricKind::histogram;
    rows.push_back({metrics::series_name(sample.name, sample.labels), sample.kind,
                    histogram ? sample.sum : sample.value, per_second,
                    histogram ? metrics::quantile(sample, 0.5) : std::nan(""),
                    histogram ? metrics::quantile(sample, 0.99) : std::nan("")});
  }
  if (options.sort == "rate")
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
      return (std::isnan(a.rate) ? -1 : a.rate) > (std::isnan(b.rate) ? -1 : b.rate);
    });
  else if (options.sort == "value")
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.value > b.value; });
  else
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.series < b.series; });
  fmt::format_to(std::back_inserter(out), "{:<56} {:<9} {:>14} {:>12} {:>10} {:>10}\n", "METRIC", "KIND", "VALUE|SUM",
                 "RATE/S", "P50", "P99");
  for (const Row& row : rows)
    fmt::format_to(std::back_inserter(out), "{:<56} {:<9} {:>14} {:>12} {:>10} {:>10}\n", row.series,
                   kind_label(row.kind), number(row.value), number(row.rate), number(row.p50), number(row.p99));
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

int run_top(const TopOptions& options) {
  const auto interval = std::chrono::nanoseconds(analysis::parse_duration(options.interval));
  const auto opened = open_metrics_of(options.pid);
  const metrics::MetricsMapping& mapping = *opened;
  const unsigned iterations = options.once ? 1 : options.iterations;
  const bool refresh_screen = isatty(STDOUT_FILENO) == 1 && iterations != 1;
  metrics::MetricsSnapshot before = mapping.read();
  std::optional<TraceActivity> trace_before = trace_activity(options.pid);
  for (unsigned done = 0; iterations == 0 || done < iterations; ++done) {
    std::this_thread::sleep_for(interval);
    metrics::MetricsSnapshot after = mapping.read();
    std::optional<TraceActivity> trace_after = trace_activity(options.pid);
    if (refresh_screen)
      std::fputs("\x1b[H\x1b[2J", stdout);
    else if (done > 0)
      std::fputs("\n", stdout);
    print_table(options, before, after, trace_before, trace_after);
    if (!mapping.writer_alive()) {
      fmt::print(stderr, "chronicle top: process {} has exited\n", options.pid);
      break;
    }
    before = std::move(after);
    trace_before = trace_after;
  }
  return 0;
}

}  // namespace

Command add_top(CLI::App& app) {
  auto options = std::make_shared<TopOptions>();
  CLI::App* command = app.add_subcommand("top", "A refreshing table of a running process's metrics and rates");
  command->add_option("pid", options->pid, "Process id")->required();
  command->add_option("--interval", options->interval, "Time between refreshes (e.g. 1s, 500ms)");
  command->add_flag("--once", options->once, "Print one table (rates over one interval) and exit");
  command->add_option("--iterations", options->iterations, "Print this many tables and exit");
  command->add_option("--sort", options->sort, "Order rows by name, rate or value")
      ->check(CLI::IsMember({"name", "rate", "value"}));
  return {command, [options] { return run_top(*options); }};
}

}  // namespace chronicle::cli
