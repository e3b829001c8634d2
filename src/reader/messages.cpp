#include "reader/messages.hpp"

#include <unordered_map>

#include "reader/trace_reader.hpp"

namespace chronicle::reader {
namespace {

// A message is named by what both ends record of it: the trace id and the send's span id.
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

struct SeenEnd {
  size_t trace = 0;
  size_t stream = 0;
  uint64_t ticks = 0;
};

}  // namespace

std::vector<MessageEnds> match_messages(const std::vector<Trace>& traces) {
  std::unordered_map<MessageKey, SeenEnd, MessageKeyHash> sends;
  std::vector<std::pair<MessageKey, SeenEnd>> receives;
  for (size_t index = 0; index < traces.size(); ++index) {
    const Trace& trace = traces[index];
    for (size_t stream = 0; stream < trace.streams().size(); ++stream) {
      trace.for_each_in_stream(stream, [&](const Event& event) {
        const SeenEnd here{index, stream, event.ticks};
        if (event.type == format::EventId::context_send)
          sends.emplace(MessageKey{event.trace_high, event.trace_low, event.context_span}, here);
        else if (event.type == format::EventId::context_receive && event.context_parent != 0)
          receives.push_back({MessageKey{event.trace_high, event.trace_low, event.context_parent}, here});
        return true;
      });
    }
  }
  std::vector<MessageEnds> messages;
  for (const auto& [key, receive] : receives) {
    const auto send = sends.find(key);
    if (send == sends.end() || send->second.trace == receive.trace) continue;
    const SeenEnd& sent = send->second;
    messages.push_back({sent.trace, sent.stream, sent.ticks, receive.trace, receive.stream, receive.ticks});
  }
  return messages;
}

}  // namespace chronicle::reader
