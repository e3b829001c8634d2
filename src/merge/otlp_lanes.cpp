// Writes another service's spans (read from OTLP/JSON) as the threads of a chronicle trace.
//
// A thread's spans nest, and a service's spans need not, so they go on lanes (the trace's
// threads). A lane holds chains of parents and children: a span goes on its parent's lane when
// the parent is the innermost span open there, holds it whole and has no span event while it is
// open (so that every event lands in its own span); else on the first lane with nothing open,
// else on a new lane. Each span names its trace, id, parent and kind (span_context), so what the
// readers derive from nesting never replaces what the service said.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <map>
#include <optional>

#include "merge/otlp_input_spans.hpp"

namespace chronicle::merge {
namespace {

constexpr uint8_t kSampled = 1;  // the W3C flag: the span was recorded
constexpr int kLastOtlpKind = static_cast<int>(format::OtlpSpanKind::consumer);

bool is_receive(const InputSpan& span) {
  return span.kind == kOtlpKindServer || span.kind == kOtlpKindConsumer;
}
bool is_send(const InputSpan& span) {
  return span.kind == kOtlpKindClient || span.kind == kOtlpKindProducer;
}

// A receive or send alone reads back as a span named "receive" or an instant "send": one of those
// needs no span of its own (chronicle's own export round-trips as it was).
bool named(const InputSpan& span) {
  if (is_receive(span)) return span.name != "receive";
  if (is_send(span)) return span.name != "send" || span.end != span.start;
  return true;
}

bool has_event_within(const InputSpan& span, uint64_t from, uint64_t to) {
  return std::any_of(span.events.begin(), span.events.end(),
                     [&](const InputEvent& event) { return event.time >= from && event.time <= to; });
}

class LaneWriter {
 public:
  LaneWriter(format::TraceWriter& writer, uint64_t base_ns) : writer_(writer), base_(base_ns) {}

  size_t lanes() const { return lanes_.size(); }

  size_t add_lane() {
    lanes_.emplace_back();
    writer_.define_thread(thread(lanes_.size() - 1), fmt::format("otlp lane {}", lanes_.size()));
    return lanes_.size() - 1;
  }

  // The innermost span open on `lane` at `time`, once what ended by then is written; null: none.
  const InputSpan* innermost_at(size_t lane, uint64_t time) {
    auto& open = lanes_[lane];
    while (!open.empty() && open.back().span->end <= time) {
      const InputSpan& span = *open.back().span;
      flush_events(lane, span.end, true);
      end(lane, span);
      open.pop_back();
    }
    return open.empty() ? nullptr : open.back().span;
  }

  void begin(size_t lane, const InputSpan& span) {
    flush_events(lane, span.start, false);
    const uint32_t on = thread(lane);
    const uint64_t at = span.start - base_;
    if (is_receive(span)) {
      writer_.add(on, format::EventId::context_receive, at,
                  {span.trace_high, span.trace_low, span.id, span.parent, uint64_t{kSampled}});
      if (!span.trace_state.empty())
        writer_.add(on, format::EventId::context_tracestate, at, {span.id, std::string_view(span.trace_state)});
    }
    if (named(span)) {
      const uint64_t kind = span.kind >= 0 && span.kind <= kLastOtlpKind ? static_cast<uint64_t>(span.kind) : 0;
      writer_.add(on, format::EventId::span_context, at, {span.trace_high, span.trace_low, span.id, span.parent, kind});
      const uint32_t site = writer_.define_site(format::SiteKind::span, span.scope, span.name);
      writer_.add(on, format::EventId::span_begin, at, {uint64_t{site}});
      write_attributes(on, at, site, span.scope, span.attributes);
      if (span.failed)
        writer_.add(on, format::EventId::span_status, at,
                    {uint64_t{site}, uint64_t{1}, std::string_view(span.status_message)});
    }
    if (is_send(span))
      writer_.add(on, format::EventId::context_send, at,
                  {span.trace_high, span.trace_low, span.id, uint64_t{kSampled}});
    lanes_[lane].push_back({&span, 0});
  }

