// `chronicle metrics serve|show|query PID`: a running process's metrics, read from its metrics
// mapping with no help from the process, for Prometheus (serve, show) and for people (query).
#include <signal.h>

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include "analysis/counter_windows.hpp"
#include "cli/common.hpp"
#include "http/http_server.hpp"
#include "metrics/exposition.hpp"
#include "metrics/query.hpp"
#include "metrics/snapshot.hpp"

namespace chronicle::cli {
namespace {

struct MetricsOptions {
  int pid = 0;
  // serve
  std::string address = "127.0.0.1";
  uint16_t port = 9464;
  // show
  std::string format = "openmetrics";
  // query
  std::string name;
  std::vector<std::string> by;
  std::vector<std::string> where;
  std::string aggregation = "sum";
  std::string rate_over;
  std::string drill;
};

int run_serve(const MetricsOptions& options) {
  std::shared_ptr<metrics::MetricsMapping> mapping = open_metrics_of(options.pid);
  mapping->read();  // a malformed entry ends the command now (exit 2), not each scrape later
  // Blocked before the server's thread starts, so that it inherits the mask and only sigwait
  // below sees these signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  const int pid = options.pid;
  auto process_ended = [mapping, pid]() -> std::optional<std::string> {
    if (mapping->writer_alive()) return std::nullopt;
    return fmt::format("chronicle: process {} has ended; its last metrics are no longer served", pid);
  };
  metrics::MetricsHttpServer server([mapping] { return mapping->read(); }, options.address, options.port,
                                    process_ended);
  fmt::print(stderr, "chronicle: serving the metrics of process {} at http://{}:{}/metrics\n", options.pid,
             options.address, server.port());
  int signal = 0;
  sigwait(&stop_signals, &signal);
  return 0;
}

int run_show(const MetricsOptions& options) {
  const auto opened = open_metrics_of(options.pid);
  const metrics::MetricsMapping& mapping = *opened;
  const auto format =
      options.format == "prometheus" ? metrics::TextFormat::prometheus : metrics::TextFormat::openmetrics;
  const std::string text = metrics::expose(mapping.read(), format);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

metrics::LabelList parse_matchers(const std::vector<std::string>& texts) {
  metrics::LabelList out;
  for (const auto& text : texts) {
    const size_t equals = text.find('=');
    if (equals == std::string::npos || equals == 0)
      throw std::invalid_argument(fmt::format("\"{}\": say LABEL=VALUE", text));
    out.emplace_back(text.substr(0, equals), text.substr(equals + 1));
  }
  return out;
}

int run_query(const MetricsOptions& options) {
  const auto opened = open_metrics_of(options.pid);
  const metrics::MetricsMapping& mapping = *opened;
  const auto how = metrics::parse_aggregation(options.aggregation);
  if (!how)
    throw std::invalid_argument(
        fmt::format("aggregation \"{}\": say sum, avg, max, min or count", options.aggregation));
  const metrics::LabelList where = parse_matchers(options.where);
  std::vector<std::string> by = options.by;
  // Drilling down groups by the path's labels and then the child's.
  if (!options.drill.empty()) {
    by.clear();
    for (const auto& [key, value] : where) by.push_back(key);
    by.push_back(options.drill);
  }
  const metrics::MetricsSnapshot first = mapping.read();
  if (std::none_of(first.metrics.begin(), first.metrics.end(),
                   [&](const metrics::MetricSample& sample) { return sample.name == options.name; })) {
    fmt::print(stderr, "chronicle: no metric named {} in process {}\n", options.name, options.pid);
    return kExitFailure;
  }
  std::vector<metrics::Series> series;
  if (options.rate_over.empty()) {
    series = metrics::select(first, options.name, where);
  } else {
    const metrics::MetricsSnapshot& before = first;
    std::this_thread::sleep_for(std::chrono::nanoseconds(analysis::parse_duration(options.rate_over)));
    series = metrics::rates(before, mapping.read(), options.name, where);
  }
  for (const metrics::Series& group : metrics::aggregate(series, by, *how))
    fmt::print("{} {}\n", metrics::series_name(options.name, group.labels), fmt::format("{:.12g}", group.value));
  return 0;
}

}  // namespace

Command add_metrics(CLI::App& app) {
  auto options = std::make_shared<MetricsOptions>();
  CLI::App* command =
      app.add_subcommand("metrics", "A running process's metrics: serve them to Prometheus, print, query");
  command->require_subcommand(1);
  CLI::App* serve = command->add_subcommand("serve", "Serve a process's metrics at http://ADDRESS:PORT/metrics");
  serve->add_option("pid", options->pid, "Process id")->required();
  serve->add_option("--port", options->port, "Port (0: any free one)");
  serve->add_option("--address", options->address, "Address to listen on");
  CLI::App* show = command->add_subcommand("show", "Print a process's metrics in the exposition format");
  show->add_option("pid", options->pid, "Process id")->required();
  show->add_option("--format", options->format, "openmetrics or prometheus")
      ->check(CLI::IsMember({"openmetrics", "prometheus"}));
  CLI::App* query = command->add_subcommand(
      "query", "Aggregate a metric's series by labels (sum, avg, max, min, count), or drill down into a label path");
  query->add_option("pid", options->pid, "Process id")->required();
  query->add_option("name", options->name, "Metric name")->required();
  query->add_option("--by", options->by, "Group by these labels (none: the total)");
  query->add_option("--where", options->where, "Only series with LABEL=VALUE (repeatable)");
  query->add_option("--op", options->aggregation, "sum, avg, max, min or count");
  query->add_option("--rate", options->rate_over, "Per-second rates measured over this interval (e.g. 1s)");
  query->add_option("--drill", options->drill,
                    "The children of the --where path along this label (groups by the path's labels and it)");
  return {command, [options, serve, show, query] {
            if (serve->parsed()) return run_serve(*options);
            if (show->parsed()) return run_show(*options);
            if (query->parsed()) return run_query(*options);
            return kExitFailure;
          }};
}

}  // namespace chronicle::cli
