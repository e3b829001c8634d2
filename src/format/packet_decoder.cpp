#include "format/packet_decoder.hpp"

#include "format/event_header.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace chronicle::format {

uint64_t content_bytes(const PacketHeader& header) {
  return header.content_size_bits.load(std::memory_order_acquire) / 8;
}

std::string check_packet_header(const uint8_t* packet, size_t available) {
  if (reinterpret_cast<uintptr_t>(packet) % alignof(PacketHeader) != 0) return "packet header is not 8-byte aligned";
  if (available < kPacketHeaderSize)
    return fmt::format("packet header cut short ({} of {} bytes)", available, kPacketHeaderSize);
  const auto& header = *reinterpret_cast<const PacketHeader*>(packet);
  if (header.magic != kPacketMagic)
    return fmt::format("bad packet magic 0x{:08x} (expected 0x{:08x})", header.magic, kPacketMagic);
  if (header.stream_id != kStreamThread && header.stream_id != kStreamStrings)
    return fmt::format("unknown stream id {}", header.stream_id);
  const uint64_t content_bits = header.content_size_bits.load(std::memory_order_relaxed);
  const uint64_t packet_bits = header.packet_size_bits;
  if (content_bits % 8 != 0 || packet_bits % (kPacketAlignment * 8) != 0)
    return fmt::format(
        "packet sizes are not whole bytes, or the packet not a multiple of {} bytes (content {} bits, "
        "packet {} bits)",
        kPacketAlignment, content_bits, packet_bits);
  if (content_bits < kPacketHeaderSize * 8 || content_bits > packet_bits)
    return fmt::format("content size {} bits is outside [{}, packet size {}]", content_bits, kPacketHeaderSize * 8,
                       packet_bits);
  if (packet_bits / 8 > available)
    return fmt::format("packet size {} bytes runs past the end of the data ({} bytes left)", packet_bits / 8,
                       available);
  if (header.timestamp_end.load(std::memory_order_relaxed) < header.timestamp_begin)
    return "packet ends before it begins (timestamp_end < timestamp_begin)";
  return {};
}

std::optional<uint64_t> framed_packet_size(const uint8_t* packet, size_t available) {
  if (reinterpret_cast<uintptr_t>(packet) % alignof(PacketHeader) != 0 || available < kPacketHeaderSize)
    return std::nullopt;
  const auto& header = *reinterpret_cast<const PacketHeader*>(packet);
  const uint64_t bytes = header.packet_size_bits / 8;
  if (header.magic != kPacketMagic || header.packet_size_bits % (kPacketAlignment * 8) != 0 ||
      bytes < kPacketHeaderSize || bytes > available)
    return std::nullopt;
  return bytes;
}

std::optional<uint64_t> count_events(const uint8_t* packet, size_t content_bytes) {
  const uint32_t stream_id = reinterpret_cast<const PacketHeader*>(packet)->stream_id;
  const EventTable& table = event_table();
  uint64_t events = 0;
  size_t cursor = kPacketHeaderSize;
  while (cursor < content_bytes) {
    const uint8_t* data = packet + cursor;
    const size_t left = content_bytes - cursor;
    // Sizes only: from a previous time of 0 no time goes backwards, and the times, unused, are
    // not even computed once this is inlined.
    EventHeader event;
    if (read_event_header(data, left, 0, event) != EventHeaderStatus::ok) return std::nullopt;
    const size_t header_size = event.size;
    const EventSpec* spec = lookup_event(table, stream_id, event.id);
    if (!spec) return std::nullopt;
    size_t size;
    if (spec->fixed_payload_size >= 0) {
      size = static_cast<size_t>(spec->fixed_payload_size);
    } else {
      auto variable = payload_size(*spec, data + header_size, left - header_size);
      if (!variable) return std::nullopt;
      size = *variable;
    }
    if (header_size + size > left) return std::nullopt;
    cursor += header_size + size;
    events += events_of(*spec);
  }
  return events;
}

