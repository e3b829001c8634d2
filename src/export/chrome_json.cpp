#include "export/chrome_json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <unordered_map>

#include "analysis/counter_series.hpp"
#include "format/metadata.hpp"

namespace chronicle::exports {
namespace {

using namespace std::string_view_literals;

// Categories of what the task graph adds, apart from the recorded categories: async task
// tracks, task runs on threads, the arrows between them, and loop idle time.
constexpr std::string_view kTaskCategory = "task";
constexpr std::string_view kTaskRunCategory = "task.run";
constexpr std::string_view kTaskFlowCategory = "task.flow";
constexpr std::string_view kLoopCategory = "loop";

class ChromeWriter {
 public:
  ChromeWriter(OutputFile& out, int64_t time_origin_ns) : out_(out), origin_ns_(time_origin_ns) {}

  void write_trace(const reader::Trace& trace, const model::TaskGraph& graph, ProgressCounter& progress) {
    trace_ = &trace;
    pid_ = trace.description().pid;
    write_names();
    write_events(graph, progress);
    write_tasks(graph);
  }

 private:
  // Starts an event object with the fields every event has; the caller adds its own and closes it.
  // `fields` is the JSON of its category and name (event_fields), which a span's begin and end
  // share with every span of its site.
  std::string& open_event(char phase, std::string_view fields, uint32_t thread_id, uint64_t ticks) {
    std::string& text = start_event(phase);
    text += fields;
    return end_event_head(text, thread_id, ticks);
  }
  std::string& open_event(char phase, std::string_view category, std::string_view name, uint32_t thread_id,
                          uint64_t ticks) {
    std::string& text = start_event(phase);
    append_event_fields(text, category, name);
    return end_event_head(text, thread_id, ticks);
  }
  std::string& start_event(char phase) {
    std::string& text = out_.buffer();
    text += first_event_ ? "\n{\"ph\":\""sv : ",\n{\"ph\":\""sv;
    first_event_ = false;
    text += phase;
    text += "\","sv;
    return text;
  }
  static void append_event_fields(std::string& text, std::string_view category, std::string_view name) {
    text += "\"cat\":"sv;
    append_json_string(text, category);
    text += ",\"name\":"sv;
    append_json_string(text, name);
  }
  static std::string event_fields(std::string_view category, std::string_view name) {
    std::string text;
    append_event_fields(text, category, name);
    return text;
  }
  std::string& end_event_head(std::string& text, uint32_t thread_id, uint64_t ticks) {
    text += ",\"pid\":"sv;
    append_decimal(text, pid_);
    text += ",\"tid\":"sv;
    append_decimal(text, thread_id);
    text += ",\"ts\":"sv;
    append_microseconds(text, trace_->to_unix_ns(ticks) - origin_ns_);
    return text;
  }
  // The fields of a site's events, escaped once.
  const std::string& site_fields(uint32_t site_id) {
    auto [at, added] = site_fields_.try_emplace(site_id);
    if (added) at->second = event_fields(category_of(site_id), name_of(site_id));
    return at->second;
  }
  void close_event() {
    out_.buffer() += '}';
    out_.flush_if_large();
  }

  // Slices (thread spans, task runs, loop idle time) are B/E pairs written as the events stream
  // by, one stack per thread. Each end is its own timestamp, the same text as the begin that
  // follows it at the same tick, so a viewer compares parsed numbers and never adds: an `X`
  // event's ts + dur, added as doubles, can land past the next event's ts and mis-nest (see
  // docs/export.md). The stack also keeps B/E balanced on any input: an end closes the innermost
  // open slice of its kind, cutting (as unfinished) what is still open inside it.
  enum class SliceKind { span, run, idle };
  struct OpenSlice {
    SliceKind kind;
    uint64_t task;        // the running task, for runs; the owning task, for a task's spans
    uint64_t span;        // the span's sequence (reader::PairedSpan), for spans
    uint32_t site_id;     // for spans: their category and name are their site's (site_fields)
    std::string fields;   // for runs and idle time: their category and name (event_fields)
    std::string args;     // the JSON object, or empty; the E repeats it, as viewers match ends by it
    bool written = true;  // false: a span's B held for the attributes that follow its begin
  };
  std::string_view fields_of(const OpenSlice& slice) {
    return slice.kind == SliceKind::span ? site_fields(slice.site_id) : slice.fields;
  }

