#include "export/otlp_spans.hpp"

#include "export/otel_environment.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "export/otlp_json.hpp"
#include "format/metadata.hpp"
#include "reader/messages.hpp"

namespace chronicle::exports {

std::string otlp_hex(const OtlpTraceId& trace_id) {
  std::string text;
  text.reserve(32);
  append_hex_bytes(text, trace_id);
  return text;
}

namespace {

constexpr int kSpanKindInternal = static_cast<int>(format::OtlpSpanKind::internal);
constexpr int kSpanKindServer = static_cast<int>(format::OtlpSpanKind::server);
constexpr int kSpanKindClient = static_cast<int>(format::OtlpSpanKind::client);
constexpr int kStatusCodeError = 2;
// As OpenTelemetry SDKs do by default, a span keeps a bounded number of events and counts the rest.
constexpr size_t kMaxEventsPerSpan = 1000;

// A note or an instant, waiting for the span or task it belongs to to be written.
struct SpanEvent {
  int64_t unix_ns = 0;
  std::string name;
  std::string format_string;  // a note's; empty for instants
  uint32_t thread_id = 0;
  std::vector<reader::SpanAttribute> attributes;  // an instant's (CHRONICLE_INSTANT_ARGS)
};

struct EventList {
  std::vector<SpanEvent> events;
  uint64_t dropped = 0;
  // The event as kept (null when it was one too many).
  SpanEvent* add(SpanEvent event) {
    if (events.size() < kMaxEventsPerSpan) return &events.emplace_back(std::move(event));
    ++dropped;
    return nullptr;
  }
};

// Fills a list of attributes, reusing the strings of the previous span's (the producer hands
// out one span object over and over: no allocation per attribute once it has warmed up).
class AttributeList {
 public:
  explicit AttributeList(std::vector<OtlpAttribute>& list) : list_(list) {}
  ~AttributeList() { list_.resize(used_); }
  void add(std::string_view key, std::string_view value) {
    OtlpAttribute& attribute = next(key, OtlpAttribute::Type::string);
    attribute.text.assign(value);
  }
  void add_int(std::string_view key, int64_t value) { next(key, OtlpAttribute::Type::integer).number = value; }
  void add_bool(std::string_view key, bool value) { next(key, OtlpAttribute::Type::boolean).number = value; }
  void add_real(std::string_view key, double value) { next(key, OtlpAttribute::Type::real).real = value; }
  // The program's own (CHRONICLE_SPAN_ARGS, or another service's merged from OTLP): OTLP has no
  // unsigned integers, so a uint64 past int64's range is its decimal text. It replaces one of the
  // same key set before (a merged span's own thread.id over its lane's): OTLP's keys are unique.
  void add(const reader::SpanAttribute& attribute) {
    using Type = reader::SpanAttribute::Type;
    forget(attribute.key);
    switch (attribute.type) {
      case Type::int64:
        return add_int(attribute.key, attribute.int_value);
      case Type::uint64:
        if (attribute.uint_value <= static_cast<uint64_t>(INT64_MAX))
          return add_int(attribute.key, static_cast<int64_t>(attribute.uint_value));
        return add(attribute.key, std::to_string(attribute.uint_value));
      case Type::float64:
        return add_real(attribute.key, attribute.float_value);
      case Type::boolean:
        return add_bool(attribute.key, attribute.int_value != 0);
      case Type::string:
        return add(attribute.key, attribute.text);
    }
  }

