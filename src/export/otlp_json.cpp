#include "export/otlp_json.hpp"

#include <fmt/format.h>

#include <map>

#include "format/metadata.hpp"

namespace chronicle::exports {

OtlpIds::OtlpIds(const std::array<uint8_t, 16>& trace_uuid) {
  for (uint8_t byte : trace_uuid) fmt::format_to(std::back_inserter(trace_id_), "{:02x}", byte);
  for (size_t i = 0; i < 8; ++i) salt_ = salt_ << 8 | trace_uuid[i];
}

uint64_t OtlpIds::mix(uint64_t key) const {
  // SplitMix64's finalizer: a bijection on 64-bit values, so distinct keys keep distinct ids.
  uint64_t x = key ^ salt_;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  // OTLP reads an all-zero span id as "none"; one key in 2^64 lands there.
  return x == 0 ? 1 : x;
}

namespace {

constexpr int kSpanKindInternal = 1;
constexpr int kStatusCodeError = 2;
// As OpenTelemetry SDKs do by default, a span keeps a bounded number of events and counts the rest.
constexpr size_t kMaxEventsPerSpan = 1000;

// A note or an instant, waiting for the span or task it belongs to to be written.
struct SpanEvent {
  int64_t unix_ns = 0;
  std::string name;
  std::string format_string;  // a note's; empty for instants
  uint32_t thread_id = 0;
};

struct EventList {
  std::vector<SpanEvent> events;
  uint64_t dropped = 0;
  void add(SpanEvent event) {
    if (events.size() < kMaxEventsPerSpan)
      events.push_back(std::move(event));
    else
      ++dropped;
  }
};

// A list of OTLP KeyValue objects.
class Attributes {
 public:
  explicit Attributes(std::string& out) : out_(out) { out_ += "\"attributes\":["; }
  void add(std::string_view key, std::string_view value) {
    start(key);
    out_ += "{\"stringValue\":";
    append_json_string(out_, value);
    out_ += "}}";
  }
  // int64 values are strings in the JSON encoding (as in protobuf's JSON mapping).
  void add_int(std::string_view key, int64_t value) {
    start(key);
    fmt::format_to(std::back_inserter(out_), "{{\"intValue\":\"{}\"}}}}", value);
  }
  void add_bool(std::string_view key, bool value) {
    start(key);
    fmt::format_to(std::back_inserter(out_), "{{\"boolValue\":{}}}}}", value);
  }
  void close() { out_ += ']'; }

 private:
  void start(std::string_view key) {
    out_ += first_ ? "{\"key\":" : ",{\"key\":";
    first_ = false;
    append_json_string(out_, key);
    out_ += ",\"value\":";
  }
  std::string& out_;
  bool first_ = true;
};

class OtlpWriter {
 public:
  explicit OtlpWriter(OutputFile& out) : out_(out) {}

  void write_trace(const reader::Trace& trace, const model::TaskGraph& graph, ProgressCounter& progress,
                   bool first_trace) {
    trace_ = &trace;
    graph_ = &graph;
    // Distributed trace context does not exist in the recorder yet: every span of a process
    // is in the trace its uuid names. When events carry a W3C trace id, a task's (and its
    // spans') trace id comes from there instead, through this one place.
    ids_.emplace(trace.description().uuid);
    first_span_ = true;
    write_resource_header(first_trace);
    write_thread_spans(progress);
    write_task_spans();
    out_.write("]}]}");
  }

 private:
  void write_resource_header(bool first_trace) {
    const auto& description = trace_->description();
    std::string& text = out_.buffer();
    text += first_trace ? "\n{\"resource\":{" : ",\n{\"resource\":{";
    Attributes attributes(text);
    attributes.add("service.name", description.process_name);
    attributes.add_int("process.pid", description.pid);
    attributes.add("host.name", description.hostname);
    attributes.add("chronicle.trace.uuid", format::uuid_to_string(description.uuid));
    attributes.add("chronicle.trace.directory", trace_->directory());
    attributes.add_int("chronicle.events_discarded", static_cast<int64_t>(trace_->events_discarded()));
    attributes.close();
    text += "},\"scopeSpans\":[{\"scope\":{\"name\":\"chronicle\"},\"spans\":[";
  }

  int64_t unix_ns(uint64_t ticks) const { return trace_->to_unix_ns(ticks); }

