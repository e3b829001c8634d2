// The two ends of a message between traced processes (chronicle/context.hpp): a send records the
// trace id and its own span id, which goes on the wire as the traceparent's parent-id; the
// receive that continues it records the same trace id and that span id as its parent. This key is
// how every tool (merge's clock alignment, the OTLP export, the viewer) joins them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "reader/trace_reader.hpp"

namespace chronicle::reader {

struct MessageKey {
  uint64_t trace_high = 0;
  uint64_t trace_low = 0;
  uint64_t send_span = 0;
  bool operator==(const MessageKey&) const = default;
};

struct MessageKeyHash {
  size_t operator()(const MessageKey& key) const {
    return static_cast<size_t>(key.send_span ^ (key.trace_low * 0x9e3779b97f4a7c15ULL) ^ (key.trace_high >> 7));
  }
};

struct MessageEnd {
  MessageKey key;
  bool send = false;  // else a receive
  uint64_t ticks = 0;
  uint32_t thread_id = 0;
};

// The message a send or receive event is an end of; false for other events and for a receive
// whose message carried no valid traceparent (it continues no send).
inline bool message_end_of(const Event& event, MessageEnd& end) {
  if (event.type == format::EventId::context_send) {
    end = {{event.trace_high, event.trace_low, event.context_span}, true, event.ticks, event.thread_id};
    return true;
  }
  if (event.type == format::EventId::context_receive && event.context_parent != 0) {
    end = {{event.trace_high, event.trace_low, event.context_parent}, false, event.ticks, event.thread_id};
    return true;
  }
  return false;
}

// The packets a message end can be in: those holding a send or a receive.
inline constexpr uint32_t kMessageEventTypes =
    format::event_type_bit(static_cast<uint32_t>(format::EventId::context_send)) |
    format::event_type_bit(static_cast<uint32_t>(format::EventId::context_receive));

// Every message end in `trace`, stream by stream (not in time order).
template <typename Visitor>
void for_each_message_end(const Trace& trace, Visitor&& visit) {
  for (size_t stream = 0; stream < trace.streams().size(); ++stream) {
    trace.for_each_in_stream_packets_holding(stream, kMessageEventTypes, [&](const Event& event) {
      MessageEnd end;
      if (message_end_of(event, end)) visit(end);
      return true;
    });
  }
}

// One message seen at both ends, each by its trace (an index into the vector given to
// match_messages), stream and ticks on that trace's clock.
struct MessageEnds {
  size_t sender = 0;
  size_t send_stream = 0;
  uint64_t send_ticks = 0;
  size_t receiver = 0;
  size_t receive_stream = 0;
  uint64_t receive_ticks = 0;
};

// Every message sent in one of `traces` and received in another, in the order of the receives
// (trace after trace, stream after stream). A receive that carried no parent (from an untraced
// sender) or whose send is not in the traces is left out.
std::vector<MessageEnds> match_messages(const std::vector<Trace>& traces);

}  // namespace chronicle::reader