namespace {

// Per stream and compact id: the bytes of a whole event with a compact header and a fixed
// payload, or 0 (an extended header, a string in the payload, no such event). One load instead
// of a walk to the spec: a packet's events are a chain, each one's size says where the next is.
struct CompactEventBytes {
  uint8_t by_id[2][1u << kCompactIdBits] = {};
  // For an event whose only string is its last field: the fixed bytes before it, else kNoText.
  uint8_t text_after[2][1u << kCompactIdBits] = {};
};
constexpr uint8_t kNoText = 0xff;

// Where the NUL ending a string at `text` is, within `available` bytes: eight bytes at a time
// while they are there (the strings of thread events are mostly short labels, and a call to
// memchr costs more than the scan), or nullptr when there is none.
const uint8_t* find_nul(const uint8_t* text, size_t available) {
  size_t at = 0;
  for (; at + 8 <= available; at += 8) {
    uint64_t word = 0;
    std::memcpy(&word, text + at, 8);
    const uint64_t zero_bytes = (word - 0x0101010101010101ULL) & ~word & 0x8080808080808080ULL;
    if (zero_bytes != 0) return text + at + __builtin_ctzll(zero_bytes) / 8;  // little-endian
  }
  for (; at < available; ++at)
    if (text[at] == 0) return text + at;
  return nullptr;
}

const CompactEventBytes& compact_event_bytes() {
  static const CompactEventBytes sizes = [] {
    CompactEventBytes built;
    std::memset(built.text_after, kNoText, sizeof built.text_after);
    for (uint32_t stream = 0; stream < 2; ++stream)
      for (uint32_t id = 0; id < kExtendedId; ++id) {
        const EventSpec* spec = lookup_event(event_table(), stream, id);
        if (!spec) continue;
        if (spec->fixed_payload_size >= 0) {
          built.by_id[stream][id] = static_cast<uint8_t>(kCompactHeaderSize + spec->fixed_payload_size);
          continue;
        }
        const auto& fields = spec->fields;
        const auto strings = std::count_if(fields.begin(), fields.end(),
                                           [](const FieldSpec& field) { return field.type == FieldType::string; });
        // The fixed part's size: what payload_size makes of it followed by an empty string.
        std::vector<uint8_t> zeros(64, 0);
        const auto prefix = payload_size(*spec, zeros.data(), zeros.size());
        if (strings == 1 && fields.back().type == FieldType::string && prefix && *prefix >= 1)
          built.text_after[stream][id] = static_cast<uint8_t>(*prefix - 1);
      }
    return built;
  }();
  return sizes;
}

// The payload size of an event that the table of compact sizes does not give (an extended
// header, a string in the payload), checked against the `available` bytes; nullopt when it does
// not fit or the id is unknown. Out of line: the loop's registers stay with the common case.
[[gnu::noinline]] std::optional<size_t> checked_payload_size(uint32_t stream_id, uint32_t id, const uint8_t* payload,
                                                             size_t available) {
  const EventSpec* spec = lookup_event(event_table(), stream_id, id);
  if (!spec) return std::nullopt;
  if (spec->fixed_payload_size >= 0) {
    const auto size = static_cast<size_t>(spec->fixed_payload_size);
    return size <= available ? std::optional(size) : std::nullopt;
  }
  const uint8_t* text_after = compact_event_bytes().text_after[stream_id];
  if (id < kExtendedId && text_after[id] != kNoText) {
    const size_t prefix = text_after[id];
    if (prefix > available) return std::nullopt;
    const uint8_t* nul = find_nul(payload + prefix, available - prefix);
    if (!nul) return std::nullopt;
    return static_cast<size_t>(nul - payload) + 1;
  }
  return payload_size(*spec, payload, available);
}

}  // namespace

