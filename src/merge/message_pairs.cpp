#include "merge/message_pairs.hpp"

#include "reader/messages.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::merge {

std::vector<MessagePair> find_message_pairs(const std::vector<reader::Trace>& traces) {
  std::vector<MessagePair> pairs;
  for (const reader::MessageEnds& message : reader::match_messages(traces))
    pairs.push_back({message.sender, traces[message.sender].to_unix_ns(message.send_ticks), message.receiver,
                     traces[message.receiver].to_unix_ns(message.receive_ticks)});
  return pairs;
}

}  // namespace chronicle::merge
