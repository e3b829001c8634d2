// `chronicle dump DIR`: one event a line, names resolved, wall-clock time, thread, fields.
#include <fnmatch.h>

#include <array>
#include <unordered_map>

#include <fmt/format.h>

#include "analysis/counter_series.hpp"
#include "cli/common.hpp"
#include "model/task_graph.hpp"
#include "reader/trace_directory.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::cli {
namespace {

struct DumpOptions {
  std::string directory;
  std::string category;
  std::string name;
  uint64_t limit = 0;
  bool tasks = false;
};

// A metric counter's event is an increment: the line shows it and the running total it makes
// (analysis/counter_series.hpp); other counters show their value.
void append_counter_fields(std::string& line, const reader::Event& event,
                           const std::optional<analysis::CounterReading>& reading,
                           const analysis::CounterReader& counters) {
  if (reading && counters.series()[reading->series].kind == analysis::SeriesKind::increments)
    fmt::format_to(std::back_inserter(line), " increment={} total={}", reading->change, reading->value);
  else if (event.type == format::EventId::counter)
    fmt::format_to(std::back_inserter(line), " value={}", event.value);
  else
    fmt::format_to(std::back_inserter(line), " value={}", event.value_float);
}

bool matches(const std::string& pattern, const std::string& text) {
  return pattern.empty() || fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

std::string_view type_name(format::EventId type) {
  switch (type) {
    case format::EventId::span_begin:
      return "span_begin";
    case format::EventId::span_end:
      return "span_end";
    case format::EventId::instant:
      return "instant";
    case format::EventId::note:
      return "note";
    case format::EventId::counter:
    case format::EventId::counter_float:
      return "counter";
    case format::EventId::task_create:
      return "task_create";
    case format::EventId::task_run_begin:
      return "task_run_begin";
    case format::EventId::task_run_end:
      return "task_run_end";
    case format::EventId::task_wait:
      return "task_wait";
    case format::EventId::task_resolve:
      return "task_resolve";
    case format::EventId::task_label:
      return "task_label";
    case format::EventId::loop_suspend:
      return "loop_suspend";
    case format::EventId::loop_resume:
      return "loop_resume";
    case format::EventId::context_send:
      return "send";
    case format::EventId::context_receive:
      return "receive";
    case format::EventId::context_receive_end:
      return "receive_end";
    case format::EventId::task_context:
      return "task_context";
    case format::EventId::cpu_sample:
      return "sample";
    case format::EventId::cpu_switch:
      return "switch";
    case format::EventId::attribute_int:
    case format::EventId::attribute_uint:
    case format::EventId::attribute_float:
    case format::EventId::attribute_bool:
    case format::EventId::attribute_string:
      return "attribute";
    case format::EventId::span_status:
      return "status";
    case format::EventId::context_tracestate:
      return "tracestate";
    case format::EventId::span_context:
      return "span_context";
    case format::EventId::task_invoke:  // compound events: the reader hands out the events they stand for
      return "task_invoke";
    case format::EventId::task_hand_over:
      return "task_hand_over";
    case format::EventId::task_return:
      return "task_return";
  }
  return "?";
}

// The category of events that name no site: the task layer's, and the sampler's.
std::optional<std::string> category_without_site(format::EventId type) {
  if (type == format::EventId::cpu_sample) return "profile";
  if (type == format::EventId::cpu_switch) return "sched";
  if (type >= format::EventId::task_create && type <= format::EventId::task_context) return "task";
  if (type == format::EventId::context_tracestate || type >= format::EventId::task_invoke) return "task";
  return std::nullopt;
}

// "12.3 us": a duration in the unit that keeps three significant digits readable.
std::string human_duration(int64_t ns) {
  if (ns < 1'000) return fmt::format("{} ns", ns);
  if (ns < 1'000'000) return fmt::format("{:.1f} us", ns / 1e3);
  if (ns < 1'000'000'000) return fmt::format("{:.2f} ms", ns / 1e6);
  return fmt::format("{:.3f} s", ns / 1e9);
}

// What a task's note is, in the column of labels of `dump --tasks`.
std::string_view note_label(format::EventId type) {
  switch (type) {
    case format::EventId::span_begin:
      return "span";
    case format::EventId::span_end:
      return "span end";
    default:
      return "note";
  }
}

class TaskPrinter {
 public:
  TaskPrinter(const reader::Trace& trace, const model::TaskGraph& graph) : trace_(trace), graph_(graph) {}

  std::string offset(uint64_t ticks) const {
    return fmt::format("+{:.6f} ms", (trace_.to_unix_ns(ticks) - trace_.to_unix_ns(graph_.first_ticks())) / 1e6);
  }
  std::string duration(uint64_t from, uint64_t to) const {
    return human_duration(trace_.to_unix_ns(to) - trace_.to_unix_ns(from));
  }
  std::string thread(uint32_t thread_id) const {
    const std::string name = trace_.thread_name(thread_id);
    return name.empty() ? fmt::format("thread {}", thread_id) : fmt::format("thread {} ({})", thread_id, name);
  }
  std::string who(model::TaskId id) const {
    if (id == 0) return "-";
    const model::Task* task = graph_.find(id);
    return task ? fmt::format("{} \"{}\"", model::task_id_text(id), task->display_name()) : model::task_id_text(id);
  }

  void print(const model::Task& task, std::string& out) const {
    auto add = [&out](std::string_view heading, const std::string& text) {
      fmt::format_to(std::back_inserter(out), "  {:<11}{}\n", heading, text);
    };
    fmt::format_to(std::back_inserter(out), "{} {} \"{}\"", model::task_id_text(task.id),
                   format::task_kind_name(task.kind), task.display_name());
    if (!task.label.empty() && !task.name.empty()) fmt::format_to(std::back_inserter(out), " ({})", task.name);
    out += '\n';
    if (task.created)
      add("created",
          fmt::format("{} on {} by {}", offset(*task.created), thread(task.created_on_thread), who(task.parent)));
    else
      add("created", "not in the trace");
    // Runs grouped by thread, each thread's in time order.
    std::map<uint32_t, std::vector<const model::RunInterval*>> by_thread;
    for (const auto& run : task.runs) by_thread[run.thread_id].push_back(&run);
    for (const auto& [thread_id, runs] : by_thread) {
      std::string text = thread(thread_id) + ":";
      for (size_t i = 0; i < runs.size(); ++i)
        text += fmt::format("{} {} for {}{}", i == 0 ? "" : ",", offset(runs[i]->begin),
                            duration(runs[i]->begin, runs[i]->end), runs[i]->ended ? "" : " (never ended)");
      add("ran", text);
    }
    if (task.runs.empty()) add("ran", "never");
    for (const model::TaskId awaited : task.waits_on) add("waits on", who(awaited));
    if (task.resolved) {
      std::string text = fmt::format("{} at {}", format::task_outcome_name(task.outcome), offset(*task.resolved));
      if (!task.outcome_text.empty()) text += fmt::format(" \"{}\"", task.outcome_text);
      if (task.resolver != 0 && task.resolver != task.id) text += " by " + who(task.resolver);
      add("resolved", text);
    } else {
      add("resolved", "never");
    }
    for (const auto& note : task.notes)
      add(note_label(note.type), fmt::format("{} \"{}\"", offset(note.ticks), note.text));
  }

 private:
  const reader::Trace& trace_;
  const model::TaskGraph& graph_;
};

int dump_tasks(const reader::Trace& trace, const DumpOptions& options, uint64_t& printed) {
  const model::TaskGraph graph = model::build_task_graph(trace);
  TaskPrinter printer(trace, graph);
  uint64_t edges[3] = {};
  for (const auto& edge : graph.edges()) ++edges[static_cast<size_t>(edge.kind)];
  fmt::print("{} tasks; edges: {} created-by, {} waits-on, {} resolved-by\n", graph.tasks().size(), edges[0], edges[1],
             edges[2]);
  std::string text;
  for (const auto& task : graph.tasks()) {
    if (!matches(options.name, task.display_name())) continue;
    text.clear();
    printer.print(task, text);
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (++printed == options.limit) break;
  }
  uint64_t idle_ns = 0;
  for (const auto& idle : graph.idle()) idle_ns += trace.to_unix_ns(idle.end) - trace.to_unix_ns(idle.begin);
  if (!graph.idle().empty())
    fmt::print("event loops idle for {} in all ({} stretches)\n", human_duration(static_cast<int64_t>(idle_ns)),
               graph.idle().size());
  for (const auto& problem : graph.problems()) fmt::print(stderr, "chronicle: warning: {}\n", problem);
  return 0;
}

// Whose span it is, when a task's (it may end on another thread than it began), and for an end
// that pairs with nothing, that it closes nothing.
void append_span_pairing(std::string& line, const reader::Event& event) {
  if (!event.span) {
    line += " unmatched (closes no span)";
    return;
  }
  if (event.span->task != 0)
    fmt::format_to(std::back_inserter(line), " task={}", model::task_id_text(event.span->task));
  if (event.type == format::EventId::span_end && event.span->thread_id != event.thread_id)
    fmt::format_to(std::back_inserter(line), " began_on_thread={}", event.span->thread_id);
}

void append_attribute(std::string& line, const reader::SpanAttribute& attribute, const reader::Event& event) {
  if (attribute.type == reader::SpanAttribute::Type::string)
    fmt::format_to(std::back_inserter(line), " {}=\"{}\"", attribute.key, attribute.text);
  else
    fmt::format_to(std::back_inserter(line), " {}={}", attribute.key, reader::attribute_text(attribute));
  // An instant's follow it; a span's name the span they were set on.
  if (!event.span && event.span_site != 0) line += " (of the instant)";
}

// A send or receive: its trace, its span and its parent (for a receive, the sender's span).
void append_context(std::string& line, const reader::Event& event) {
  if (event.type == format::EventId::span_context) {
    fmt::format_to(std::back_inserter(line), " trace={:016x}{:016x} span={:016x} parent={:016x} kind={}",
                   event.trace_high, event.trace_low, event.context_span, event.context_parent,
                   format::otlp_span_kind_name(event.span_kind));
    return;
  }
  if (!event.span && event.type == format::EventId::context_send) {
    fmt::format_to(std::back_inserter(line), " trace={:016x}{:016x} span={:016x} (the span around it, of that id)",
                   event.trace_high, event.trace_low, event.context_span);
    return;
  }
  if (!event.span) {
    fmt::format_to(std::back_inserter(line),
                   " span={:016x} (no receive of that span is open, or its span of that id stands for it)",
                   event.context_span);
    return;
  }
  const reader::PairedSpan& span = *event.span;
  fmt::format_to(std::back_inserter(line), " trace={:016x}{:016x} span={:016x}", span.trace_high, span.trace_low,
                 span.span_id);
  if (span.parent_span_id != 0) fmt::format_to(std::back_inserter(line), " parent={:016x}", span.parent_span_id);
  if (event.type == format::EventId::context_receive && span.parent_span_id == 0)
    line += " (no valid traceparent: a new trace)";
  if (span.task != 0) fmt::format_to(std::back_inserter(line), " task={}", model::task_id_text(span.task));
}

// What begins each line, made once per thread, event type and site rather than per event: the
// text of `{time} {thread_id:>7} {thread_name:<15} {type:<10} {category}/{name}`, and whether the
// filters show the site's events.
class LinePrefixes {
 public:
  LinePrefixes(const reader::Trace& trace, const DumpOptions& options) : trace_(trace), options_(options) {}

  // Trace::format_time's text, its date and time of day made once per second.
  void append_time(std::string& line, uint64_t ticks) {
    const int64_t ns = trace_.to_unix_ns(ticks);
    if (ns < 0) {
      line += trace_.format_time(ticks);
      return;
    }
    const int64_t second = ns / 1'000'000'000;
    if (second != second_) {
      const std::string text = trace_.format_time(ticks);
      second_text_ = text.substr(0, text.size() - 9);  // up to the '.', the nanoseconds after it
      second_ = second;
    }
    line += second_text_;
    char digits[9];
    for (int64_t rest = ns % 1'000'000'000, k = 8; k >= 0; --k, rest /= 10)
      digits[k] = static_cast<char>('0' + rest % 10);
    line.append(digits, sizeof digits);
  }
  const std::string& thread(uint32_t thread_id) {
    auto [found, added] = threads_.try_emplace(thread_id);
    if (added) found->second = fmt::format(" {:>7} {:<15} ", thread_id, trace_.thread_name(thread_id));
    return found->second;
  }
  const std::string& type(format::EventId type) {
    std::string& text = types_[static_cast<uint8_t>(type)];
    if (text.empty()) text = fmt::format("{:<10} ", type_name(type));
    return text;
  }
  // "category/name" (or the category alone), or null when the filters leave the event out.
  const std::string* label(const reader::Event& event) {
    const std::optional<std::string> fixed_category = category_without_site(event.type);
    const uint64_t key =
        (uint64_t{static_cast<uint8_t>(fixed_category ? event.type : format::EventId::span_begin)} << 32) |
        event.name_id;
    auto [found, added] = labels_.try_emplace(key);
    if (added) {
      const reader::Site* site = trace_.site(event.name_id);
      const std::string unknown = fixed_category ? std::string() : fmt::format("#{}", event.name_id);
      const std::string& category = fixed_category ? *fixed_category : site ? site->category : unknown;
      const std::string& name = site ? site->name : unknown;
      found->second.shown = matches(options_.category, category) && matches(options_.name, name);
      found->second.text = category + (name.empty() ? "" : "/") + name;
    }
    return found->second.shown ? &found->second.text : nullptr;
  }

 private:
  struct Label {
    std::string text;
    bool shown = false;
  };
  const reader::Trace& trace_;
  const DumpOptions& options_;
  int64_t second_ = -1;
  std::string second_text_;
  std::unordered_map<uint32_t, std::string> threads_;
  std::array<std::string, 256> types_;
  std::unordered_map<uint64_t, Label> labels_;
};

// stdout in large writes: a line at a time costs a stdio call per event.
class BufferedOutput {
 public:
  ~BufferedOutput() { flush(); }
  void write(const std::string& text) {
    buffer_ += text;
    if (buffer_.size() >= kFlushBytes) flush();
  }
  void flush() {
    std::fwrite(buffer_.data(), 1, buffer_.size(), stdout);
    buffer_.clear();
  }

 private:
  static constexpr size_t kFlushBytes = 1 << 20;
  std::string buffer_;
};

int run_dump(const DumpOptions& options) {
  const auto traces = reader::find_traces(options.directory);
  uint64_t printed = 0;
  std::string line;
  BufferedOutput out;
  for (const auto& directory : traces) {
    reader::Trace trace(directory);
    warn_about_damage(trace);
    if (traces.size() > 1)
      fmt::print("# {} (host {}, pid {}, {})\n", directory, trace.description().hostname, trace.description().pid,
                 trace.description().process_name);
    if (options.tasks) {
      dump_tasks(trace, options, printed);
      if (options.limit != 0 && printed >= options.limit) break;
      continue;
    }
    LinePrefixes prefixes(trace, options);
    reader::SpanPairing pairing(trace);
    analysis::CounterReader counters(trace);
    trace.for_each_event(pairing, [&](const reader::Event& event) {
      // Before the filters: a total counts every increment, shown or not.
      const std::optional<analysis::CounterReading> reading = counters.read(event);
      // An attribute or status is shown with the span (or instant) it belongs to.
      const bool of_span =
          reader::is_attribute_event(static_cast<uint32_t>(event.type)) || event.type == format::EventId::span_status;
      reader::Event named_by_span;
      if (of_span) {
        named_by_span.type = format::EventId::span_begin;
        named_by_span.name_id = event.span ? event.span->site_id : event.span_site;
      }
      const std::string* label = prefixes.label(of_span ? named_by_span : event);
      if (!label) return true;
      line.clear();
      prefixes.append_time(line, event.ticks);
      line += prefixes.thread(event.thread_id);
      line += prefixes.type(event.type);
      line += *label;
      switch (event.type) {
        case format::EventId::span_begin:
        case format::EventId::span_end:
          append_span_pairing(line, event);
          break;
        case format::EventId::counter:
        case format::EventId::counter_float:
          append_counter_fields(line, event, reading, counters);
          break;
        case format::EventId::note:
          fmt::format_to(std::back_inserter(line), " text=\"{}\"", event.text);
          break;
        case format::EventId::task_create:
          fmt::format_to(std::back_inserter(line), " task={} parent={} kind={}", model::task_id_text(event.task),
                         model::task_id_text(event.related_task), format::task_kind_name(event.task_kind));
          break;
        case format::EventId::task_run_begin:
        case format::EventId::task_run_end:
          fmt::format_to(std::back_inserter(line), " task={}", model::task_id_text(event.task));
          break;
        case format::EventId::task_wait:
          fmt::format_to(std::back_inserter(line), " task={} awaited={}", model::task_id_text(event.task),
                         model::task_id_text(event.related_task));
          break;
        case format::EventId::task_resolve:
          fmt::format_to(std::back_inserter(line), " task={} resolver={} outcome={} text=\"{}\"",
                         model::task_id_text(event.task), model::task_id_text(event.related_task),
                         format::task_outcome_name(event.outcome), event.text);
          break;
        case format::EventId::task_label:
          fmt::format_to(std::back_inserter(line), " task={} text=\"{}\"", model::task_id_text(event.task), event.text);
          break;
        case format::EventId::context_send:
        case format::EventId::context_receive:
        case format::EventId::context_receive_end:
        case format::EventId::span_context:
          append_context(line, event);
          break;
        case format::EventId::task_context:
          fmt::format_to(std::back_inserter(line), " task={} trace={:016x}{:016x}", model::task_id_text(event.task),
                         event.trace_high, event.trace_low);
          break;
        case format::EventId::cpu_sample:
          fmt::format_to(std::back_inserter(line), " pid={} tid={} frames={}", event.sampled_pid, event.sampled_tid,
                         event.frame_count);
          if (event.frame_count > 0) fmt::format_to(std::back_inserter(line), " ip=0x{:x}", event.frame(0));
          break;
        case format::EventId::cpu_switch:
          fmt::format_to(std::back_inserter(line), " pid={} tid={} state={}", event.sampled_pid, event.sampled_tid,
                         format::cpu_state_name(event.cpu_state));
          break;
        case format::EventId::attribute_int:
        case format::EventId::attribute_uint:
        case format::EventId::attribute_float:
        case format::EventId::attribute_bool:
        case format::EventId::attribute_string:
          append_attribute(line, reader::attribute_of(trace, event), event);
          break;
        case format::EventId::context_tracestate:
          fmt::format_to(std::back_inserter(line), " span={:016x} tracestate=\"{}\"", event.context_span, event.text);
          break;
        case format::EventId::span_status:
          fmt::format_to(std::back_inserter(line), " status={} message=\"{}\"",
                         event.status == format::SpanStatus::error ? "error" : "ok", event.text);
          if (!event.span) line += " (of no open span)";
          break;
        default:
          break;
      }
      line += '\n';
      out.write(line);
      ++printed;
      return options.limit == 0 || printed < options.limit;
    });
    out.flush();
    for (const std::string& problem : pairing.describe_problems())
      fmt::print(stderr, "chronicle: warning: {}\n", problem);
    for (const auto& stream : trace.streams())
      if (stream.events_discarded > 0)
        fmt::print(stderr, "chronicle: {} events discarded in thread {} ({})\n", human_count(stream.events_discarded),
                   stream.thread_id, stream.path);
    if (options.limit != 0 && printed >= options.limit) break;
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

Command add_dump(CLI::App& app) {
  auto options = std::make_shared<DumpOptions>();
  CLI::App* command = app.add_subcommand("dump", "Print a trace's events, one a line, in time order");
  command->add_option("directory", options->directory, "Trace directory")->required();
  command->add_option("--category", options->category, "Only events of this category (a glob pattern)");
  command->add_option("--name", options->name, "Only events of this name (a glob pattern)");
  command->add_option("--limit", options->limit, "Stop after this many events (with --tasks: tasks)");
  command->add_flag("--tasks", options->tasks,
                    "Print the task graph instead: each task with its kind, label, creator, runs per thread, waits, "
                    "resolution and notes (--name filters tasks by label)");
  return {command, [options] { return run_dump(*options); }};
}

}  // namespace chronicle::cli