  void begin_slice(uint32_t thread_id, uint64_t ticks, OpenSlice slice) {
    write_begin(thread_id, ticks, slice);
    open_[thread_id].push_back(std::move(slice));
  }
  void write_begin(uint32_t thread_id, uint64_t ticks, const OpenSlice& slice) {
    std::string& text = open_event('B', fields_of(slice), thread_id, ticks);
    if (!slice.args.empty()) {
      text += ",\"args\":";
      text += slice.args;
    }
    close_event();
  }

  // A span's begin is held until its thread's next event other than its own attributes (which
  // follow it at its time: CHRONICLE_SPAN_ARGS), so that its B carries them and its E repeats
  // the same args, as viewers match an E to its B by them.
  struct HeldBegin {
    uint64_t ticks = 0;
    uint64_t span = 0;  // the span's sequence; 0: none held
  };
  void hold_span_begin(uint32_t thread_id, uint64_t ticks, const reader::PairedSpan& span) {
    open_[thread_id].push_back({SliceKind::span, span.task, span.sequence, span.site_id, {}, span_args(span), false});
    held_[thread_id] = {ticks, span.sequence};
  }
  // An attribute of the held span: its args again. False for anything else.
  bool add_to_held(const reader::Event& event) {
    const auto held = held_.find(event.thread_id);
    if (held == held_.end() || held->second.span == 0 || !event.span || event.span->sequence != held->second.span ||
        event.ticks != held->second.ticks || !reader::is_attribute_event(static_cast<uint32_t>(event.type)))
      return false;
    for (OpenSlice& slice : open_[event.thread_id])
      if (slice.kind == SliceKind::span && slice.span == held->second.span) slice.args = span_args(*event.span);
    return true;
  }
  void write_held(uint32_t thread_id) {
    const auto held = held_.find(thread_id);
    if (held == held_.end() || held->second.span == 0) return;
    for (OpenSlice& slice : open_[thread_id])
      if (!slice.written) {
        write_begin(thread_id, held->second.ticks, slice);
        slice.written = true;
      }
    held->second.span = 0;
  }

  // A span's args: its task, and its attributes (CHRONICLE_SPAN_ARGS) as JSON values.
  static std::string span_args(const reader::PairedSpan& span) {
    if (span.task == 0 && span.attributes.empty()) return {};
    std::string args = "{";
    auto key = [&args](std::string_view name) {
      if (args.size() > 1) args += ',';
      append_json_string(args, name);
      args += ':';
    };
    if (span.task != 0) {
      key("task");
      append_json_string(args, model::task_id_text(span.task));
    }
    for (const reader::SpanAttribute& attribute : span.attributes) {
      key(attribute.key);
      using Type = reader::SpanAttribute::Type;
      const bool number = attribute.type == Type::int64 || attribute.type == Type::uint64 ||
                          attribute.type == Type::boolean ||
                          (attribute.type == Type::float64 && std::isfinite(attribute.float_value));
      if (number)
        args += reader::attribute_text(attribute);
      else
        append_json_string(args, reader::attribute_text(attribute));
    }
    args += '}';
    return args;
  }
  void write_end(uint32_t thread_id, uint64_t ticks, const OpenSlice& slice, bool finished) {
    std::string& text = open_event('E', fields_of(slice), thread_id, ticks);
    if (!finished) {
      text += ",\"args\":";
      text += slice.args.empty() ? "{\"unfinished\":true}"
                                 : slice.args.substr(0, slice.args.size() - 1) + ",\"unfinished\":true}";
    } else if (!slice.args.empty()) {
      text += ",\"args\":";
      text += slice.args;
    }
    close_event();
  }
  // Ends the innermost open slice of `kind` (of `task`, for runs; of span `span`, for spans);
  // false when none is open (its begin is not in the trace). What is open inside it is cut: a
  // span of the task whose run ends continues in the task's next run (its piece here is whole),
  // anything else is marked unfinished.
  bool end_slice(uint32_t thread_id, uint64_t ticks, SliceKind kind, uint64_t task = 0, uint64_t span = 0) {
    auto& stack = open_[thread_id];
    for (size_t i = stack.size(); i-- > 0;) {
      if (stack[i].kind != kind || stack[i].task != task || stack[i].span != span) continue;
      while (stack.size() > i + 1) {
        const OpenSlice& inner = stack.back();
        const bool continues = kind == SliceKind::run && inner.kind == SliceKind::span && inner.task == task;
        write_end(thread_id, ticks, inner, continues);
        stack.pop_back();
      }
      write_end(thread_id, ticks, stack.back(), true);
      stack.pop_back();
      return true;
    }
    return false;
  }
  bool idle_open(uint32_t thread_id) {
    const auto& stack = open_[thread_id];
    return std::any_of(stack.begin(), stack.end(),
                       [](const OpenSlice& slice) { return slice.kind == SliceKind::idle; });
  }
  // What the trace never ends ends at its last event, innermost first, marked unfinished.
  void close_all(uint64_t last_ticks) {
    for (auto& [thread_id, stack] : open_)
      for (; !stack.empty(); stack.pop_back()) write_end(thread_id, last_ticks, stack.back(), false);
    open_.clear();
  }