 private:
  void forget(std::string_view key) {
    for (size_t i = 0; i < used_; ++i)
      if (list_[i].key == key) {
        std::rotate(list_.begin() + static_cast<std::ptrdiff_t>(i), list_.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                    list_.begin() + static_cast<std::ptrdiff_t>(used_));
        --used_;
        return;
      }
  }
  OtlpAttribute& next(std::string_view key, OtlpAttribute::Type type) {
    if (used_ == list_.size()) list_.emplace_back();
    OtlpAttribute& attribute = list_[used_++];
    attribute.key.assign(key);
    attribute.type = type;
    attribute.text.clear();
    attribute.number = 0;
    attribute.real = 0;
    return attribute;
  }
  std::vector<OtlpAttribute>& list_;
  size_t used_ = 0;
};

OtlpTraceId trace_id_bytes(uint64_t high, uint64_t low) {
  OtlpTraceId bytes{};
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<uint8_t>(high >> (56 - 8 * i));
    bytes[8 + i] = static_cast<uint8_t>(low >> (56 - 8 * i));
  }
  return bytes;
}

constexpr uint8_t kSampledTraceFlag = 0x01;  // W3C trace-flags' "sampled" bit

// The scope of spans that no category names: tasks, sends and receives.
constexpr std::string_view kChronicleScope = "chronicle";

class OtlpSpanProducer {
 public:
  OtlpSpanProducer() = default;
  explicit OtlpSpanProducer(OtlpSpanSink& sink) : sink_(&sink) {}

  void produce_trace(const reader::Trace& trace, const model::TaskGraph& graph, ProgressCounter& progress) {
    begin_round(trace, *sink_);
    trace.for_each_event(*pairing_, [&](const reader::Event& event) {
      progress.count();
      on_event(event);
      return true;
    });
    finish(graph);
  }

  // A trace read in rounds: each round goes on with the pairing and the open spans of the last.
  void begin_round(const reader::Trace& trace, OtlpSpanSink& sink) {
    sink_ = &sink;
    trace_ = &trace;
    sampler_ = otel_sampler_from_environment();
    // Trace ids, span ids and parents come from the reader's one rule (reader::SpanPairing).
    if (pairing_)
      pairing_->reread(trace);
    else
      pairing_.emplace(trace);
    produce_resource();
  }

  // An event of the round, in time order: paired as Trace::for_each_event pairs it.
  void follow(reader::Event& event) {
    event.depth = pairing_->depth_on(event.thread_id);
    event.span = pairing_->follow(event);
    if (event.span && event.type == format::EventId::span_end) {
      event.name_id = event.span->site_id;
      event.depth = event.span->depth;
    }
    on_event(event);
  }
  void end_round() { sink_->end_resource(); }

  // The end of the trace (`graph` is its whole task graph): what is still open, one span per task.
  void finish(const model::TaskGraph& graph) {
    graph_ = &graph;
    for (const reader::PairedSpan& span : pairing_->close_all(graph_->last_ticks())) close(span);
    for (const reader::PairedSpan& span : pairing_->close_all_receives(graph_->last_ticks())) close(span);
    produce_task_spans();
    sink_->end_resource();
    pairing_.reset();
    events_of_.clear();
    task_events_.clear();
    last_instant_.clear();
    unsampled_traces_.clear();
    tracestates_.clear();
    last_receive_.clear();
  }

 private:
  void produce_resource() {
    const auto& description = trace_->description();
    // Another service's spans (merged from OTLP input) keep the name that service gave itself:
    // this environment describes chronicle's own process.
    const OtelResource settings =
        description.source == format::kSourceOtlp ? OtelResource{} : otel_resource_from_environment();
    OtlpResource resource;
    {
      AttributeList attributes(resource.attributes);
      attributes.add("service.name", settings.service_name.empty() ? description.process_name : settings.service_name);
      // The environment's attributes, but not over the facts of the recorded process below.
      for (const auto& [key, value] : settings.attributes)
        if (key != "process.pid" && key != "host.name" && !key.starts_with("chronicle.")) attributes.add(key, value);
      attributes.add_int("process.pid", description.pid);
      attributes.add("host.name", description.hostname);
      attributes.add("chronicle.trace.uuid", format::uuid_to_string(description.uuid));
      attributes.add("chronicle.trace.directory", trace_->directory());
      attributes.add_int("chronicle.events_discarded", static_cast<int64_t>(trace_->events_discarded()));
    }
    sink_->begin_resource(resource);
  }

