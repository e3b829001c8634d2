// `chronicle top PID`: a live view of a running process, read from its shared mappings with no
// help from it: its trace session (events and bytes per second, discards, the tracing's
// estimated CPU overhead, per category with its state) and its metrics (values, rates, histogram
// quantiles). On a terminal it redraws in place; `s` changes the order, `q` quits.
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "analysis/counter_windows.hpp"
#include "cli/common.hpp"
#include "collector/collector.hpp"
#include "format/category_rules.hpp"
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

// What a running trace session of the process has written and lost so far.
struct TraceActivity {
  std::chrono::steady_clock::time_point when;
  std::string process_name;
  uint64_t bytes = 0;  // committed to the rings, packet headers included
  uint64_t discarded = 0;
  uint64_t event_cost_ps = 0;
  uint64_t collector_cpu_ns = 0;  // measured by the collector (the program's thread, or record)
  uint32_t threads = 0;
  std::vector<collector::CategoryView> categories;
};

std::optional<TraceActivity> trace_activity(int pid) {
  const uid_t owner = shm::expected_mapping_owner(pid);
  for (const std::string& path : find_session_mappings(pid)) {
    try {
      collector::SessionMapping mapping(path, owner);  // refusals are silent here: top redraws
      if (mapping.finished()) continue;
      TraceActivity activity;
      activity.when = std::chrono::steady_clock::now();
      activity.process_name = mapping.header().process_name;
      activity.event_cost_ps = mapping.event_cost_ps();
      activity.collector_cpu_ns = mapping.header().collector_cpu_ns.load(std::memory_order_relaxed);
      activity.categories = mapping.categories();
      const uint32_t channels = mapping.channel_count();
      activity.threads = channels;
      for (uint32_t channel = 0; channel < channels; ++channel) {
        const uint64_t committed = mapping.packets_committed(channel);
        activity.bytes += committed * mapping.geometry().packet_size;
        const auto* open = reinterpret_cast<const format::PacketHeader*>(mapping.ring_slot(channel, committed));
        if (open->packet_seq_num.load(std::memory_order_acquire) == committed)
          activity.bytes += open->content_size_bits.load(std::memory_order_acquire) / 8;
      }
      activity.discarded = collector::session_totals(activity.categories, mapping.header()).discarded;
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

// The trace points' CPU time over an interval, as % of one core: events x the cost measured at
// start (an estimate: docs/control.md).
double overhead_percent(uint64_t events, uint64_t cost_ps, double seconds) {
  return seconds > 0 ? 100.0 * static_cast<double>(events) * static_cast<double>(cost_ps) / 1e12 / seconds : 0;
}

struct CategoryRow {
  std::string name;
  uint8_t state;
  double events_per_second, bytes_per_second;
  uint64_t discarded;
  double overhead;
};

void print_trace(std::string& out, const std::string& sort, const TraceActivity& before, const TraceActivity& after) {
  const double seconds = std::chrono::duration<double>(after.when - before.when).count();
  std::map<std::string, const collector::CategoryView*> earlier;
  for (const auto& category : before.categories) earlier[category.name] = &category;
  std::vector<CategoryRow> rows;
  uint64_t events = 0;
  for (const auto& category : after.categories) {
    const auto found = earlier.find(category.name);
    const uint64_t events_then = found == earlier.end() ? 0 : found->second->events;
    const uint64_t bytes_then = found == earlier.end() ? 0 : found->second->bytes;
    const uint64_t new_events = category.events - std::min(events_then, category.events);
    events += new_events;
    rows.push_back({category.name, category.state, static_cast<double>(new_events) / seconds,
                    static_cast<double>(category.bytes - std::min(bytes_then, category.bytes)) / seconds,
                    category.discarded, overhead_percent(new_events, after.event_cost_ps, seconds)});
  }
  const double trace_points = overhead_percent(events, after.event_cost_ps, seconds);
  const double collector = seconds > 0
                               ? 100.0 *
                                     static_cast<double>(after.collector_cpu_ns -
                                                         std::min(before.collector_cpu_ns, after.collector_cpu_ns)) /
                                     1e9 / seconds
                               : 0;
  fmt::format_to(std::back_inserter(out),
                 "trace session: {} threads, {} events/s, {}/s written, {} events discarded, CPU overhead {:.2f}% "
                 "(trace points {:.2f}%, estimated at {:.1f} ns/event; collector {:.2f}%, measured)\n",
                 after.threads, human_count(static_cast<uint64_t>(static_cast<double>(events) / seconds)),
                 human_bytes(static_cast<uint64_t>(static_cast<double>(after.bytes - before.bytes) / seconds)),
                 human_count(after.discarded), trace_points + collector, trace_points,
                 static_cast<double>(after.event_cost_ps) / 1000.0, collector);
  if (sort == "rate" || sort == "value")
    std::stable_sort(rows.begin(), rows.end(), [](const CategoryRow& a, const CategoryRow& b) {
      return a.events_per_second > b.events_per_second;
    });
  fmt::format_to(std::back_inserter(out), "{:<32} {:<10} {:>12} {:>12} {:>10} {:>10}\n", "CATEGORY", "STATE",
                 "EVENTS/S", "BYTES/S", "DISCARDED", "OVERHEAD%");
  for (const CategoryRow& row : rows)
    fmt::format_to(std::back_inserter(out), "{:<32} {:<10} {:>12.0f} {:>12.0f} {:>10} {:>10.3f}\n", row.name,
                   format::describe_category_state(row.state), row.events_per_second, row.bytes_per_second,
                   row.discarded, row.overhead);
}

void print_metrics(std::string& out, const std::string& sort, const metrics::MetricsSnapshot& before,
                   const metrics::MetricsSnapshot& after) {
  struct Row {
    std::string series;
    format::MetricKind kind;
    double value, rate, p50, p99;
  };
  std::vector<Row> rows;
  const std::vector<double> rates = metrics::sample_rates(before, after);
  for (size_t index = 0; index < after.metrics.size(); ++index) {
    const metrics::MetricSample& sample = after.metrics[index];
    const double per_second = sample.kind == format::MetricKind::gauge ? std::nan("") : rates[index];
    const bool histogram = sample.kind == format::MetricKind::histogram;
    rows.push_back({metrics::series_name(sample.name, sample.labels), sample.kind,
                    histogram ? sample.sum : sample.value, per_second,
                    histogram ? metrics::quantile(sample, 0.5) : std::nan(""),
                    histogram ? metrics::quantile(sample, 0.99) : std::nan("")});
  }
  if (sort == "rate")
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
      return (std::isnan(a.rate) ? -1 : a.rate) > (std::isnan(b.rate) ? -1 : b.rate);
    });
  else if (sort == "value")
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.value > b.value; });
  else
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.series < b.series; });
  fmt::format_to(std::back_inserter(out), "{:<56} {:<9} {:>14} {:>12} {:>10} {:>10}\n", "METRIC", "KIND", "VALUE|SUM",
                 "RATE/S", "P50", "P99");
  for (const Row& row : rows)
    fmt::format_to(std::back_inserter(out), "{:<56} {:<9} {:>14} {:>12} {:>10} {:>10}\n", row.series,
                   kind_label(row.kind), number(row.value), number(row.rate), number(row.p50), number(row.p99));
}

