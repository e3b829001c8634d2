// Reading an event header: the one decoder of the rule that write_event_header (layout.hpp)
// writes. Every walk over a packet's events goes through it: the reader's decoder and its check
// of a packet (packet_decoder.cpp), the collector's count, the .ctfz encoder. Inline and small, as
// it runs once per event of every tool that reads a trace.
#pragma once

#include "chronicle/detail/layout.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace chronicle::format {

struct EventHeader {
  uint32_t id = 0;
  uint64_t ticks = 0;  // the whole time: a compact header's is rebuilt from the previous event's
  size_t size = 0;     // kCompactHeaderSize or kExtendedHeaderSize
  bool extended = false;
};

enum class EventHeaderStatus : uint8_t { ok, cut_short, time_goes_backwards };

// The header at `data`, with `available` bytes left in the packet's content, of an event that
// follows one at `previous_ticks` (the packet's timestamp_begin for its first event). A compact
// header holds the time's low 27 bits and cannot go backwards: a lower value is one wrap of the
// field (the writer never lets two events be further apart). An extended header holds the whole
// time, which must not be earlier. `extended` is set even when the header is cut short.
[[gnu::always_inline]] inline EventHeaderStatus read_event_header(const uint8_t* data, size_t available,
                                                                  uint64_t previous_ticks, EventHeader& header) {
  header.id = data[0] & ((1u << kCompactIdBits) - 1);
  header.extended = header.id == kExtendedId;
  if (!header.extended) [[likely]] {
    if (available < kCompactHeaderSize) return EventHeaderStatus::cut_short;
    uint32_t word = 0;
    std::memcpy(&word, data, 4);
    const uint64_t low = word >> kCompactIdBits;
    header.ticks = (previous_ticks & ~kCompactTimestampMask) | low;
    if (low < (previous_ticks & kCompactTimestampMask)) header.ticks += kCompactTimestampMask + 1;
    header.size = kCompactHeaderSize;
    return EventHeaderStatus::ok;
  }
  if (available < kExtendedHeaderSize) return EventHeaderStatus::cut_short;
  std::memcpy(&header.id, data + 1, 4);
  std::memcpy(&header.ticks, data + 5, 8);
  header.size = kExtendedHeaderSize;
  return header.ticks < previous_ticks ? EventHeaderStatus::time_goes_backwards : EventHeaderStatus::ok;
}

}  // namespace chronicle::format