  // Opens a span object up to its attributes, which the caller writes.
  std::string& open_span(uint64_t span_id, uint64_t parent_id, std::string_view name, uint64_t begin, uint64_t end) {
    std::string& text = out_.buffer();
    text += first_span_ ? "\n{\"traceId\":\"" : ",\n{\"traceId\":\"";
    first_span_ = false;
    text += ids_->trace_id();
    fmt::format_to(std::back_inserter(text), "\",\"spanId\":\"{:016x}\"", span_id);
    if (parent_id != 0) fmt::format_to(std::back_inserter(text), ",\"parentSpanId\":\"{:016x}\"", parent_id);
    text += ",\"name\":";
    append_json_string(text, name);
    fmt::format_to(std::back_inserter(text), ",\"kind\":{},\"startTimeUnixNano\":\"{}\",\"endTimeUnixNano\":\"{}\",",
                   kSpanKindInternal, unix_ns(begin), unix_ns(end));
    return text;
  }

  void write_events(std::string& text, const EventList& list) {
    text += ",\"events\":[";
    bool first = true;
    for (const SpanEvent& event : list.events) {
      fmt::format_to(std::back_inserter(text), "{}{{\"timeUnixNano\":\"{}\",\"name\":", first ? "" : ",",
                     event.unix_ns);
      first = false;
      append_json_string(text, event.name);
      text += ',';
      Attributes attributes(text);
      attributes.add_int("thread.id", event.thread_id);
      if (!event.format_string.empty()) attributes.add("chronicle.note.format", event.format_string);
      attributes.close();
      text += '}';
    }
    text += ']';
    if (list.dropped > 0) fmt::format_to(std::back_inserter(text), ",\"droppedEventsCount\":{}", list.dropped);
  }

  void write_thread_span(const reader::PairedSpan& span, uint64_t parent_id, const EventList& events) {
    const reader::Site* site = trace_->site(span.site_id);
    const std::string name = site ? site->name : fmt::format("#{}", span.site_id);
    std::string& text = open_span(ids_->thread_span(span.sequence), parent_id, name, span.begin, span.end);
    Attributes attributes(text);
    if (site) attributes.add("chronicle.category", site->category);
    attributes.add_int("thread.id", span.thread_id);
    if (const std::string thread = trace_->thread_name(span.thread_id); !thread.empty())
      attributes.add("thread.name", thread);
    if (site && !site->file.empty()) {
      attributes.add("code.filepath", site->file);
      attributes.add_int("code.lineno", site->line);
    }
    if (span.end_thread_id != span.thread_id) attributes.add_int("chronicle.span.end_thread.id", span.end_thread_id);
    attributes.add_int("chronicle.span.depth", span.depth);
    if (!span.ended) attributes.add_bool("chronicle.span.unfinished", true);
    attributes.close();
    write_events(text, events);
    text += '}';
    out_.flush_if_large();
  }

  // The parent of a span at the top of its owner: its task's span, if it has a task.
  uint64_t task_span_of(model::TaskId task) { return task != 0 && graph_->find(task) ? ids_->task_span(task) : 0; }

  void write_thread_spans(ProgressCounter& progress) {
    reader::SpanPairing spans(*trace_);
    // Parents of the open spans, and the events recorded inside them, by span sequence.
    std::map<uint64_t, uint64_t> parent_of;
    std::map<uint64_t, EventList> events_of;
    task_events_.clear();
    auto close = [&](const reader::PairedSpan& span) {
      write_thread_span(span, parent_of[span.sequence], events_of[span.sequence]);
      parent_of.erase(span.sequence);
      events_of.erase(span.sequence);
    };
    trace_->for_each_event(spans, [&](const reader::Event& event) {
      progress.count();
      switch (event.type) {
        case format::EventId::span_begin: {
          const reader::PairedSpan* span = event.span;
          parent_of[span->sequence] =
              span->parent_sequence != 0 ? ids_->thread_span(span->parent_sequence) : task_span_of(span->task);
          break;
        }
        case format::EventId::span_end:
          if (event.span) close(*event.span);
          break;
        case format::EventId::note:
        case format::EventId::instant: {
          // Each note or instant goes to the innermost span open in its task or thread, else to
          // the task running there; with neither, OTLP has no place for it.
          SpanEvent span_event;
          span_event.unix_ns = unix_ns(event.ticks);
          const reader::Site* site = trace_->site(event.name_id);
          span_event.name = event.type == format::EventId::note ? std::string(event.text)
                            : site                              ? site->name
                                                                : fmt::format("#{}", event.name_id);
          if (event.type == format::EventId::note && site) span_event.format_string = site->name;
          span_event.thread_id = event.thread_id;
          if (const reader::PairedSpan* open = spans.innermost_on(event.thread_id)) {
            events_of[open->sequence].add(std::move(span_event));
          } else if (const model::TaskId task = spans.running_task(event.thread_id); task != 0) {
            task_events_[task].add(std::move(span_event));
          }
          break;
        }
        default:
          break;
      }
      return true;
    });
    for (const reader::PairedSpan& span : spans.close_all(graph_->last_ticks())) close(span);
  }