// One sample of everything top shows.
struct Sample {
  std::optional<metrics::MetricsSnapshot> metrics;
  std::optional<TraceActivity> trace;
};

std::string render(int pid, const std::string& sort, const Sample& before, const Sample& after) {
  std::string out;
  const std::string name = after.metrics ? after.metrics->process_name : after.trace ? after.trace->process_name : "";
  fmt::format_to(std::back_inserter(out), "chronicle top - pid {} ({})", pid, name);
  if (after.metrics) {
    fmt::format_to(std::back_inserter(out), ": {} metrics, {} threads", after.metrics->metrics.size(),
                   after.metrics->threads);
    if (after.metrics->dropped)
      fmt::format_to(std::back_inserter(out), ", {} metrics refused (full)", after.metrics->dropped);
  }
  out += '\n';
  if (before.trace && after.trace && after.trace->when > before.trace->when)
    print_trace(out, sort, *before.trace, *after.trace);
  else
    out += "trace session: none\n";
  if (before.metrics && after.metrics) print_metrics(out, sort, *before.metrics, *after.metrics);
  return out;
}

// Keys from a terminal, read one at a time without echo, for as long as this lives.
class KeyReader {
 public:
  KeyReader() {
    if (isatty(STDIN_FILENO) != 1 || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~KeyReader() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  KeyReader(const KeyReader&) = delete;
  KeyReader& operator=(const KeyReader&) = delete;
  // Waits up to `limit` for a key; 0 when none came.
  char wait(std::chrono::nanoseconds limit) {
    if (!active_) {
      std::this_thread::sleep_for(limit);
      return 0;
    }
    pollfd input{STDIN_FILENO, POLLIN, 0};
    const auto milliseconds = std::chrono::duration_cast<std::chrono::milliseconds>(limit).count();
    char key = 0;
    if (poll(&input, 1, static_cast<int>(milliseconds)) > 0 && read(STDIN_FILENO, &key, 1) != 1) key = 0;
    return key;
  }

 private:
  termios saved_{};
  bool active_ = false;
};

volatile sig_atomic_t g_interrupted = 0;

// Whether the process watched since `top` began runs: through a pidfd opened at the start, which a
// pid reused by another process later cannot fool (kill(pid, 0) could); kill where there is none.
class WatchedProcess {
 public:
  explicit WatchedProcess(int pid) : pid_(pid), pidfd_(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))) {}
  ~WatchedProcess() {
    if (pidfd_ >= 0) ::close(pidfd_);
  }
  WatchedProcess(const WatchedProcess&) = delete;
  WatchedProcess& operator=(const WatchedProcess&) = delete;
  bool running() const {
    if (pidfd_ < 0) return ::kill(pid_, 0) == 0 || errno == EPERM;
    pollfd exited{pidfd_, POLLIN, 0};
    return ::poll(&exited, 1, 0) == 0;
  }