  void finish() {
    for (size_t lane = 0; lane < lanes_.size(); ++lane) innermost_at(lane, ~uint64_t{0});
  }

 private:
  struct Open {
    const InputSpan* span;
    size_t next_event;  // its first event not yet written
  };

  static uint32_t thread(size_t lane) { return static_cast<uint32_t>(lane + 1); }

  void end(size_t lane, const InputSpan& span) {
    const uint64_t at = span.end - base_;
    if (named(span))
      writer_.add(thread(lane), format::EventId::span_end, at,
                  {uint64_t{writer_.define_site(format::SiteKind::span, span.scope, span.name)}});
    if (is_receive(span)) writer_.add(thread(lane), format::EventId::context_receive_end, at, {span.id});
  }

  // Writes the events of the lane's open spans before `limit` (or at it, when `inclusive`).
  void flush_events(size_t lane, uint64_t limit, bool inclusive) {
    std::vector<std::pair<const InputEvent*, const InputSpan*>> due;
    for (Open& open : lanes_[lane]) {
      const auto& events = open.span->events;
      while (open.next_event < events.size() &&
             (events[open.next_event].time < limit || (inclusive && events[open.next_event].time == limit)))
        due.emplace_back(&events[open.next_event++], open.span);
    }
    std::stable_sort(due.begin(), due.end(),
                     [](const auto& a, const auto& b) { return a.first->time < b.first->time; });
    for (const auto& [event, span] : due) {
      const uint64_t at = event->time - base_;
      const uint32_t site = writer_.define_site(format::SiteKind::instant, span->scope, event->name);
      writer_.add(thread(lane), format::EventId::instant, at, {uint64_t{site}});
      write_attributes(thread(lane), at, site, span->scope, event->attributes);
    }
  }

  void write_attributes(uint32_t on, uint64_t at, uint32_t owner_site, const std::string& scope,
                        const std::vector<InputAttribute>& attributes) {
    for (const InputAttribute& attribute : attributes) {
      const uint64_t key = writer_.define_site(format::SiteKind::attribute, scope, attribute.key);
      if (attribute.type == format::EventId::attribute_string)
        writer_.add(on, attribute.type, at, {uint64_t{owner_site}, key, std::string_view(attribute.text)});
      else
        writer_.add(on, attribute.type, at, {uint64_t{owner_site}, key, attribute.bits});
    }
  }

  format::TraceWriter& writer_;
  uint64_t base_;
  std::vector<std::vector<Open>> lanes_;  // the spans open on each lane, innermost last
};

}  // namespace

void write_span_lanes(std::vector<InputSpan>& spans, format::TraceWriter& writer, uint64_t base_ns) {
  std::stable_sort(spans.begin(), spans.end(), [](const InputSpan& a, const InputSpan& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  LaneWriter lanes(writer, base_ns);
  std::map<uint64_t, size_t> lane_of;  // by span id
  for (const InputSpan& span : spans) {
    std::optional<size_t> chosen;
    if (const auto parent_lane = lane_of.find(span.parent); span.parent != 0 && parent_lane != lane_of.end()) {
      const InputSpan* innermost = lanes.innermost_at(parent_lane->second, span.start);
      if (innermost && innermost->id == span.parent && innermost->end >= span.end &&
          !has_event_within(*innermost, span.start, span.end))
        chosen = parent_lane->second;
    }
    for (size_t lane = 0; !chosen && lane < lanes.lanes(); ++lane)
      if (!lanes.innermost_at(lane, span.start)) chosen = lane;
    if (!chosen) chosen = lanes.add_lane();
    lanes.begin(*chosen, span);
    lane_of[span.id] = *chosen;
  }
  lanes.finish();
}

}  // namespace chronicle::merge