  void write_metadata(std::string_view name, uint32_t thread_id, std::string_view value) {
    std::string& text = out_.buffer();
    text += first_event_ ? "\n{\"ph\":\"M\",\"name\":" : ",\n{\"ph\":\"M\",\"name\":";
    first_event_ = false;
    append_json_string(text, name);
    fmt::format_to(std::back_inserter(text), ",\"pid\":{},\"tid\":{},\"args\":{{\"name\":", pid_, thread_id);
    append_json_string(text, value);
    text += "}}";
  }

  void write_names() {
    const auto& description = trace_->description();
    write_metadata("process_name", 0, description.process_name);
    for (const auto& stream : trace_->streams()) {
      std::string name = trace_->thread_name(stream.thread_id);
      if (name.empty()) name = fmt::format("thread {}", stream.thread_id);
      write_metadata("thread_name", stream.thread_id, name);
    }
  }

  const reader::Site* site(uint32_t id) const { return trace_->site(id); }
  std::string_view category_of(uint32_t site_id) const {
    const reader::Site* found = site(site_id);
    return found ? std::string_view(found->category) : std::string_view("?");
  }
  std::string_view name_of(uint32_t site_id) {
    const reader::Site* found = site(site_id);
    if (found) return found->name;
    unknown_name_ = fmt::format("#{}", site_id);
    return unknown_name_;
  }

  // A span as a slice on the thread it is on: a task's span has a piece in each of the task's
  // runs, each carrying the task's id.
  void begin_span_slice(uint32_t thread_id, uint64_t ticks, const reader::PairedSpan& span) {
    begin_slice(thread_id, ticks, {SliceKind::span, span.task, span.sequence, span.site_id, {}, span_args(span)});
  }

  // A metric counter's value is its running total; other counters' as traced.
  static void write_counter_value(std::string& text, const reader::Event& event,
                                  const std::optional<analysis::CounterReading>& reading,
                                  const analysis::CounterReader& counters) {
    const bool increments = reading && counters.series()[reading->series].kind == analysis::SeriesKind::increments;
    text += ",\"args\":{\"value\":";
    if (event.type == format::EventId::counter && !increments)
      append_decimal(text, event.value);
    else if (const double value = increments ? reading->value : event.value_float; std::isfinite(value))
      fmt::format_to(std::back_inserter(text), "{}", value);
    else
      text += "null";  // JSON has no infinities or NaN
    text += '}';
  }

