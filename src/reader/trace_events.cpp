// A stream's events read back: the cursor over its readable packets, and each raw event decoded
// into an Event.
#include "reader/trace_reader.hpp"

#include <algorithm>
#include <cstdint>

#include "reader/trace_reader_internal.hpp"

namespace chronicle::reader {

using trace_internal::load;

Trace::StreamCursor::StreamCursor(const Trace& trace, size_t index, uint32_t event_types)
    : trace_(trace),
      index_(index),
      thread_id_(trace.streams_[index].thread_id),
      packets_(trace.readable_packets_[index]),
      packet_event_types_(trace.packet_event_types_[index]),
      event_types_(event_types),
      end_packet_(packets_.size()) {}

Trace::StreamCursor::StreamCursor(const Trace& trace, size_t index, size_t first_packet, size_t end_packet)
    : StreamCursor(trace, index) {
  end_packet_ = std::min(end_packet, packets_.size());
  next_packet_ = std::min(first_packet, end_packet_);
}

bool Trace::StreamCursor::next_packet() {
  // All types (the default) read every packet, without looking at what the check noted.
  if (event_types_ != ~uint32_t{0})
    while (next_packet_ < end_packet_ && (packet_event_types_[next_packet_] & event_types_) == 0) ++next_packet_;
  return load_packet();
}

bool Trace::StreamCursor::load_packet() {
  if (next_packet_ >= end_packet_) return false;
  const PacketPlace& place = packets_[next_packet_];
  packet_offset_ = place.offset;
  packet_file_ = place.file;
  const uint8_t* packet = trace_.packet_at(index_, next_packet_++, position_);
  const auto& header = *reinterpret_cast<const format::PacketHeader*>(packet);
  packet_.emplace(packet, format::content_bytes(header));
  return true;
}

[[gnu::always_inline]] inline bool Trace::StreamCursor::next_raw(format::RawEvent& raw) {
  while (true) {
    if (packet_) {
      try {
        if (packet_->next(raw)) return true;
      } catch (const format::DecodeError& error) {
        throw TraceError(trace_.streams_[index_].files[packet_file_], packet_offset_ + error.offset(), error.what());
      }
    }
    if (!next_packet()) return false;
  }
}

// Worked out when asked, not kept per event (a store per event was a tenth of next()'s time): the
// decoder's last raw event is the one read last, or the compound that one is a part of.
EventMark Trace::StreamCursor::mark() const {
  EventMark mark{packet_->last_ticks(), static_cast<uint32_t>(next_packet_ - 1),
                 static_cast<uint32_t>(packet_->last_offset()), 0};
  if (compound_part_ != 0)
    mark.part = static_cast<uint32_t>(compound_part_ - 1);
  else if (compound_.spec && compound_packet_ == next_packet_ - 1 && compound_.offset == mark.offset)
    mark.part = static_cast<uint32_t>(compound_.spec->stands_for.size() - 1);  // its last part
  return mark;
}

void Trace::StreamCursor::seek(const Mark& mark) {
  compound_part_ = 0;
  packet_.reset();
  next_packet_ = mark.packet;
  if (!load_packet()) return;
  packet_->resume_at(mark.offset, mark.ticks);
  if (mark.part == 0) return;
  format::RawEvent raw;
  if (!next_raw(raw) || mark.part >= raw.spec->stands_for.size()) return;
  compound_ = raw;
  compound_packet_ = next_packet_ - 1;
  compound_part_ = mark.part;
}

bool Trace::StreamCursor::next(Event& event) {
  format::RawEvent raw;
  if (compound_part_ != 0)
    raw = compound_;
  else if (!next_raw(raw))
    return false;
  // A compound event is read as the events it stands for, one per call, in their order.
  const auto stored = static_cast<format::EventId>(raw.spec->id);
  const auto& parts = raw.spec->stands_for;
  const size_t part = compound_part_;
  const auto type = parts.empty() ? stored : parts[part];
  if (!parts.empty()) {
    compound_ = raw;
    compound_packet_ = next_packet_ - 1;
    compound_part_ = (compound_part_ + 1) % parts.size();
  }
  event.type = type;
  event.ticks = raw.ticks;
  event.thread_id = thread_id_;
  event.stream = static_cast<uint32_t>(index_);
  event.name_id = 0;
  event.value = 0;
  event.value_float = 0;
  event.text = {};
  event.depth = 0;
  event.task = 0;
  event.related_task = 0;
  event.task_kind = format::TaskKind::unknown;
  event.outcome = format::TaskOutcome::ok;
  event.span = nullptr;
  event.span_site = 0;
  // Payload sizes were checked against the catalogue by the decoder; the layouts are its.
  auto text_after = [&raw](size_t fixed) {
    return std::string_view(reinterpret_cast<const char*>(raw.payload + fixed), raw.payload_size - fixed - 1);
  };
  switch (stored) {
    case format::EventId::span_begin:
    case format::EventId::span_end:
    case format::EventId::instant:
      event.name_id = load<format::NamePayload>(raw.payload).name_id;
      break;
    case format::EventId::counter: {
      const auto payload = load<format::CounterPayload>(raw.payload);
      event.name_id = payload.name_id;
      event.value = payload.value;
      break;
    }
    case format::EventId::counter_float: {
      const auto payload = load<format::CounterFloatPayload>(raw.payload);
      event.name_id = payload.name_id;
      event.value_float = payload.value;
      break;
    }
    case format::EventId::note:
      event.name_id = load<format::NotePrefix>(raw.payload).name_id;
      event.text = text_after(sizeof(format::NotePrefix));
      break;
    case format::EventId::task_create: {
      const auto payload = load<format::TaskCreatePayload>(raw.payload);
      event.task = payload.task;
      event.related_task = payload.parent;
      event.task_kind = static_cast<format::TaskKind>(payload.kind);
      event.name_id = payload.name_id;
      break;
    }
    case format::EventId::task_run_begin:
    case format::EventId::task_run_end:
      event.task = load<format::TaskPayload>(raw.payload).task;
      break;
    case format::EventId::task_wait: {
      const auto payload = load<format::TaskWaitPayload>(raw.payload);
      event.task = payload.task;
      event.related_task = payload.awaited;
      break;
    }
    case format::EventId::task_resolve: {
      const auto payload = load<format::TaskResolvePrefix>(raw.payload);
      event.task = payload.task;
      event.related_task = payload.resolver;
      event.outcome = static_cast<format::TaskOutcome>(payload.outcome);
      event.text = text_after(sizeof(format::TaskResolvePrefix));
      break;
    }
    case format::EventId::task_invoke: {
      const auto payload = load<format::TaskInvokePayload>(raw.payload);
      event.task = payload.task;
      if (type == format::EventId::task_resolve) {
        event.related_task = payload.resolver;
        event.outcome = static_cast<format::TaskOutcome>(payload.outcome);
      }
      break;
    }
    case format::EventId::task_hand_over:
    case format::EventId::task_return: {
      // Wait or resolve, then the run's end: the task's; the run's beginning: the next one's.
      const auto payload = load<format::TaskSwitchPayload>(raw.payload);
      event.task = type == format::EventId::task_run_begin ? payload.next : payload.task;
      if (type == format::EventId::task_wait) event.related_task = payload.next;
      if (type == format::EventId::task_resolve) event.related_task = payload.task;  // ok, by itself
      break;
    }
    case format::EventId::task_label:
      event.task = load<format::TaskLabelPrefix>(raw.payload).task;
      event.text = text_after(sizeof(format::TaskLabelPrefix));
      break;
    case format::EventId::context_send: {
      const auto payload = load<format::ContextSendPayload>(raw.payload);
      event.trace_high = payload.trace_high;
      event.trace_low = payload.trace_low;
      event.context_span = payload.span;
      event.context_flags = payload.flags;
      break;
    }
    case format::EventId::context_receive: {
      const auto payload = load<format::ContextReceivePayload>(raw.payload);
      event.trace_high = payload.trace_high;
      event.trace_low = payload.trace_low;
      event.context_span = payload.span;
      event.context_parent = payload.parent;
      event.context_flags = payload.flags;
      break;
    }
    case format::EventId::span_context: {
      const auto payload = load<format::SpanContextPayload>(raw.payload);
      event.trace_high = payload.trace_high;
      event.trace_low = payload.trace_low;
      event.context_span = payload.span;
      event.context_parent = payload.parent;
      event.span_kind = payload.kind;
      break;
    }
    case format::EventId::context_receive_end:
      event.context_span = load<format::ContextReceiveEndPayload>(raw.payload).span;
      break;
    case format::EventId::context_tracestate:
      event.context_span = load<format::ContextTracestatePrefix>(raw.payload).span;
      event.text = text_after(sizeof(format::ContextTracestatePrefix));
      break;
    case format::EventId::task_context: {
      const auto payload = load<format::TaskContextPayload>(raw.payload);
      event.task = payload.task;
      event.trace_high = payload.trace_high;
      event.trace_low = payload.trace_low;
      event.context_flags = payload.flags;
      break;
    }
    case format::EventId::cpu_sample: {
      const auto payload = load<format::CpuSamplePrefix>(raw.payload);
      event.sampled_pid = payload.pid;
      event.sampled_tid = payload.tid;
      event.frame_count = payload.frame_count;
      event.frames = raw.payload + sizeof payload;
      const uint8_t* after_frames = event.frames + size_t{payload.frame_count} * sizeof(uint64_t);
      std::memcpy(&event.stack_word_count, after_frames, sizeof event.stack_word_count);
      event.stack_words = after_frames + sizeof event.stack_word_count;
      break;
    }
    case format::EventId::attribute_int:
    case format::EventId::attribute_uint:
    case format::EventId::attribute_float:
    case format::EventId::attribute_bool:
    case format::EventId::attribute_string: {
      // Every attribute begins as a string one does (span, key); its value follows (catalogue.cpp).
      const auto prefix = load<format::AttributeStringPrefix>(raw.payload);
      event.span_site = prefix.span_site;
      event.name_id = prefix.key_id;
      const uint8_t* value = raw.payload + sizeof prefix;
      if (type == format::EventId::attribute_int) event.value = load<int64_t>(value);
      if (type == format::EventId::attribute_uint) event.value_uint = load<uint64_t>(value);
      if (type == format::EventId::attribute_float) event.value_float = load<double>(value);
      if (type == format::EventId::attribute_bool) event.value = load<uint8_t>(value) != 0;
      if (type == format::EventId::attribute_string) event.text = text_after(sizeof prefix);
      break;
    }
    case format::EventId::span_status: {
      const auto payload = load<format::SpanStatusPrefix>(raw.payload);
      event.span_site = payload.span_site;
      event.status = payload.status == 0 ? format::SpanStatus::ok : format::SpanStatus::error;
      event.text = text_after(sizeof payload);
      break;
    }
    case format::EventId::cpu_switch: {
      const auto payload = load<format::CpuSwitchPayload>(raw.payload);
      event.sampled_pid = payload.pid;
      event.sampled_tid = payload.tid;
      event.cpu_state = static_cast<format::CpuState>(payload.state);
      break;
    }
    default:
      break;
  }
  return true;
}

}  // namespace chronicle::reader
