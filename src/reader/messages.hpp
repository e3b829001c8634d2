// The messages one traced process sent and another received, found by what both ends recorded
// of them: a send and the receive that continues it carry the same trace id, and the receive's
// parent is the send's span (the traceparent's parent-id). `chronicle merge` aligns clocks with
// them and the viewer draws them: both match by this one rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chronicle::reader {

class Trace;

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
