#include "merge/message_pairs.hpp"

#include <unordered_map>

#include "reader/messages.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::merge {

std::vector<MessagePair> find_message_pairs(const std::vector<reader::Trace>& traces) {
  struct Seen {
    size_t trace = 0;
    int64_t unix_ns = 0;
  };
  std::unordered_map<reader::MessageKey, Seen, reader::MessageKeyHash> sends;
  std::vector<std::pair<reader::MessageKey, Seen>> receives;
  for (size_t index = 0; index < traces.size(); ++index) {
    const reader::Trace& trace = traces[index];
    reader::for_each_message_end(trace, [&](const reader::MessageEnd& end) {
      const Seen seen{index, trace.to_unix_ns(end.ticks)};
      if (end.send)
        sends.emplace(end.key, seen);
      else
        receives.emplace_back(end.key, seen);
    });
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
