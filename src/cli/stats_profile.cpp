#include "cli/stats_profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "analysis/sample_profile.hpp"
#include "cli/common.hpp"
#include "export/json_text.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::cli {
namespace {

constexpr size_t kTopPerGroup = 5;
constexpr size_t kCallGraphEntries = 10;

analysis::SampleGrouping grouping_of(const SampleProfileOptions& options) {
  if (options.by_span) return analysis::SampleGrouping::by_span;
  if (options.by_task) return analysis::SampleGrouping::by_task;
  return analysis::SampleGrouping::by_thread;
}

std::string_view group_heading(const SampleProfileOptions& options) {
  if (options.by_span) return "SPAN (innermost open)";
  if (options.by_task) return "TASK (running)";
  return "THREAD";
}

std::string share(uint64_t part, uint64_t whole) {
  return whole == 0 ? std::string("-") : fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / whole);
}

std::string milliseconds(uint64_t ns) {
  return fmt::format("{:.1f} ms", static_cast<double>(ns) / 1e6);
}

void print_states(std::string_view heading, const std::map<std::string, analysis::CpuStateTimes>& states) {
  if (states.empty()) return;
  fmt::print("\n{:<40} {:>14} {:>14} {:>14}\n", heading, "RUNNING", "RUNNABLE", "BLOCKED");
  std::vector<std::pair<std::string, analysis::CpuStateTimes>> rows(states.begin(), states.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second.total() > b.second.total(); });
  for (const auto& [label, times] : rows)
    fmt::print("{:<40} {:>14} {:>14} {:>14}\n", label, milliseconds(times.running), milliseconds(times.runnable),
               milliseconds(times.blocked));
}

nlohmann::json states_json(const std::map<std::string, analysis::CpuStateTimes>& states) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [label, times] : states)
    out[label] = {{"running_ns", times.running}, {"runnable_ns", times.runnable}, {"blocked_ns", times.blocked}};
  return out;
}

nlohmann::json flat_json(const analysis::CpuProfile& profile, const analysis::SampleProfile& samples, size_t top) {
  nlohmann::json rows = nlohmann::json::array();
  for (const analysis::FlatProfileRow& row : profile.flat()) {
    if (rows.size() == top) break;
    rows.push_back({{"function", samples.function_name(row.function)}, {"self", row.self}, {"total", row.total}});
  }
  return rows;
}

nlohmann::json profile_json(const analysis::SampleProfile& samples, const SampleProfileOptions& options) {
  nlohmann::json out;
  out["samples"] = samples.samples();
  out["other_process_samples"] = samples.other_process_samples();
  out["flat"] = flat_json(samples.overall(), samples, options.top);
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& [label, profile] : samples.groups())
    groups[label] = {{"samples", profile.samples()}, {"flat", flat_json(profile, samples, kTopPerGroup)}};
  out["groups"] = std::move(groups);
  out["grouping"] = options.by_span ? "span" : options.by_task ? "task" : "thread";
  if (samples.has_switches())
    out["cpu_states"] = {{"threads", states_json(samples.thread_states())},
                         {"spans", states_json(samples.span_states())},
                         {"tasks", states_json(samples.task_states())}};
  out["warnings"] = samples.warnings();
  return out;
}

void print_text(const std::string& directory, const analysis::SampleProfile& samples,
                const SampleProfileOptions& options) {
  auto name_of = [&samples](uint32_t id) { return samples.function_name(id); };
  fmt::print("# {}: {} samples", directory, human_count(samples.samples()));
  if (samples.other_process_samples() > 0)
    fmt::print(" ({} more in child processes, not symbolised)", human_count(samples.other_process_samples()));
  fmt::print("\n\nFlat profile (samples of CPU time; self: the function was running, total: it was on the stack):\n");
  fmt::print("{}", analysis::format_flat_profile(samples.overall(), name_of, options.top));
  fmt::print("\nCall graph (the {} functions with the most samples):\n", kCallGraphEntries);
  fmt::print("{}", analysis::format_call_graph(samples.overall(), name_of, kCallGraphEntries));
  std::vector<std::pair<std::string, const analysis::CpuProfile*>> groups;
  for (const auto& [label, profile] : samples.groups()) groups.emplace_back(label, &profile);
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.second->samples() > b.second->samples(); });
  fmt::print("\n{:<40} {:>10} {:>7}  TOP FUNCTIONS (self samples)\n", group_heading(options), "SAMPLES", "%");
  for (const auto& [label, profile] : groups) {
    std::string top;
    size_t listed = 0;
    for (const analysis::FlatProfileRow& row : profile->flat()) {
      if (listed++ == kTopPerGroup || row.self == 0) break;
      top += fmt::format("{}{} {}", top.empty() ? "" : ", ", samples.function_name(row.function), row.self);
    }
    fmt::print("{:<40} {:>10} {:>7}  {}\n", label, profile->samples(), share(profile->samples(), samples.samples()),
               top);
  }
  if (samples.has_switches()) {
    print_states("CPU STATE BY THREAD", samples.thread_states());
    print_states("CPU STATE BY SPAN (inclusive)", samples.span_states());
    print_states("CPU STATE BY TASK (while it ran)", samples.task_states());
  } else {
    fmt::print("\n(no context switches in this trace: record with --sched for running, runnable and blocked time)\n");
  }
}

}  // namespace

int print_sample_profile(const std::vector<std::string>& traces, const SampleProfileOptions& options) {
  nlohmann::json all = nlohmann::json::array();
  for (const std::string& directory : traces) {
    reader::Trace trace(directory);
    warn_about_damage(trace);
    const analysis::SampleProfile samples(trace, grouping_of(options));
    for (const std::string& warning : samples.warnings()) fmt::print(stderr, "chronicle: warning: {}\n", warning);
    if (samples.samples() == 0 && !samples.has_switches())
      fmt::print(stderr, "chronicle: {}: no samples (record with --sample)\n", directory);
    if (options.folded) {
      for (const auto& [label, profile] : samples.groups())
        fmt::print("{}", profile.folded([&samples](uint32_t id) { return samples.function_name(id); }, label));
    } else if (options.json) {
      all.push_back(profile_json(samples, options));
    } else {
      print_text(directory, samples, options);
    }
  }
  if (options.json && !options.folded) fmt::print("{}\n", exports::json_text(all.size() == 1 ? all[0] : all, 2));
  std::fflush(stdout);
  return 0;
}

}  // namespace chronicle::cli
