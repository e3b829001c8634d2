#include "reader/messages.hpp"

#include <unordered_map>

namespace chronicle::reader {

std::vector<MessageEnds> match_messages(const std::vector<Trace>& traces) {
  struct Seen {
    size_t trace = 0;
    size_t stream = 0;
    uint64_t ticks = 0;
  };
  std::unordered_map<MessageKey, Seen, MessageKeyHash> sends;
  std::vector<std::pair<MessageKey, Seen>> receives;
  for (size_t index = 0; index < traces.size(); ++index) {
    const Trace& trace = traces[index];
    for (size_t stream = 0; stream < trace.streams().size(); ++stream) {
      trace.for_each_in_stream_packets_holding(stream, kMessageEventTypes, [&](const Event& event) {
        MessageEnd end;
        if (!message_end_of(event, end)) return true;
        const Seen here{index, stream, end.ticks};
        if (end.send)
          sends.emplace(end.key, here);
        else
          receives.emplace_back(end.key, here);
        return true;
      });
    }
  }
  std::vector<MessageEnds> messages;
  for (const auto& [key, receive] : receives) {
    const auto send = sends.find(key);
    if (send == sends.end() || send->second.trace == receive.trace) continue;
    const Seen& sent = send->second;
    messages.push_back({sent.trace, sent.stream, sent.ticks, receive.trace, receive.stream, receive.ticks});
  }
  return messages;
}

}  // namespace chronicle::reader