namespace {

// A packet holding a compound event holds, for a reader, the events it stands for.
uint32_t with_compounds_expanded(uint32_t types) {
  static const auto compounds = [] {
    std::vector<std::pair<uint32_t, uint32_t>> bits;  // the compound's bit, what a reader reads of it
    for (const EventSpec& spec : catalogue())
      if (spec.stream_id == kStreamThread && !spec.stands_for.empty())
        bits.emplace_back(event_type_bit(spec.id), read_type_bits(spec));
    return bits;
  }();
  for (const auto& [compound, expanded] : compounds)
    if ((types & compound) != 0) types |= expanded;
  return types;
}

}  // namespace

bool events_decode(const uint8_t* packet, size_t content_bytes, uint32_t& event_types) {
  const uint32_t stream_id = reinterpret_cast<const PacketHeader*>(packet)->stream_id;
  // No stream but these two has events: the decoder fails at the first one.
  if (stream_id >= 2) return content_bytes <= kPacketHeaderSize;
  const uint8_t* compact_bytes = compact_event_bytes().by_id[stream_id];
  uint64_t ticks = reinterpret_cast<const PacketHeader*>(packet)->timestamp_begin;
  uint32_t types = 0;
  size_t cursor = kPacketHeaderSize;
  while (cursor < content_bytes) {
    const uint8_t* data = packet + cursor;
    const size_t left = content_bytes - cursor;
    // A compact header's time is followed too: it moves the time a later extended one is checked
    // against.
    EventHeader event;
    if (read_event_header(data, left, ticks, event) != EventHeaderStatus::ok) return false;
    ticks = event.ticks;
    types |= event_type_bit(event.id);
    if (!event.extended)
      if (const size_t bytes = compact_bytes[event.id]; bytes != 0 && bytes <= left) [[likely]] {
        cursor += bytes;
        continue;
      }
    const auto size = checked_payload_size(stream_id, event.id, data + event.size, left - event.size);
    if (!size) return false;
    cursor += event.size + *size;
  }
  event_types |= with_compounds_expanded(types);
  return true;
}

PacketDecoder::PacketDecoder(const uint8_t* packet, size_t content_bytes)
    : packet_(packet),
      content_bytes_(content_bytes),
      cursor_(kPacketHeaderSize),
      stream_id_(reinterpret_cast<const PacketHeader*>(packet)->stream_id),
      ticks_(reinterpret_cast<const PacketHeader*>(packet)->timestamp_begin),
      table_(&event_table()) {}

bool PacketDecoder::next_in_full(RawEvent& event) {
  if (cursor_ >= content_bytes_) return false;
  const size_t start = cursor_;
  const size_t left = content_bytes_ - cursor_;
  const uint8_t* data = packet_ + cursor_;
  EventHeader header;
  switch (read_event_header(data, left, ticks_, header)) {
    case EventHeaderStatus::ok:
      break;
    case EventHeaderStatus::cut_short:
      throw DecodeError(start, header.extended ? "extended event header cut short" : "compact event header cut short");
    case EventHeaderStatus::time_goes_backwards:
      throw DecodeError(start, fmt::format("event time goes backwards ({} < {})", header.ticks, ticks_));
  }
  ticks_ = header.ticks;
  const uint32_t id = header.id;
  const size_t header_size = header.size;
  const EventSpec* spec = lookup_event(*table_, stream_id_, id);
  if (!spec) throw DecodeError(start, fmt::format("unknown event id {} in stream {}", id, stream_id_));
  std::optional<size_t> size;
  if (spec->fixed_payload_size >= 0) [[likely]] {
    if (static_cast<size_t>(spec->fixed_payload_size) <= left - header_size) size = spec->fixed_payload_size;
  } else {
    size = payload_size(*spec, data + header_size, left - header_size);
  }
  if (!size) throw DecodeError(start, fmt::format("payload of {} event runs past the packet content", spec->name));
  give(event, header, spec, *size);
  return true;
}

}  // namespace chronicle::format