  int64_t unix_ns(uint64_t ticks) const { return trace_->to_unix_ns(ticks); }

  // --- the rules: ids, parents and kinds, one small function each ---

  OtlpTraceId task_trace(model::TaskId task) const {
    const auto [high, low] = pairing_->task_trace(task);
    return trace_id_bytes(high, low);
  }

  // A task's parent: the span it was created inside, when that is in its trace.
  uint64_t task_parent(const model::Task& task) const { return pairing_->task_parent_span(task.id); }

  // The kind another service gave its span (merged from OTLP), else its role's.
  int thread_span_kind(const reader::PairedSpan& span) const {
    if (span.kind != 0) return span.kind;
    return span.role == reader::SpanRole::send      ? kSpanKindClient
           : span.role == reader::SpanRole::receive ? kSpanKindServer
                                                    : kSpanKindInternal;
  }
  int task_kind(const model::Task&) const { return kSpanKindInternal; }

  // --- building the span ---

  // Sets what every span has; the caller adds attributes, events and links.
  OtlpSpan& open_span(const OtlpTraceId& trace_id, uint64_t span_id, uint64_t parent_id, std::string_view name,
                      int kind, uint64_t begin, uint64_t end, bool task) {
    span_.trace_id = trace_id;
    span_.span_id = span_id;
    span_.parent_span_id = parent_id;
    span_.name.assign(name);
    span_.kind = kind;
    span_.start_unix_ns = unix_ns(begin);
    span_.end_unix_ns = unix_ns(end);
    span_.events.clear();
    span_.dropped_events = 0;
    span_.links.clear();
    span_.status.reset();
    span_.task = task;
    span_.scope = kChronicleScope;
    span_.trace_state.clear();
    if (const auto found = tracestates_.find(trace_id); found != tracestates_.end()) span_.trace_state = found->second;
    return span_;
  }

  void set_events(OtlpSpan& span, const EventList& list) {
    span.events.resize(list.events.size());
    for (size_t i = 0; i < list.events.size(); ++i) {
      const SpanEvent& event = list.events[i];
      OtlpEvent& out = span.events[i];
      out.unix_ns = event.unix_ns;
      out.name = event.name;
      AttributeList attributes(out.attributes);
      attributes.add_int("thread.id", event.thread_id);
      if (!event.format_string.empty()) attributes.add("chronicle.note.format", event.format_string);
      for (const reader::SpanAttribute& attribute : event.attributes) attributes.add(attribute);
    }
    span.dropped_events = list.dropped;
  }

  // ParentBased: a trace whose remote parent was not sampled (a receive's or a task's context
  // with trace-flags 00) is not exported, as an OpenTelemetry SDK would not record it.
  bool unsampled(uint64_t trace_high, uint64_t trace_low) const {
    return sampler_ == OtelSampler::parent_based_always_on && unsampled_traces_.count({trace_high, trace_low}) != 0;
  }

  void produce_thread_span(const reader::PairedSpan& span, const EventList& events) {
    if (unsampled(span.trace_high, span.trace_low)) {
      ++spans_unsampled_;
      return;
    }
    const reader::Site* site = trace_->site(span.site_id);
    const bool message = span.role != reader::SpanRole::span;
    const std::string name = span.role == reader::SpanRole::send      ? "send"
                             : span.role == reader::SpanRole::receive ? "receive"
                             : site                                   ? site->name
                                                                      : fmt::format("#{}", span.site_id);
    // A receive's parent is the sender's span, in this export or another host's (as an
    // OpenTelemetry SDK's server span has it): a backend that gets both builds one tree.
    OtlpSpan& out = open_span(trace_id_bytes(span.trace_high, span.trace_low), span.span_id, span.parent_span_id, name,
                              thread_span_kind(span), span.begin, span.end, false);
    // The category is the instrumentation scope (its call sites are one instrumented part).
    if (site && !message && !site->category.empty()) out.scope = site->category;
    {
      AttributeList attributes(out.attributes);
      if (site && !message) attributes.add("chronicle.category", site->category);
      attributes.add_int("thread.id", span.thread_id);
      if (const std::string thread = trace_->thread_name(span.thread_id); !thread.empty())
        attributes.add("thread.name", thread);
      if (site && !message && !site->file.empty()) {
        attributes.add("code.filepath", site->file);
        attributes.add_int("code.lineno", site->line);
      }
      if (span.end_thread_id != span.thread_id) attributes.add_int("chronicle.span.end_thread.id", span.end_thread_id);
      if (!message) attributes.add_int("chronicle.span.depth", span.depth);
      if (!span.ended) attributes.add_bool("chronicle.span.unfinished", true);
      for (const reader::SpanAttribute& attribute : span.attributes) attributes.add(attribute);
    }
    if (span.failed) out.status = OtlpStatus{kStatusCodeError, span.status_message};
    set_events(out, events);
    sink_->span(out);
  }