 private:
  int pid_;
  int pidfd_;
};

int run_top(TopOptions options) {
  const auto interval = std::chrono::nanoseconds(analysis::parse_duration(options.interval));
  options.pid = recorded_program_or_itself(options.pid);
  const WatchedProcess watched(options.pid);
  std::unique_ptr<metrics::MetricsMapping> metrics_mapping;
  std::string no_metrics;
  try {
    metrics_mapping = open_metrics_of(options.pid);
  } catch (const std::runtime_error& error) {
    no_metrics = error.what();
  }
  auto take_sample = [&] {
    return Sample{metrics_mapping ? std::optional(metrics_mapping->read()) : std::nullopt, trace_activity(options.pid)};
  };
  Sample before = take_sample();
  if (!metrics_mapping && !before.trace)
    throw std::runtime_error(fmt::format("{}, and no trace session of process {} is running", no_metrics, options.pid));
  const unsigned iterations = options.once ? 1 : options.iterations;
  const bool live = isatty(STDOUT_FILENO) == 1 && iterations != 1;
  std::optional<KeyReader> keys;
  if (live) {
    keys.emplace();
    g_interrupted = 0;
    signal(SIGINT, [](int) { g_interrupted = 1; });
    std::fputs("\x1b[?1049h", stdout);  // the terminal's alternate screen, as top uses
  }
  const char* sorts[] = {"name", "rate", "value"};
  for (unsigned done = 0; (iterations == 0 || done < iterations) && !g_interrupted; ++done) {
    const auto until = std::chrono::steady_clock::now() + interval;
    for (auto now = std::chrono::steady_clock::now(); now < until && !g_interrupted;
         now = std::chrono::steady_clock::now()) {
      const char key = keys ? keys->wait(until - now) : (std::this_thread::sleep_for(until - now), 0);
      if (key == 'q') g_interrupted = 1;
      if (key == 's') {
        const auto at = std::find(std::begin(sorts), std::end(sorts), options.sort);
        options.sort = at == std::end(sorts) || at + 1 == std::end(sorts) ? sorts[0] : *(at + 1);
      }
    }
    if (g_interrupted) break;
    Sample after = take_sample();
    std::string screen = render(options.pid, options.sort, before, after);
    if (live) {
      // Redrawn in place: home, each line cleared to its end, the rest of the screen cleared.
      std::string framed = "\x1b[H";
      for (size_t start = 0; start < screen.size();) {
        const size_t end = screen.find('\n', start);
        framed += screen.substr(start, end - start) + "\x1b[K\n";
        start = end == std::string::npos ? screen.size() : end + 1;
      }
      screen = framed + fmt::format("sort: {} (s: next, q: quit)\x1b[K\n\x1b[J", options.sort);
    } else if (done > 0) {
      screen.insert(0, "\n");
    }
    std::fwrite(screen.data(), 1, screen.size(), stdout);
    std::fflush(stdout);
    const bool alive = metrics_mapping ? metrics_mapping->writer_alive() : watched.running();
    if (!alive || (!metrics_mapping && !after.trace)) {
      if (live) std::fputs("\x1b[?1049l", stdout);
      fmt::print(stderr, "chronicle top: process {} has exited\n", options.pid);
      return 0;
    }
    before = std::move(after);
  }
  if (live) std::fputs("\x1b[?1049l", stdout);
  return 0;
}

}  // namespace

Command add_top(CLI::App& app) {
  auto options = std::make_shared<TopOptions>();
  CLI::App* command =
      app.add_subcommand("top", "A live view of a running process: its trace session by category, and its metrics");
  command->add_option("pid", options->pid, "Process id")->required();
  command->add_option("--interval", options->interval, "Time between refreshes (e.g. 1s, 500ms)");
  command->add_flag("--once", options->once, "Print one table (rates over one interval) and exit");
  command->add_option("--iterations", options->iterations, "Print this many tables and exit");
  command->add_option("--sort", options->sort, "Order rows by name, rate or value (on a terminal, s changes it)")
      ->check(CLI::IsMember({"name", "rate", "value"}));
  return {command, [options] { return run_top(*options); }};
}

}  // namespace chronicle::cli
