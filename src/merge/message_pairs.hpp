// The messages one traced process sent and another received: what clock alignment across hosts
// learns from (a receive never precedes its send).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chronicle::reader {
class Trace;
}

namespace chronicle::merge {

// One message seen at both ends: sent by traces[sender] and received by traces[receiver] (indices
// into the vector given to find_message_pairs). Times are each trace's own Unix nanoseconds
// (Trace::to_unix_ns of the event's ticks), as its recorded wall-clock reference places them.
struct MessagePair {
  size_t sender = 0;
  int64_t send_ns = 0;
  size_t receiver = 0;
  int64_t receive_ns = 0;
};

// Every message sent in one of `traces` and received in another, matched by what both ends
// recorded of it (the trace id and the sender's span id).
std::vector<MessagePair> find_message_pairs(const std::vector<reader::Trace>& traces);

}  // namespace chronicle::merge