  void write_events(const model::TaskGraph& graph, ProgressCounter& progress) {
    reader::SpanPairing pairing(*trace_);
    analysis::CounterReader counters(*trace_);
    trace_->for_each_event(pairing, [&](const reader::Event& event) {
      progress.count();
      if (add_to_held(event)) return true;
      write_held(event.thread_id);
      switch (event.type) {
        case format::EventId::span_begin:
          hold_span_begin(event.thread_id, event.ticks, *event.span);
          break;
        case format::EventId::span_end:
          if (event.span)
            end_slice(event.thread_id, event.ticks, SliceKind::span, event.span->task, event.span->sequence);
          break;
        case format::EventId::task_run_begin: {
          // Named as the task (the graph has every task a run names); args: its id.
          const model::Task* task = graph.find(event.task);
          std::string args = "{\"task\":";
          append_json_string(args, model::task_id_text(event.task));
          args += '}';
          begin_slice(event.thread_id, event.ticks,
                      {SliceKind::run, event.task, 0, 0,
                       event_fields(kTaskRunCategory, task ? task->display_name() : model::task_id_text(event.task)),
                       std::move(args)});
          // The spans the task left open when it last stopped go on in this run.
          if (const auto* open = pairing.open_in_task(event.task))
            for (const reader::PairedSpan& span : *open) begin_span_slice(event.thread_id, event.ticks, span);
          break;
        }
        case format::EventId::task_run_end:
          end_slice(event.thread_id, event.ticks, SliceKind::run, event.task);
          break;
        case format::EventId::loop_suspend:
          // A second suspend without a resume is ignored, as the task graph ignores it.
          if (!idle_open(event.thread_id))
            begin_slice(event.thread_id, event.ticks,
                        {SliceKind::idle, 0, 0, 0, event_fields(kLoopCategory, "idle"), {}});
          break;
        case format::EventId::loop_resume:
          end_slice(event.thread_id, event.ticks, SliceKind::idle);
          break;
        case format::EventId::instant: {
          std::string& text = open_event('i', site_fields(event.name_id), event.thread_id, event.ticks);
          text += ",\"s\":\"t\"";
          close_event();
          break;
        }
        case format::EventId::note: {
          // Named by what it says, which is what a reader of the timeline looks for; the format
          // string, shared by the notes of one place, stays an arg to group them by.
          const std::string_view format_string = name_of(event.name_id);
          std::string& text = open_event('i', category_of(event.name_id), event.text, event.thread_id, event.ticks);
          text += ",\"s\":\"t\",\"args\":{\"text\":";
          append_json_string(text, event.text);
          text += ",\"format\":";
          append_json_string(text, format_string);
          text += '}';
          close_event();
          break;
        }
        case format::EventId::counter:
        case format::EventId::counter_float: {
          // Counters are per process in this format: the category keeps equal names apart, and
          // all threads' events of a name are one track, as counter_series.hpp has it.
          const std::string name = fmt::format("{}/{}", category_of(event.name_id), name_of(event.name_id));
          const std::optional<analysis::CounterReading> reading = counters.read(event);
          std::string& text = open_event('C', category_of(event.name_id), name, event.thread_id, event.ticks);
          write_counter_value(text, event, reading, counters);
          close_event();
          break;
        }
        default:
          break;  // the rest of the task layer comes from the graph
      }
      return true;
    });
    for (const auto& entry : held_) write_held(entry.first);
    close_all(graph.last_ticks());
  }

  void write_task_args(std::string& text, const model::Task& task) {
    text += ",\"args\":{\"task\":";
    append_json_string(text, model::task_id_text(task.id));
    text += ",\"kind\":";
    append_json_string(text, format::task_kind_name(task.kind));
    if (!task.name.empty()) {
      text += ",\"function\":";
      append_json_string(text, task.name);
    }
    if (task.parent != 0) {
      text += ",\"created_by\":";
      append_json_string(text, model::task_id_text(task.parent));
    }
    if (task.resolved) {
      text += ",\"outcome\":";
      append_json_string(text, format::task_outcome_name(task.outcome));
      if (!task.outcome_text.empty()) {
        text += ",\"error\":";
        append_json_string(text, task.outcome_text);
      }
    } else {
      text += ",\"outcome\":\"unresolved\"";
    }
    text += '}';
  }

  // A flow arrow from (thread, ticks) to the run that `to` starts; both ends bind to the slice
  // that encloses them (bp "e"), which is the run of the task on that thread.
  void write_flow(std::string_view name, uint32_t from_thread, uint64_t from_ticks, const model::RunInterval& to) {
    const uint64_t id = ++flow_ids_;
    std::string& start = open_event('s', kTaskFlowCategory, name, from_thread, from_ticks);
    start += ",\"id\":";
    append_decimal(start, id);
    close_event();
    std::string& finish = open_event('f', kTaskFlowCategory, name, to.thread_id, to.begin);
    finish += ",\"id\":";
    append_decimal(finish, id);
    finish += ",\"bp\":\"e\"";
    close_event();
  }

