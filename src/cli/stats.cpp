// `chronicle stats DIR`: a trace in numbers (a flat profile of spans, threads busy and idle,
// tasks by kind, counters, losses), `--critical-path TASK`, and `--counters`: counter history
// over a window (the last 5 minutes, since a time, between two times), from prefix sums.
#include <fnmatch.h>

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <ctime>
#include <functional>
#include <optional>

#include <nlohmann/json.hpp>

#include "analysis/attribute_groups.hpp"
#include "analysis/counter_windows.hpp"
#include "analysis/cpu_timeline.hpp"
#include "analysis/critical_path.hpp"
#include "analysis/critical_path_cpu.hpp"
#include "analysis/profile.hpp"
#include "cli/common.hpp"
#include "cli/stats_profile.hpp"
#include "export/json_text.hpp"
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
  bool json = false;
  std::string critical_path;
  size_t top = 30;
  bool profile = false;  // the sampler's events (stats_profile.hpp)
  SampleProfileOptions samples;
  bool verbose = false;  // every detail summarised (a flight recording's windows)
  std::string group_by;  // an attribute's key: spans by its values
};

std::string cell(double value) {
  if (std::isnan(value)) return "-";
  return fmt::format("{:.6g}", value);
}

std::string utc_time(int64_t unix_ns) {
  const time_t seconds = static_cast<time_t>(unix_ns / 1'000'000'000);
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                     parts.tm_hour, parts.tm_min, parts.tm_sec, unix_ns % 1'000'000'000 / 1'000'000);
}

int print_counter_windows(const StatsOptions& options) {
  const auto traces = reader::find_traces(options.directory);
  for (const auto& directory : traces) {
    reader::Trace trace(directory);
    warn_about_damage(trace);
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

std::string duration_text(uint64_t ns) {
  if (ns < 1'000) return fmt::format("{} ns", ns);
  if (ns < 1'000'000) return fmt::format("{:.1f} us", static_cast<double>(ns) / 1e3);
  if (ns < 1'000'000'000) return fmt::format("{:.2f} ms", static_cast<double>(ns) / 1e6);
  return fmt::format("{:.3f} s", static_cast<double>(ns) / 1e9);
}

nlohmann::json distribution_json(const analysis::Distribution& d) {
  return {{"count", d.count}, {"total_ns", d.total}, {"mean_ns", d.mean()}, {"p50_ns", d.p50},
          {"p90_ns", d.p90},  {"p99_ns", d.p99},     {"max_ns", d.max}};
}

// The tracing's own cost, from the session's counters (docs/control.md, "The overhead
// estimate"): the events it counted x the per-event cost it measured at start (the trace points'
// part, an estimate), and the CPU its own threads took (measured; absent from older traces).
struct TracingCost {
  double events = 0, event_cost_ns = 0;
  std::optional<double> threads_cpu_ns;
  double trace_points_ns() const { return events * event_cost_ns; }
  double cpu_ns() const { return trace_points_ns() + threads_cpu_ns.value_or(0); }
};

std::optional<TracingCost> tracing_cost(const analysis::Profile& p) {
  TracingCost cost;
  bool events = false, per_event = false;
  for (const auto& counter : p.counters) {
    if (counter.category != "chronicle") continue;
    if (counter.name == "events") cost.events = counter.last, events = true;
    if (counter.name == "event cost ns") cost.event_cost_ns = counter.last, per_event = true;
    if (counter.name == "tracing threads CPU ns") cost.threads_cpu_ns = counter.last;
  }
  return events && per_event ? std::optional(cost) : std::nullopt;
}

nlohmann::json profile_json(const analysis::Profile& p) {
  nlohmann::json out = {{"directory", p.directory},
                        {"host", p.hostname},
                        {"process", p.process_name},
                        {"pid", p.pid},
                        {"events", p.events},
                        {"bytes", p.bytes},
                        {"bytes_per_event", p.bytes_per_event()},
                        {"events_per_second", p.events_per_second()},
                        {"duration_ns", p.duration},
                        {"discarded", p.discarded},
                        {"spans", nlohmann::json::array()},
                        {"threads", nlohmann::json::array()},
                        {"task_kinds", nlohmann::json::array()},
                        {"counters", nlohmann::json::array()},
                        {"problems", p.problems}};
  for (const auto& span : p.spans) {
    nlohmann::json entry = distribution_json(span.duration);
    entry["category"] = span.category;
    entry["name"] = span.name;
    entry["self_ns"] = span.self;
    entry["running_ns"] = span.running;
    out["spans"].push_back(entry);
  }
  for (const auto& thread : p.threads)
    out["threads"].push_back({{"thread_id", thread.thread_id},
                              {"name", thread.name},
                              {"events", thread.events},
                              {"busy_ns", thread.busy},
                              {"idle_ns", thread.idle},
                              {"span_ns", thread.span},
                              {"discarded", thread.discarded}});
  for (const auto& kind : p.task_kinds)
    out["task_kinds"].push_back({{"kind", kind.kind},
                                 {"count", kind.count},
                                 {"failed", kind.failed},
                                 {"cancelled", kind.cancelled},
                                 {"unresolved", kind.unresolved},
                                 {"cut_by_window", kind.cut_by_window},
                                 {"lifetime", distribution_json(kind.lifetime)},
                                 {"run_time", distribution_json(kind.run_time)}});
  if (p.flight) {
    nlohmann::json windows = nlohmann::json::array();
    for (const auto& window : p.flight->windows)
      windows.push_back({{"thread_id", window.thread_id}, {"name", window.name}, {"length_ns", window.seconds_ns}});
    out["flight_windows"] = {{"tasks_before_window", p.flight->tasks_before_window},
                             {"spans_before_window", p.flight->spans_before_window},
                             {"runs_before_window", p.flight->runs_before_window},
                             {"tasks_cut", p.flight->tasks_cut},
                             {"windows", windows}};
  }
  if (const auto cost = tracing_cost(p))
    out["tracing_cost"] = {{"events", cost->events},
                           {"event_cost_ns", cost->event_cost_ns},
                           {"trace_points_cpu_ns", cost->trace_points_ns()},
                           {"threads_cpu_ns", cost->threads_cpu_ns ? nlohmann::json(*cost->threads_cpu_ns) : nullptr},
                           {"cpu_ns", cost->cpu_ns()},
                           {"estimate", true}};
  for (const auto& counter : p.counters)
    out["counters"].push_back({{"category", counter.category},
                               {"name", counter.name},
                               {"kind", analysis::kind_name(counter.kind)},
                               {"samples", counter.samples},
                               {"min", counter.min},
                               {"max", counter.max},
                               {"last", counter.last},
                               {"rate_per_second", counter.rate_per_second}});
  return out;
}

// What the reader skipped; events_lost is null when unknown.
nlohmann::json damage_json(const reader::Trace& trace) {
  nlohmann::json out = nlohmann::json::array();
  for (const reader::Damage& damage : trace.damage())
    out.push_back({{"file", damage.file},
                   {"offset", damage.offset},
                   {"bytes", damage.bytes},
                   {"events_lost", damage.events_lost ? nlohmann::json(*damage.events_lost) : nlohmann::json()},
                   {"reason", damage.reason}});
  return out;
}

// One block on stderr for what a flight recording's windows leave out, instead of a warning for
// each task and span; `verbose` adds a line for each task.
void print_flight_windows(const analysis::FlightWindows& flight, bool verbose) {
  std::string windows;
  for (const auto& window : flight.windows)
    windows += fmt::format("{}{} {} {}", windows.empty() ? "" : ", ", window.thread_id, window.name,
                           duration_text(window.seconds_ns));
  fmt::print(stderr,
             "chronicle: a flight recording: each thread's ring holds its own window, ending at the snapshot.\n"
             "  {} tasks, {} task runs and {} spans begin before their thread's window\n"
             "  {} tasks unresolved in the windows are cut: begun before their thread's window or last seen before "
             "a window began, their end may be in a window no longer held (not counted OPEN)\n"
             "  windows per thread, shortest first: {}\n",
             flight.tasks_before_window, flight.runs_before_window, flight.spans_before_window, flight.tasks_cut,
             windows);
  if (!verbose) {
    if (!flight.details.empty()) fmt::print(stderr, "  (--verbose names each task)\n");
    return;
  }
  for (const std::string& line : flight.details) fmt::print(stderr, "  {}\n", line);
}

void print_tracing_cost(const analysis::Profile& p, const TracingCost& cost) {
  const auto text = [](double ns) { return duration_text(static_cast<uint64_t>(ns)); };
  const std::string threads =
      cost.threads_cpu_ns
          ? fmt::format(" + {} measured in its own threads (collector, control)", text(*cost.threads_cpu_ns))
          : std::string();
  fmt::print(
      "the tracing itself, an estimate: {} events written by the session's last count x {:.1f} ns{} = {} of CPU "
      "({:.3f}% of one core over the trace). The per-event cost is measured at start on a hot loop: a busy "
      "program's trace points cost more (docs/performance.md, \"The monitor's own figures\")\n",
      human_count(static_cast<uint64_t>(cost.events)), cost.event_cost_ns, threads, text(cost.cpu_ns()),
      p.duration > 0 ? 100.0 * cost.cpu_ns() / static_cast<double>(p.duration) : 0.0);
}

void print_profile(const analysis::Profile& p, size_t top, bool verbose) {
  fmt::print("# {} (host {}, pid {}, {})\n", p.directory, p.hostname, p.pid, p.process_name);
  fmt::print("{} events in {}: {:.0f} events/s, {:.2f} bytes/event, {} discarded\n", human_count(p.events),
             duration_text(p.duration), p.events_per_second(), p.bytes_per_event(), human_count(p.discarded));
  if (const auto cost = tracing_cost(p)) print_tracing_cost(p, *cost);
  if (!p.spans.empty()) {
    fmt::print(
        "\nSpans by self time{} (WALL: begin to end, suspension included; RUNNING: the parts on threads; "
        "SELF, MEAN to MAX: wall):\n",
        p.spans.size() > top ? fmt::format(" (top {} of {})", top, p.spans.size()) : "");
    fmt::print("  {:<36} {:>9} {:>11} {:>11} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "NAME", "COUNT", "SELF",
               "WALL", "RUNNING", "MEAN", "P50", "P90", "P99", "MAX");
    for (size_t i = 0; i < p.spans.size() && i < top; ++i) {
      const auto& span = p.spans[i];
      fmt::print("  {:<36} {:>9} {:>11} {:>11} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
                 span.category + "/" + span.name, span.duration.count, duration_text(span.self),
                 duration_text(span.duration.total), duration_text(span.running),
                 duration_text(static_cast<uint64_t>(span.duration.mean())), duration_text(span.duration.p50),
                 duration_text(span.duration.p90), duration_text(span.duration.p99), duration_text(span.duration.max));
    }
  }
  fmt::print("\nThreads:\n  {:>8} {:<16} {:>10} {:>11} {:>11} {:>11} {:>10}\n", "TID", "NAME", "EVENTS", "BUSY", "IDLE",
             "SEEN", "DISCARDED");
  for (const auto& thread : p.threads)
    fmt::print("  {:>8} {:<16} {:>10} {:>11} {:>11} {:>11} {:>10}\n", thread.thread_id, thread.name,
               human_count(thread.events), duration_text(thread.busy), duration_text(thread.idle),
               duration_text(thread.span), human_count(thread.discarded));
  if (!p.task_kinds.empty()) {
    fmt::print("\nTasks by kind:\n  {:<12} {:>7} {:>7} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "KIND",
               "COUNT", "FAILED", "CANCELLED", "OPEN", "LIFE P50", "LIFE P99", "LIFE MAX", "RUN P50", "RUN P99");
    for (const auto& kind : p.task_kinds)
      fmt::print("  {:<12} {:>7} {:>7} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", kind.kind, kind.count,
                 kind.failed, kind.cancelled, kind.unresolved, duration_text(kind.lifetime.p50),
                 duration_text(kind.lifetime.p99), duration_text(kind.lifetime.max), duration_text(kind.run_time.p50),
                 duration_text(kind.run_time.p99));
  }
  if (!p.counters.empty()) {
    fmt::print("\nCounters:\n  {:<36} {:>9} {:>12} {:>12} {:>12} {:>12}\n", "NAME", "SAMPLES", "MIN", "MAX", "LAST",
               "RATE/S");
    for (const auto& counter : p.counters)
      fmt::print("  {:<36} {:>9} {:>12} {:>12} {:>12} {:>12}\n", counter.category + "/" + counter.name, counter.samples,
                 cell(counter.min), cell(counter.max), cell(counter.last), cell(counter.rate_per_second));
  }
  if (p.flight) print_flight_windows(*p.flight, verbose);
  for (const auto& problem : p.problems) fmt::print(stderr, "chronicle: warning: {}\n", problem);
}

analysis::ProgressCallback profile_progress_line() {
  if (!stderr_is_terminal()) return {};
  return [](uint64_t seen, uint64_t expected) {
    if (seen >= expected) {
      fmt::print(stderr, "\r\033[K");
      return;
    }
    fmt::print(stderr, "\rchronicle: reading: {} events (~{:.0f}%)", human_count(seen),
               100.0 * static_cast<double>(seen) / static_cast<double>(expected));
  };
}

// How long a task lived in the trace: from its creation (or first run) to its resolution, or to
// the trace's end when it never resolved.
uint64_t lifetime_ticks(const model::TaskGraph& graph, const model::Task& task) {
  const uint64_t start = task.created        ? *task.created
                         : task.runs.empty() ? graph.last_ticks()
                                             : task.runs.front().begin;
  const uint64_t end = task.resolved ? *task.resolved : graph.last_ticks();
  return end > start ? end - start : 0;
}

// The task whose critical path is asked for. When a label or name fits several, they are
// listed on standard error (standard output stays the path, or one JSON document) and the
// longest-lived is taken, the first in the trace's order among equals.
model::TaskId choose_task(const model::TaskGraph& graph, const std::string& id_or_label,
                          const std::function<uint64_t(uint64_t)>& ns) {
  const std::vector<model::TaskId> matches = analysis::find_tasks(graph, id_or_label);
  if (matches.empty()) return analysis::find_task(graph, id_or_label);  // throws, naming it
  if (matches.size() == 1) return matches.front();
  model::TaskId longest = matches.front();
  uint64_t longest_ticks = 0;
  for (const model::TaskId id : matches)
    if (const uint64_t ticks = lifetime_ticks(graph, *graph.find(id)); ticks > longest_ticks) {
      longest = id;
      longest_ticks = ticks;
    }
  fmt::print(stderr, "chronicle: {} tasks match '{}'; taking the longest, {} (give an id to choose another):\n",
             matches.size(), id_or_label, model::task_id_text(longest));
  constexpr size_t kListed = 20;
  for (size_t i = 0; i < matches.size() && i < kListed; ++i) {
    const model::Task& task = *graph.find(matches[i]);
    fmt::print(stderr, "  {} {:<12} {:>11}  {}\n", matches[i] == longest ? '*' : ' ', model::task_id_text(task.id),
               duration_text(ns(lifetime_ticks(graph, task))), task.display_name());
  }
  if (matches.size() > kListed) fmt::print(stderr, "  ... and {} more\n", matches.size() - kListed);
  return longest;
}

// The critical path of a task in one of the traces (processes), crossing into the others where
// it waited for their messages.
// How the step's task spent the step's time on the threads it ran on: running, or off CPU
// (blocked, or runnable waiting for one). Its time not running on a thread is in none.
analysis::CpuStateTimes step_cpu_states(const model::Task& task, const analysis::CpuTimeline& timeline,
                                        const analysis::CriticalStep& step) {
  analysis::CpuStateTimes total;
  for (const model::RunInterval& run : task.runs) {
    const uint64_t from = std::max(run.begin, step.from), to = std::min(run.end, step.to);
    if (from >= to) continue;
    total.add(timeline.between(run.thread_id, from, to));
  }
  return total;
}

int print_critical_path(const std::vector<reader::Trace>& traces, const std::vector<model::TaskGraph>& graphs,
                        size_t process, const StatsOptions& options) {
  const reader::Trace& trace = traces[process];
  const model::TaskGraph& graph = graphs[process];
  const double frequency = static_cast<double>(trace.description().clock.frequency_hz);
  auto ns = [frequency](uint64_t ticks) { return static_cast<uint64_t>(static_cast<double>(ticks) * 1e9 / frequency); };
  const model::TaskId target = choose_task(graph, options.critical_path, ns);
  std::vector<analysis::ProcessGraph> processes;
  for (size_t i = 0; i < traces.size(); ++i) processes.push_back({&traces[i], &graphs[i]});
  const analysis::MessageArrivals messages = analysis::MessageArrivals::find(processes);
  analysis::CriticalPath path = analysis::critical_path(processes, messages, process, target);
  const model::Task* task = graph.find(target);
  const int64_t start_ns = traces[path.start_process].to_unix_ns(path.start);
  const int64_t end_ns = trace.to_unix_ns(path.end);
  auto since_start = [&](size_t p, uint64_t ticks) {
    return static_cast<uint64_t>(std::max<int64_t>(0, traces[p].to_unix_ns(ticks) - start_ns));
  };
  auto length = [&](const analysis::CriticalStep& step) {
    return static_cast<uint64_t>(
        std::max<int64_t>(0, traces[step.process].to_unix_ns(step.to) - traces[step.process].to_unix_ns(step.from)));
  };
  auto origin = [&](size_t p) {
    const auto& description = traces[p].description();
    return fmt::format("{}/{}", description.hostname, description.pid);
  };
  const bool several = traces.size() > 1;
  std::vector<analysis::CpuTimeline> timelines;
  for (const reader::Trace& each : traces) timelines.emplace_back(each);
  {
    std::vector<analysis::GraphTasks> sources;
    for (const model::TaskGraph& each : graphs) sources.emplace_back(each);
    std::vector<const analysis::TaskSource*> source_pointers;
    std::vector<const analysis::CpuTimeline*> timeline_pointers;
    for (size_t i = 0; i < graphs.size(); ++i) {
      source_pointers.push_back(&sources[i]);
      timeline_pointers.push_back(&timelines[i]);
    }
    analysis::split_runs_by_cpu_state(path, source_pointers, timeline_pointers);
  }
  auto off_cpu = [&](const analysis::CriticalStep& step) {
    return step_cpu_states(*graphs[step.process].find(step.task), timelines[step.process], step);
  };
  const bool with_states =
      std::any_of(timelines.begin(), timelines.end(), [](const analysis::CpuTimeline& t) { return !t.empty(); });
  if (options.json) {
    nlohmann::json out = {{"task", model::task_id_text(target)},
                          {"name", task->display_name()},
                          {"length_ns", static_cast<uint64_t>(std::max<int64_t>(0, end_ns - start_ns))},
                          {"steps", nlohmann::json::array()}};
    for (const auto& step : path.steps) {
      out["steps"].push_back({{"task", model::task_id_text(step.task)},
                              {"state", analysis::step_state_name(step.state)},
                              {"what", step.what},
                              {"from_ns", since_start(step.process, step.from)},
                              {"contributed_ns", length(step)}});
      if (several) out["steps"].back()["process"] = origin(step.process);
      if (with_states) {
        const analysis::CpuStateTimes states = off_cpu(step);
        out["steps"].back()["cpu"] = {
            {"running_ns", states.running}, {"runnable_ns", states.runnable}, {"blocked_ns", states.blocked}};
      }
    }
    fmt::print("{}\n", exports::json_text(out, 2));
    return 0;
  }
  fmt::print("Critical path of {} \"{}\": {} from {} to its {}\n", model::task_id_text(target), task->display_name(),
             duration_text(static_cast<uint64_t>(std::max<int64_t>(0, end_ns - start_ns))),
             traces[path.start_process].format_time(path.start),
             task->resolved ? "resolution" : "last activity (never resolved)");
  if (several)
    fmt::print("  {:>12} {:>11}  {:<20} {:<40} {:<7} {}\n", "AT", "CONTRIBUTED", "PROCESS", "TASK", "STATE", "WHAT");
  else
    fmt::print("  {:>12} {:>11}  {:<40} {:<7} {}\n", "AT", "CONTRIBUTED", "TASK", "STATE", "WHAT");
  for (const auto& step : path.steps) {
    if (several)
      fmt::print("  +{:>11} {:>11}  {:<20} {:<40} {:<7} {}\n", duration_text(since_start(step.process, step.from)),
                 duration_text(length(step)), origin(step.process), step.task_name,
                 analysis::step_state_name(step.state), step.what);
    else
      fmt::print("  +{:>11} {:>11}  {:<40} {:<7} {}\n", duration_text(since_start(step.process, step.from)),
                 duration_text(length(step)), step.task_name, analysis::step_state_name(step.state), step.what);
    // A step split by the CPU states says its state itself; what is left is time the scheduler
    // data does not cover.
    if (!with_states || step.state != analysis::StepState::ran) continue;
    const analysis::CpuStateTimes states = off_cpu(step);
    if (states.runnable + states.blocked > 0)
      fmt::print("  {:>12} {:>11}  off CPU while it ran: {} blocked, {} waiting for a CPU\n", "", "",
                 duration_text(states.blocked), duration_text(states.runnable));
  }
  return 0;
}

// `stats --critical-path`: every trace's task graph, for the path to cross between them.
int print_critical_path(const std::vector<std::string>& directories, StatsOptions options) {
  std::vector<reader::Trace> traces;
  std::vector<model::TaskGraph> graphs(directories.size());
  for (const auto& directory : directories) traces.emplace_back(directory);
  // "PID/TASK" names a task of one process, when several have tasks of that id or name.
  std::optional<int32_t> pid;
  if (const size_t slash = options.critical_path.find('/');
      slash != std::string::npos && slash > 0 && slash < 10 && slash + 1 < options.critical_path.size() &&
      std::all_of(options.critical_path.begin(), options.critical_path.begin() + static_cast<std::ptrdiff_t>(slash),
                  [](char c) { return c >= '0' && c <= '9'; })) {
    pid = std::stoi(options.critical_path.substr(0, slash));
    options.critical_path = options.critical_path.substr(slash + 1);
  }
  std::optional<size_t> owner;
  for (size_t i = 0; i < traces.size(); ++i) {
    warn_about_damage(traces[i]);
    analysis::profile_trace(traces[i], &graphs[i], profile_progress_line(), model::GraphDetail::no_notes);
    if (pid && traces[i].description().pid != *pid) continue;
    if (!owner && !analysis::find_tasks(graphs[i], options.critical_path).empty()) owner = i;
  }
  if (!owner)
    throw std::invalid_argument(fmt::format("no task with id, label or name '{}' in the trace{}", options.critical_path,
                                            pid ? fmt::format(" of pid {}", *pid) : std::string()));
  return print_critical_path(traces, graphs, *owner, options);
}

// One trace of several (a record run, a merge), in a line.
struct Origin {
  std::string host;
  int32_t pid = 0;
  std::string process;
  uint64_t events = 0;
  uint64_t spans = 0;
  uint64_t duration = 0;
  std::optional<format::ClockCorrection> correction;
};

Origin origin_of(const analysis::Profile& p, const reader::Trace& trace) {
  Origin origin{p.hostname, p.pid, p.process_name, p.events, 0, p.duration, trace.description().correction};
  for (const auto& span : p.spans) origin.spans += span.duration.count;
  return origin;
}

// A line per origin, and, when a merge aligned its clock, how far it moved and how far to trust it.
void print_origins(const std::vector<Origin>& origins) {
  fmt::print("\nOrigins:\n  {:<24} {:>8} {:<16} {:>12} {:>10} {:>11}  {}\n", "HOST", "PID", "PROCESS", "EVENTS",
             "SPANS", "DURATION", "CLOCK");
  for (const Origin& origin : origins) {
    std::string clock = "as recorded";
    if (const auto& correction = origin.correction) {
      const std::string bound =
          correction->bound_ns < 0 ? "unknown" : duration_text(static_cast<uint64_t>(correction->bound_ns));
      clock = fmt::format("moved {:+} ns, {:+} ppb, bound {} (to {})", correction->offset_ns, correction->drift_ppb,
                          bound, correction->reference_host);
    }
    fmt::print("  {:<24} {:>8} {:<16} {:>12} {:>10} {:>11}  {}\n", origin.host, origin.pid, origin.process,
               human_count(origin.events), human_count(origin.spans), duration_text(origin.duration), clock);
  }
}

// Spans by the values of one attribute: count, errors, latency.
int print_attribute_groups(const StatsOptions& options) {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& directory : reader::find_traces(options.directory)) {
    reader::Trace trace(directory);
    warn_about_damage(trace);
    const analysis::AttributeGroups found = analysis::group_spans_by_attribute(trace, options.group_by);
    if (options.json) {
      for (const analysis::AttributeGroup& group : found.groups)
        all.push_back({{"category", group.category},
                       {"name", group.name},
                       {"value", group.value},
                       {"count", group.count},
                       {"errors", group.failed},
                       {"p50_ns", group.p50_ns},
                       {"p99_ns", group.p99_ns},
                       {"max_ns", group.max_ns},
                       {"total_ns", group.total_ns}});
      continue;
    }
    fmt::print("Spans by {} ({} spans have it; {} of the same names do not):\n", options.group_by,
               human_count(found.spans_with_key), human_count(found.spans_without_key));
    fmt::print("  {:<32} {:<24} {:>8} {:>7} {:>11} {:>11} {:>11} {:>11}\n", "SPAN", options.group_by, "COUNT", "ERRORS",
               "P50", "P99", "MAX", "TOTAL");
    size_t shown = 0;
    for (const analysis::AttributeGroup& group : found.groups) {
      if (options.top != 0 && shown++ >= options.top) {
        fmt::print("  ... {} more (--top N)\n", found.groups.size() - options.top);
        break;
      }
      fmt::print("  {:<32} {:<24} {:>8} {:>7} {:>11} {:>11} {:>11} {:>11}\n", group.category + "/" + group.name,
                 group.value, human_count(group.count), human_count(group.failed), duration_text(group.p50_ns),
                 duration_text(group.p99_ns), duration_text(group.max_ns), duration_text(group.total_ns));
    }
  }
  if (options.json) fmt::print("{}\n", exports::json_text(all, 2));
  return 0;
}

int print_summary(const StatsOptions& options) {
  if (!options.group_by.empty()) return print_attribute_groups(options);
  const auto traces = reader::find_traces(options.directory);
  if (!options.critical_path.empty()) return print_critical_path(traces, options);
  if (options.profile || options.samples.by_span || options.samples.by_task || options.samples.folded) {
    SampleProfileOptions samples = options.samples;
    samples.json = options.json;
    samples.top = options.top;
    return print_sample_profile(traces, samples);
  }
  nlohmann::json all = nlohmann::json::array();
  std::vector<Origin> origins;
  for (size_t i = 0; i < traces.size(); ++i) {
    reader::Trace trace(traces[i]);
    warn_about_damage(trace);
    // Plain stats keep nothing that grows with the events: no task graph.
    const analysis::Profile profile = analysis::profile_trace(trace, nullptr, profile_progress_line());
    const format::TraceLosses& losses = trace.description().losses;
    if (options.json) {
      all.push_back(profile_json(profile));
      all.back()["losses"] = {
          {"events_no_channel", losses.events_no_channel},     {"definitions_dropped", losses.definitions_dropped},
          {"packets_undecodable", losses.packets_undecodable}, {"packets_unwritten", losses.packets_unwritten},
          {"events_unwritten", losses.events_unwritten},       {"bytes_unwritten", losses.bytes_unwritten}};
      all.back()["damage"] = damage_json(trace);
      if (const auto& correction = trace.description().correction)
        all.back()["clock_correction"] = {
            {"reference_host", correction->reference_host},
            {"offset_ns", correction->offset_ns},
            {"drift_ppb", correction->drift_ppb},
            {"bound_ns", correction->bound_ns < 0 ? nlohmann::json() : nlohmann::json(correction->bound_ns)},
            {"pairs", correction->pairs},
            {"method", correction->method}};
    } else {
      if (i > 0) fmt::print("\n");
      print_profile(profile, options.top, options.verbose);
      if (losses.any()) fmt::print("\nLosses: {}\n", format::describe_losses(losses));
      if (traces.size() > 1) origins.push_back(origin_of(profile, trace));
    }
  }
  if (!origins.empty()) print_origins(origins);
  if (options.json) fmt::print("{}\n", exports::json_text(all.size() == 1 ? all[0] : all, 2));
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
  command->add_option("--name", options->name, "With --counters: only series whose name matches this glob");
  command->add_flag("--json", options->json, "Machine-readable output");
  command->add_flag("--verbose", options->verbose,
                    "Every detail that is summarised: in a flight recording, each task that begins before its "
                    "thread's window or lost its end");
  command->add_option("--top", options->top, "How many span names to list (default 30)");
  command
      ->add_option("--group-by", options->group_by,
                   "Spans by the values of the attribute KEY: count, errors, p50/p99/max latency per value")
      ->type_name("KEY");
  command->add_option("--critical-path", options->critical_path,
                      "The chain of runs, waits and resolutions that decided when a task (id t3.17, label or "
                      "name; PID/TASK for one process of several) finished, with the time each step contributed");
  command->add_flag("--profile", options->profile,
                    "The sampling profiler's view (record --sample): a flat profile, a call graph, samples by "
                    "thread, and with --sched the time each thread, span and task ran, waited for a CPU or blocked");
  command->add_flag("--by-span", options->samples.by_span,
                    "With --profile: samples by the innermost span open on their thread");
  command->add_flag("--by-task", options->samples.by_task,
                    "With --profile: samples by the task running on their thread");
  command->add_flag("--folded", options->samples.folded,
                    "Collapsed stacks (thread, span or task first) for flamegraph.pl and speedscope");
  return {command, [options] { return options->counters ? print_counter_windows(*options) : print_summary(*options); }};
}

}  // namespace chronicle::cli
