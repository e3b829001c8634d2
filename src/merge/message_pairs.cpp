#include "merge/message_pairs.hpp"

#include "reader/trace_reader.hpp"

namespace chronicle::merge {

std::vector<MessagePair> find_message_pairs(const std::vector<reader::Trace>& traces) {
  // PLACEHOLDER (agreed): the send and receive events (trace id + span id put on the wire, trace id
  // + the sender's span id received) are being added to the recorder and the reader in another
  // branch. Until they exist no trace holds a pair, so merge aligns clocks by the wall-clock
  // references alone and says so. The alignment itself takes pairs (clock_alignment.hpp) and is
  // tested with them.
  (void)traces;
  return {};
}

}  // namespace chronicle::merge