  void close(const reader::PairedSpan& span) {
    const auto events = events_of_.find(span.sequence);
    produce_thread_span(span, events != events_of_.end() ? events->second : EventList{});
    if (events != events_of_.end()) events_of_.erase(events);
  }

  void on_event(const reader::Event& event) {
    switch (event.type) {
      case format::EventId::context_receive:
      case format::EventId::task_context:
        if ((event.context_flags & kSampledTraceFlag) == 0)
          unsampled_traces_.insert({event.trace_high, event.trace_low});
        if (event.type == format::EventId::context_receive)
          last_receive_[event.thread_id] = {event.context_span, trace_id_bytes(event.trace_high, event.trace_low)};
        break;
      case format::EventId::context_tracestate:
        // Right after its receive on the same thread: the state of that receive's trace.
        if (const auto found = last_receive_.find(event.thread_id);
            found != last_receive_.end() && found->second.first == event.context_span)
          tracestates_[found->second.second] = std::string(event.text);
        break;
      case format::EventId::span_end:
      case format::EventId::context_send:
      case format::EventId::context_receive_end:
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
        const bool instant = event.type == format::EventId::instant;
        LastInstant& last = last_instant_[event.thread_id];
        last = {};
        if (const reader::PairedSpan* open = pairing_->innermost_on(event.thread_id)) {
          if (events_of_[open->sequence].add(std::move(span_event)) && instant)
            last = {open->sequence, 0, events_of_[open->sequence].events.size()};
        } else if (const model::TaskId task = pairing_->running_task(event.thread_id); task != 0) {
          if (task_events_[task].add(std::move(span_event)) && instant)
            last = {0, task, task_events_[task].events.size()};
        }
        break;
      }
      case format::EventId::attribute_int:
      case format::EventId::attribute_uint:
      case format::EventId::attribute_float:
      case format::EventId::attribute_bool:
      case format::EventId::attribute_string:
        // A span's are with it (the pairing's); an instant's follow it on its thread.
        if (!event.span && event.span_site != 0)
          if (SpanEvent* instant = last_instant(event.thread_id))
            instant->attributes.push_back(reader::attribute_of(*trace_, event));
        break;
      default:
        break;
    }
  }

  void add_link(OtlpSpan& span, model::TaskId task, std::string_view relation) {
    if (!graph_->find(task)) return;
    OtlpLink& link = span.links.emplace_back();
    link.trace_id = task_trace(task);
    link.span_id = pairing_->task_span_id(task);
    AttributeList attributes(link.attributes);
    attributes.add("chronicle.link", relation);
    attributes.add("chronicle.task.id", model::task_id_text(task));
  }