  void write_link(std::string& text, bool& first, model::TaskId task, std::string_view relation) {
    if (!graph_->find(task)) return;
    text += first ? "{\"traceId\":\"" : ",{\"traceId\":\"";
    first = false;
    text += ids_->trace_id();
    fmt::format_to(std::back_inserter(text), "\",\"spanId\":\"{:016x}\",", ids_->task_span(task));
    Attributes attributes(text);
    attributes.add("chronicle.link", relation);
    attributes.add("chronicle.task.id", model::task_id_text(task));
    attributes.close();
    text += '}';
  }

  void write_task_spans() {
    static const EventList kNoEvents;
    for (const model::Task& task : graph_->tasks()) {
      const TaskExtent extent = task_extent(task, *graph_);
      const uint64_t parent = task.parent != 0 && graph_->find(task.parent) ? ids_->task_span(task.parent) : 0;
      std::string& text = open_span(ids_->task_span(task.id), parent, task.display_name(), extent.begin, extent.end);
      Attributes attributes(text);
      attributes.add("chronicle.task.id", model::task_id_text(task.id));
      attributes.add("chronicle.task.kind", format::task_kind_name(task.kind));
      if (!task.name.empty()) attributes.add("chronicle.task.function", task.name);
      if (!task.label.empty()) attributes.add("chronicle.task.label", task.label);
      if (task.created) attributes.add_int("thread.id", task.created_on_thread);
      attributes.add("chronicle.task.outcome",
                     task.resolved ? format::task_outcome_name(task.outcome) : std::string_view("unresolved"));
      if (task.resolved && !task.outcome_text.empty()) attributes.add("chronicle.task.outcome_text", task.outcome_text);
      attributes.add_int("chronicle.task.busy_ns", unix_ns(task.busy_ticks()) - unix_ns(0));
      attributes.add_int("chronicle.task.runs", static_cast<int64_t>(task.runs.size()));
      attributes.close();
      const auto events = task_events_.find(task.id);
      write_events(text, events != task_events_.end() ? events->second : kNoEvents);
      text += ",\"links\":[";
      bool first_link = true;
      for (const model::TaskId awaited : task.waits_on) write_link(text, first_link, awaited, "waits_on");
      if (task.resolver != 0 && task.resolver != task.id) write_link(text, first_link, task.resolver, "resolved_by");
      text += ']';
      if (task.resolved && task.outcome == format::TaskOutcome::failed) {
        fmt::format_to(std::back_inserter(text), ",\"status\":{{\"code\":{},\"message\":", kStatusCodeError);
        append_json_string(text, task.outcome_text);
        text += '}';
      }
      text += '}';
      out_.flush_if_large();
    }
  }

  OutputFile& out_;
  const reader::Trace* trace_ = nullptr;
  const model::TaskGraph* graph_ = nullptr;
  std::optional<OtlpIds> ids_;
  bool first_span_ = true;
  std::map<model::TaskId, EventList> task_events_;
};

}  // namespace

void export_otlp_json(const std::vector<reader::Trace>& traces, const std::string& path, const ExportOptions& options) {
  ProgressCounter progress(options);
  OutputFile out(path);
  out.write("{\"resourceSpans\":[");
  OtlpWriter writer(out);
  for (size_t i = 0; i < traces.size(); ++i) {
    const model::TaskGraph graph = build_task_graph(traces[i], progress);
    writer.write_trace(traces[i], graph, progress, i == 0);
  }
  out.write("\n]}\n");
  out.close();
}

}  // namespace chronicle::exports
