#include "merge/message_pairs.hpp"

#include <unordered_map>

#include "reader/trace_reader.hpp"

namespace chronicle::merge {

namespace {

// A message is named by what both ends record of it: the trace id and the send's span id (the
// traceparent's parent-id, which the receive records as its parent).
struct MessageKey {
  uint64_t trace_high = 0;
  uint64_t trace_low = 0;
  uint64_t span = 0;
  bool operator==(const MessageKey&) const = default;
};

struct MessageKeyHash {
  size_t operator()(const MessageKey& key) const {
    return static_cast<size_t>(key.span ^ (key.trace_low * 0x9e3779b97f4a7c15ULL) ^ (key.trace_high >> 7));
  }
};

struct MessageEnd {
  size_t trace = 0;
  int64_t unix_ns = 0;
};

}  // namespace

std::vector<MessagePair> find_message_pairs(const std::vector<reader::Trace>& traces) {
  std::unordered_map<MessageKey, MessageEnd, MessageKeyHash> sends;
  std::vector<std::pair<MessageKey, MessageEnd>> receives;
  for (size_t index = 0; index < traces.size(); ++index) {
    const reader::Trace& trace = traces[index];
    for (size_t stream = 0; stream < trace.streams().size(); ++stream) {
      trace.for_each_in_stream(stream, [&](const reader::Event& event) {
        if (event.type == format::EventId::context_send) {
          sends.emplace(MessageKey{event.trace_high, event.trace_low, event.context_span},
                        MessageEnd{index, trace.to_unix_ns(event.ticks)});
        } else if (event.type == format::EventId::context_receive && event.context_parent != 0) {
          receives.push_back({MessageKey{event.trace_high, event.trace_low, event.context_parent},
                              MessageEnd{index, trace.to_unix_ns(event.ticks)}});
        }
        return true;
      });
    }
  }
  std::vector<MessagePair> pairs;
  for (const auto& [key, receive] : receives) {
    const auto send = sends.find(key);
    if (send == sends.end() || send->second.trace == receive.trace) continue;
    pairs.push_back({send->second.trace, send->second.unix_ns, receive.trace, receive.unix_ns});
  }
  return pairs;
}

}  // namespace chronicle::merge