  void produce_task_span(const model::Task& task) {
    static const EventList kNoEvents;
    if (const auto trace = pairing_->task_trace(task.id); unsampled(trace.first, trace.second)) {
      ++spans_unsampled_;
      return;
    }
    const TaskExtent extent = task_extent(task, *graph_);
    OtlpSpan& out = open_span(task_trace(task.id), pairing_->task_span_id(task.id), task_parent(task),
                              task.display_name(), task_kind(task), extent.begin, extent.end, true);
    {
      AttributeList attributes(out.attributes);
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
      if (const auto* own = pairing_->task_attributes(task.id))
        for (const reader::SpanAttribute& attribute : *own) attributes.add(attribute);
    }
    const auto events = task_events_.find(task.id);
    set_events(out, events != task_events_.end() ? events->second : kNoEvents);
    for (const model::TaskId awaited : task.waits_on) add_link(out, awaited, "waits_on");
    if (task.resolver != 0 && task.resolver != task.id) add_link(out, task.resolver, "resolved_by");
    if (task.resolved && task.outcome == format::TaskOutcome::failed)
      out.status = OtlpStatus{kStatusCodeError, task.outcome_text};
    sink_->span(out);
  }

  void produce_task_spans() {
    for (const model::Task& task : graph_->tasks()) produce_task_span(task);
  }

  OtlpSpanSink* sink_ = nullptr;
  const reader::Trace* trace_ = nullptr;
  const model::TaskGraph* graph_ = nullptr;
  std::optional<reader::SpanPairing> pairing_;
  std::map<uint64_t, EventList> events_of_;  // the events recorded inside the open spans, by span sequence
  // Each thread's last instant, where it was kept (an index + 1; 0: none): its attributes follow it.
  struct LastInstant {
    uint64_t span_sequence = 0;
    model::TaskId task = 0;
    size_t position = 0;
  };
  std::unordered_map<uint32_t, LastInstant> last_instant_;
  OtelSampler sampler_ = OtelSampler::parent_based_always_on;
  std::set<std::pair<uint64_t, uint64_t>> unsampled_traces_;  // by trace id (high, low)
  std::map<OtlpTraceId, std::string> tracestates_;            // by trace id: what its receive's message said
  std::unordered_map<uint32_t, std::pair<uint64_t, OtlpTraceId>> last_receive_;  // by thread: span, trace
  uint64_t spans_unsampled_ = 0;
  SpanEvent* last_instant(uint32_t thread_id) {
    const LastInstant& last = last_instant_[thread_id];
    if (last.position == 0) return nullptr;
    EventList* list = nullptr;
    if (last.span_sequence != 0) {
      const auto found = events_of_.find(last.span_sequence);
      if (found != events_of_.end()) list = &found->second;
    } else if (const auto found = task_events_.find(last.task); found != task_events_.end()) {
      list = &found->second;
    }
    return list && last.position <= list->events.size() ? &list->events[last.position - 1] : nullptr;
  }
  std::map<model::TaskId, EventList> task_events_;
  OtlpSpan span_;  // reused for every span
};

}  // namespace

struct OtlpLiveSpanProducer::State {
  OtlpSpanProducer producer;
};

OtlpLiveSpanProducer::OtlpLiveSpanProducer() : state_(std::make_unique<State>()) {}
OtlpLiveSpanProducer::~OtlpLiveSpanProducer() = default;

void OtlpLiveSpanProducer::begin_round(const reader::Trace& trace, OtlpSpanSink& sink) {
  state_->producer.begin_round(trace, sink);
}
void OtlpLiveSpanProducer::follow(reader::Event& event) {
  state_->producer.follow(event);
}
void OtlpLiveSpanProducer::end_round() {
  state_->producer.end_round();
}
void OtlpLiveSpanProducer::finish(const model::TaskGraph& graph) {
  state_->producer.finish(graph);
}

void produce_otlp_spans(const std::vector<reader::Trace>& traces, OtlpSpanSink& sink, ProgressCounter& progress) {
  OtlpSpanProducer producer(sink);
  for (const reader::Trace& trace : traces) {
    const model::TaskGraph graph = build_task_graph(trace, progress);
    producer.produce_trace(trace, graph, progress);
  }
}

}  // namespace chronicle::exports