  void write_tasks(const model::TaskGraph& graph) {
    // Async ids: dense over every task of every process, so equal task ids in two processes
    // do not share a track.
    std::map<model::TaskId, uint64_t> async_ids;
    for (const model::Task& task : graph.tasks()) {
      const uint64_t async_id = ++async_ids_;
      async_ids[task.id] = async_id;
      const TaskExtent extent = task_extent(task, graph);
      std::string& begin = open_event('b', kTaskCategory, task.display_name(), task.created_on_thread, extent.begin);
      fmt::format_to(std::back_inserter(begin), ",\"id\":\"0x{:x}\"", async_id);
      write_task_args(begin, task);
      close_event();
      std::string& end = open_event('e', kTaskCategory, task.display_name(), task.created_on_thread, extent.end);
      fmt::format_to(std::back_inserter(end), ",\"id\":\"0x{:x}\"", async_id);
      close_event();
    }
    for (const model::Edge& edge : graph.edges()) {
      const model::Task* from = graph.find(edge.from);
      const model::Task* to = graph.find(edge.to);
      if (!from || !to) continue;
      switch (edge.kind) {
        case model::EdgeKind::created_by:
          // The creator, where it made the task, to the task's first run.
          if (const auto* first = first_run_from(*from, edge.ticks))
            write_flow("created", from->created_on_thread, edge.ticks, *first);
          break;
        case model::EdgeKind::waits_on: {
          // The awaited task's completion to the waiter's next run: what the waiter waited for.
          if (to->runs.empty()) break;
          const uint64_t done = task_extent(*to, graph).end;
          const model::RunInterval* last = run_at(*to, done);
          if (!last) last = &to->runs.back();
          if (const auto* resumed = first_run_from(*from, std::min(done, last->end)))
            write_flow("waits on", last->thread_id, std::min(done, last->end), *resumed);
          break;
        }
        case model::EdgeKind::resolved_by:
          // The resolver, where it resolved the task, to the task's next run.
          if (const auto* resolving = run_at(*to, edge.ticks))
            if (const auto* next = first_run_from(*from, edge.ticks))
              write_flow("resolved", resolving->thread_id, edge.ticks, *next);
          break;
      }
    }
  }

  OutputFile& out_;
  int64_t origin_ns_;
  const reader::Trace* trace_ = nullptr;
  int32_t pid_ = 0;
  bool first_event_ = true;
  uint64_t flow_ids_ = 0;
  uint64_t async_ids_ = 0;
  std::string unknown_name_;
  std::unordered_map<uint32_t, std::string> site_fields_;
  std::map<uint32_t, std::vector<OpenSlice>> open_;  // per thread, innermost last
  std::map<uint32_t, HeldBegin> held_;               // per thread: a span's B not yet written
};

}  // namespace

void export_chrome_json(const std::vector<reader::Trace>& traces, const std::string& path,
                        const ExportOptions& options) {
  ProgressCounter progress(options);
  // The graphs first: they give each trace's first event, and the time origin must be known
  // before the first event is written.
  std::vector<model::TaskGraph> graphs;
  int64_t origin_ns = std::numeric_limits<int64_t>::max();
  for (const auto& trace : traces) {
    graphs.push_back(build_task_graph(trace, progress));
    if (graphs.back().last_ticks() != 0) origin_ns = std::min(origin_ns, trace.to_unix_ns(graphs.back().first_ticks()));
  }
  if (origin_ns == std::numeric_limits<int64_t>::max()) origin_ns = 0;

  OutputFile out(path, options.when_exists);
  std::string& text = out.buffer();
  fmt::format_to(std::back_inserter(text), "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"time_origin_unix_ns\":{}",
                 origin_ns);
  text += ",\"processes\":[";
  for (size_t i = 0; i < traces.size(); ++i) {
    const auto& description = traces[i].description();
    fmt::format_to(std::back_inserter(text), "{}{{\"pid\":{},\"name\":", i == 0 ? "" : ",", description.pid);
    append_json_string(text, description.process_name);
    text += ",\"hostname\":";
    append_json_string(text, description.hostname);
    text += ",\"trace_uuid\":";
    append_json_string(text, format::uuid_to_string(description.uuid));
    fmt::format_to(std::back_inserter(text), ",\"events_discarded\":{}}}", traces[i].events_discarded());
  }
  text += "]},\"traceEvents\":[";
  ChromeWriter writer(out, origin_ns);
  for (size_t i = 0; i < traces.size(); ++i) writer.write_trace(traces[i], graphs[i], progress);
  out.write("\n]}\n");
  out.close();
}

}  // namespace chronicle::exports
