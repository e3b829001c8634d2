// Walks the events of one packet: headers, full timestamps, payload bounds. Shared by the
// collector (which counts events as it copies) and the reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "format/catalogue.hpp"
#include "format/event_header.hpp"

namespace chronicle::format {

// Malformed data: `offset` is the byte offset within the packet where decoding failed.
class DecodeError : public std::runtime_error {
 public:
  DecodeError(size_t offset, const std::string& reason) : std::runtime_error(reason), offset_(offset) {}
  size_t offset() const { return offset_; }

 private:
  size_t offset_;
};

struct RawEvent {
  const EventSpec* spec = nullptr;
  uint64_t ticks = 0;
  const uint8_t* payload = nullptr;
  size_t payload_size = 0;
  size_t offset = 0;  // of the event header, in the packet
};

class PacketDecoder {
 public:
  // `packet` holds at least `content_bytes` bytes starting with the packet header.
  PacketDecoder(const uint8_t* packet, size_t content_bytes);

  // The next event, or false at the end of the content. Throws DecodeError. Inline for the common
  // event (a compact header, a payload of fixed size that fits): it runs once per event of every
  // tool that reads a trace, and a call was a fifth of its cost.
  bool next(RawEvent& event) {
    if (cursor_ < content_bytes_) [[likely]] {
      const uint8_t* data = packet_ + cursor_;
      const size_t left = content_bytes_ - cursor_;
      EventHeader header;
      if (read_event_header(data, left, ticks_, header) == EventHeaderStatus::ok && !header.extended) [[likely]] {
        const EventSpec* spec = lookup_event(*table_, stream_id_, header.id);
        if (spec && spec->fixed_payload_size >= 0 &&
            static_cast<size_t>(spec->fixed_payload_size) <= left - header.size) [[likely]] {
          give(event, header, spec, static_cast<size_t>(spec->fixed_payload_size));
          return true;
        }
      }
    }
    return next_in_full(event);
  }
  // Goes on from the event at `offset`, whose time is `ticks` (RawEvent::offset and ticks of an
  // event this packet gave): the next next() gives that event again.
  void resume_at(size_t offset, uint64_t ticks) {
    cursor_ = offset;
    ticks_ = ticks;
  }
  // Of the event next() gave last: where it starts in the packet, and its time.
  size_t last_offset() const { return last_offset_; }
  uint64_t last_ticks() const { return ticks_; }

  const PacketHeader& header() const { return *reinterpret_cast<const PacketHeader*>(packet_); }

 private:
  // next() for every event, with every check and error.
  bool next_in_full(RawEvent& event);
  // Gives the event at the cursor (its header read, its payload `size` bytes) and moves past it.
  void give(RawEvent& event, const EventHeader& header, const EventSpec* spec, size_t size) {
    ticks_ = header.ticks;
    event.spec = spec;
    event.ticks = ticks_;
    event.payload = packet_ + cursor_ + header.size;
    event.payload_size = size;
    event.offset = last_offset_ = cursor_;
    cursor_ += header.size + size;
  }

  const uint8_t* packet_;
  size_t content_bytes_;
  size_t cursor_;
  size_t last_offset_ = 0;
  uint32_t stream_id_;
  uint64_t ticks_;
  const EventTable* table_;
};

// Checks a packet header against the bytes available; returns an empty string when sound,
// otherwise what is wrong.
std::string check_packet_header(const uint8_t* packet, size_t available);

uint64_t content_bytes(const PacketHeader& header);

// The size in bytes of the packet at `packet` if its header frames it (whole, with the right
// magic, and a packet size that is a multiple of the alignment, holds a header and fits in
// `available`), else nullopt: then where the next packet starts cannot be known.
std::optional<uint64_t> framed_packet_size(const uint8_t* packet, size_t available);

// The number of events in a packet's content, walking only their sizes (no timestamps): what
// the collector needs to count as it copies. A compound event counts as the events it stands
// for. Returns nullopt if the content does not walk to its exact end (damage).
std::optional<uint64_t> count_events(const uint8_t* packet, size_t content_bytes);

// True when PacketDecoder::next would decode every event of the packet to the end of its content
// without throwing: the same checks (header cut short, time going backwards, unknown id, payload
// past the content), without building the events, so that checking a whole trace costs less than
// reading it. Adds event_type_bit of each event's id to `event_types` (and of the events a
// compound one stands for). The reason for a false is the decoder's to give.
bool events_decode(const uint8_t* packet, size_t content_bytes, uint32_t& event_types);

}  // namespace chronicle::format
