#include "cli/record_trigger.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "analysis/counter_windows.hpp"
#include "cli/common.hpp"
#include "format/output_file.hpp"

namespace chronicle::cli {

constexpr auto kMeasureInterval = std::chrono::milliseconds(100);

struct TriggerWatcher::Watched {
  std::unique_ptr<metrics::MetricsMapping> metrics;
  metrics::SnapshotWindow window;
  std::vector<metrics::TriggerState> states;
  bool announced = false;
};

namespace {

uint64_t unix_now_ns() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace

TriggerWatcher::TriggerWatcher(const TriggerOptions& options, const std::string& output)
    : options_(options),
      after_(analysis::parse_duration(options.after)),
      window_(analysis::parse_duration(options.window)),
      directory_(output + ".triggers") {
  for (const std::string& text : options.conditions) conditions_.push_back(metrics::parse_trigger(text));
  if (options.hysteresis < 0 || options.hysteresis >= 1)
    throw std::invalid_argument(
        fmt::format("--trigger-hysteresis {}: expected a fraction in [0, 1)", options.hysteresis));
  // Beside the trace, as private as it: never through a link, nor into a directory another user
  // made there first.
  format::create_private_directory(directory_);
  if (const std::string problem = collector::shared_directory_problem(directory_); !problem.empty())
    throw format::OutputRefused(fmt::format("{}: another user could replace the snapshots", problem));
}

TriggerWatcher::~TriggerWatcher() = default;

void TriggerWatcher::log(const std::string& line) {
  tell("chronicle: trigger: {}\n", line);
  log_ += line + '\n';
  try {
    format::write_private_file(directory_ + "/log", log_, format::WhenExists::replace);
  } catch (const std::exception& failure) {
    tell("chronicle: trigger: {}\n", failure.what());
  }
}

void TriggerWatcher::observe(int pid, Watched& watched) {
  const metrics::MetricsSnapshot& from = watched.window.add(watched.metrics->read());
  const metrics::MetricsSnapshot& now = watched.window.newest();
  std::vector<std::optional<double>> values;
  for (const metrics::TriggerState& state : watched.states)
    values.push_back(metrics::measure(state.condition(), from, now));
  for (size_t i = 0; i < watched.states.size(); ++i) {
    metrics::TriggerState& state = watched.states[i];
    const std::optional<double>& value = values[i];
    if (value && !watched.announced)
      log(fmt::format("process {}: watching {} (now {:.6g}; armed again past {:.6g})", pid, state.condition().text,
                      *value, state.rearm_line()));
    switch (state.observe(value)) {
      case metrics::TriggerState::Step::fired: {
        ++fired_;
        const bool within_limit = fired_ <= options_.limit;
        log(fmt::format("process {}: fired #{}: {} (value {:.6g}){}", pid, fired_, state.condition().text, *value,
                        within_limit
                            ? fmt::format("; snapshot in {}/trigger-{} in {}", directory_, fired_, options_.after)
                            : fmt::format("; no snapshot (--trigger-limit {})", options_.limit)));
        if (within_limit)
          pending_.push_back(
              {pid, fired_, std::chrono::steady_clock::now() + after_, state.condition().text, *value, unix_now_ns()});
        break;
      }
      case metrics::TriggerState::Step::rearmed:
        log(fmt::format("process {}: re-armed: {} (value {:.6g})", pid, state.condition().text, *value));
        break;
      case metrics::TriggerState::Step::none:
        break;
    }
  }
  for (const auto& value : values) watched.announced = watched.announced || value.has_value();
}

void TriggerWatcher::poll(const std::map<std::string, const collector::SessionMapping*>& sessions) {
  const auto now = std::chrono::steady_clock::now();
  if (now >= next_measure_) {
    next_measure_ = now + kMeasureInterval;
    for (const auto& [path, mapping] : sessions) {
      const int pid = mapping->header().pid;
      auto& watched = watched_[pid];
      if (!watched) {
        watched = std::make_unique<Watched>(Watched{nullptr, metrics::SnapshotWindow(window_), {}, false});
        for (const auto& condition : conditions_) watched->states.emplace_back(condition, options_.hysteresis);
      }
      if (!watched->metrics) {
        try {
          watched->metrics = open_metrics_of(pid);
        } catch (const std::runtime_error&) {
          continue;  // no metric registered yet
        }
      }
      if (mapping->writer_alive()) observe(pid, *watched);
    }
  }
  for (auto pending = pending_.begin(); pending != pending_.end();) {
    const collector::SessionMapping* mapping = nullptr;
    for (const auto& [path, session] : sessions)
      if (session->header().pid == pending->pid) mapping = session;
    const bool ended = mapping && (mapping->finished() || !mapping->writer_alive());
    if (!mapping || (now < pending->due && !ended)) {
      ++pending;
      continue;
    }
    take(*pending, *mapping);
    pending = pending_.erase(pending);
  }
}

void TriggerWatcher::finish(const std::map<std::string, const collector::SessionMapping*>& sessions) {
  for (const Pending& pending : pending_)
    for (const auto& [path, mapping] : sessions)
      if (mapping->header().pid == pending.pid) take(pending, *mapping);
  pending_.clear();
}

void TriggerWatcher::take(const Pending& pending, const collector::SessionMapping& mapping) {
  const std::string output = fmt::format("{}/trigger-{}", directory_, pending.number);
  try {
    collector::SessionMapping reader(mapping.base(), mapping.header().file_size);
    collector::Collector collector(reader, output);
    collector.snapshot();
    nlohmann::json about = {{"condition", pending.condition},
                            {"value", pending.value},
                            {"pid", pending.pid},
                            {"crossed_unix_ns", pending.crossed_unix_ns},
                            {"snapshot_unix_ns", unix_now_ns()},
                            {"events", collector.stats().events}};
    format::write_private_file(output + "/trigger.json", about.dump(2) + '\n', format::WhenExists::refuse);
    log(fmt::format("process {}: snapshot #{} in {}: {} events", pending.pid, pending.number, output,
                    collector.stats().events));
  } catch (const std::exception& failure) {
    log(fmt::format("process {}: snapshot #{} not written: {}", pending.pid, pending.number, failure.what()));
  }
}

}  // namespace chronicle::cli
