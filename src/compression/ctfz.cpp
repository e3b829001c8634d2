// One file on purpose (~730 lines): the .ctfz codec is one transform read in both directions —
// the column layout the encoder writes is the one the decoder reads back, side by side here, so
// that a change to one is seen against the other.
#include "compression/ctfz.hpp"

#include <zstd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "format/catalogue.hpp"
#include "format/event_header.hpp"
#include "format/packet_decoder.hpp"

namespace chronicle::compression {

using format::FieldType;
using format::PacketHeader;

bool has_compressed_name(std::string_view file_name) {
  return file_name.size() > kSuffix.size() && file_name.ends_with(kSuffix);
}

std::string plain_name(std::string_view file_name) {
  if (has_compressed_name(file_name)) file_name.remove_suffix(kSuffix.size());
  return std::string(file_name);
}

namespace {

// zstd's skippable frames: 0x184D2A50..5F, then a u32 size (RFC 8878, 3.1.2).
constexpr uint32_t kSkippableMagic = 0x184D2A5C;
constexpr size_t kSkippableHeader = 8;
constexpr size_t kEntrySize = 48;

// The columns of a unit. Every (event type, field) has its own, numbered from the catalogue:
// nothing is written per event type by hand, and a new event needs no new code here.
constexpr size_t kRawPackets = 0;  // per packet: 0 transformed, 1 kept verbatim
constexpr size_t kHeaders = 1;     // per packet: its 88-byte header, as it is
constexpr size_t kVerbatim = 2;    // packets kept verbatim (after the header); every packet's padding
constexpr size_t kKinds = 3;       // per event: its compact id, or 31 for an extended header
constexpr size_t kExtendedIds = 4;
constexpr size_t kTimes = 5;  // per event: varint of the ticks since the previous event's
constexpr size_t kFirstField = 6;
constexpr size_t kFieldsPerEvent = 8;

size_t column_count() {
  return kFirstField + format::catalogue().size() * kFieldsPerEvent;
}

size_t field_column(const format::EventSpec* spec, size_t field) {
  static const format::EventSpec* const first = format::catalogue().data();
  if (field >= kFieldsPerEvent) throw std::logic_error("an event with more fields than the transform has columns for");
  return kFirstField + static_cast<size_t>(spec - first) * kFieldsPerEvent + field;
}

inline void put_varint(std::vector<uint8_t>& out, uint64_t value) {
  if (value < 0x80) [[likely]] {
    out.push_back(static_cast<uint8_t>(value));
    return;
  }
  while (value >= 0x80) {
    out.push_back(static_cast<uint8_t>(value | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<uint8_t>(value));
}
// Writes `value` as a varint at `at` (room for 10 bytes), returns the byte after it.
inline uint8_t* write_varint(uint8_t* at, uint64_t value) {
  while (value >= 0x80) {
    *at++ = static_cast<uint8_t>(value | 0x80);
    value >>= 7;
  }
  *at++ = static_cast<uint8_t>(value);
  return at;
}
uint64_t zigzag(int64_t value) {
  return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
}
int64_t unzigzag(uint64_t value) {
  return static_cast<int64_t>(value >> 1) ^ -static_cast<int64_t>(value & 1);
}

template <typename T>
T load(const uint8_t* data) {
  T value;
  std::memcpy(&value, data, sizeof value);
  return value;
}
// (Not vector::insert of the value's bytes: GCC 12 at -O3 reports a false -Warray-bounds and
// -Wstringop-overflow inside it, which -Werror turns into a failed Release build.)
template <typename T>
void put(std::vector<uint8_t>& out, T value) {
  const size_t at = out.size();
  out.resize(at + sizeof value);
  std::memcpy(out.data() + at, &value, sizeof value);
}

// A column being encoded, written through a cursor: `room(n)` makes n bytes writable at `end()`.
// Its buffer only grows, and is kept from unit to unit.
struct Column {
  std::vector<uint8_t> bytes;  // as large as it ever had to be; the first `used` hold the column
  size_t used = 0;

  uint8_t* room(size_t n) {
    if (bytes.size() - used < n) bytes.resize(std::max(2 * bytes.size(), used + n));
    return bytes.data() + used;
  }
  void push(uint8_t byte) {
    *room(1) = byte;
    ++used;
  }
  void append(const uint8_t* data, size_t n) {
    if (n == 0) return;
    std::memcpy(room(n), data, n);
    used += n;
  }
  void varint(uint64_t value) { used = static_cast<size_t>(write_varint(room(10), value) - bytes.data()); }
  void set_end(const uint8_t* end) { used = static_cast<size_t>(end - bytes.data()); }
};

// Reads one column; every read is bounded by it.
struct ColumnReader {
  const uint8_t* at = nullptr;
  const uint8_t* end = nullptr;
  void need(size_t n) const {
    if (static_cast<size_t>(end - at) < n) throw UnitError("a column ends early");
  }
  uint8_t byte() {
    need(1);
    return *at++;
  }
  void bytes(uint8_t* into, size_t n) {
    need(n);
    std::memcpy(into, at, n);
    at += n;
  }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t b = byte();
      value |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return value;
    }
    throw UnitError("a varint longer than 64 bits");
  }
};

// Packets into columns and back. Integers are coded as zigzag varints of the difference from the
// previous value of their column; times as varints of the ticks since the previous event.
class Transform {
 public:
  Transform() : columns_(column_count()), previous_(column_count(), 0), first_spec_(format::catalogue().data()) {
    for (const auto& spec : format::catalogue())
      if (spec.fields.size() > kFieldsPerEvent)
        throw std::logic_error("an event with more fields than the transform has columns for");
  }

  // The transformed unit into `out`: the packet count, each column's size, the columns.
  void encode(std::span<const uint8_t> raw, std::vector<uint8_t>& out) {
    for (auto& column : columns_) column.used = 0;
    std::fill(previous_.begin(), previous_.end(), 0);
    uint32_t packets = 0;
    size_t offset = 0;
    while (offset < raw.size()) {
      const uint64_t size = packet_size_at(raw, offset);
      encode_packet(raw.data() + offset, size);
      offset += size;
      ++packets;
    }
    out.clear();
    put<uint32_t>(out, packets);
    size_t total = 0;
    for (const auto& column : columns_) {
      put_varint(out, column.used);
      total += column.used;
    }
    out.reserve(out.size() + total);
    for (const auto& column : columns_) out.insert(out.end(), column.bytes.begin(), column.bytes.begin() + column.used);
  }

  // Rebuilds the unit into `out` (raw_size bytes).
  void decode(std::span<const uint8_t> transformed, uint8_t* out, size_t raw_size) {
    std::fill(previous_.begin(), previous_.end(), 0);  // each unit decodes alone
    ColumnReader directory{transformed.data(), transformed.data() + transformed.size()};
    uint32_t packets = 0;
    directory.bytes(reinterpret_cast<uint8_t*>(&packets), sizeof packets);
    std::vector<uint64_t> sizes(columns_.size());
    for (auto& size : sizes) size = directory.varint();
    readers_.assign(columns_.size(), {});
    const uint8_t* at = directory.at;
    for (size_t c = 0; c < sizes.size(); ++c) {
      if (sizes[c] > static_cast<size_t>(directory.end - at)) throw UnitError("a column runs past the unit");
      readers_[c] = {at, at + sizes[c]};
      at += sizes[c];
    }
    out_ = out;
    out_size_ = 0;
    out_capacity_ = raw_size;
    for (uint32_t i = 0; i < packets; ++i) decode_packet();
    if (out_size_ != raw_size) throw UnitError("the unit decodes to another size than its entry says");
    for (const auto& reader : readers_)
      if (reader.at != reader.end) throw UnitError("a column is longer than its events");
  }

 private:
  static uint64_t packet_size_at(std::span<const uint8_t> raw, size_t offset) {
    if (raw.size() - offset < format::kPacketHeaderSize) throw std::logic_error("a unit ends inside a packet header");
    const uint64_t size = load<uint64_t>(raw.data() + offset + offsetof(PacketHeader, packet_size_bits)) / 8;
    if (size < format::kPacketHeaderSize || size > raw.size() - offset)
      throw std::logic_error("a unit's packet is not framed by its packet_size");
    return size;
  }

  void put_integer(size_t column, uint64_t value) {
    columns_[column].varint(zigzag(static_cast<int64_t>(value - previous_[column])));
    previous_[column] = value;
  }
  uint64_t get_integer(size_t column, size_t width) {
    uint64_t value = previous_[column] + static_cast<uint64_t>(unzigzag(readers_[column].varint()));
    if (width < 8) value &= (uint64_t{1} << (width * 8)) - 1;
    previous_[column] = value;
    return value;
  }

  void encode_packet(const uint8_t* packet, size_t size) {
    columns_[kHeaders].append(packet, format::kPacketHeaderSize);
    sizes_.resize(columns_.size());
    for (size_t c = 0; c < columns_.size(); ++c) sizes_[c] = columns_[c].used;
    saved_previous_ = previous_;
    size_t content = 0;
    if (encode_events(packet, size, content)) {
      columns_[kRawPackets].push(0);
      columns_[kVerbatim].append(packet + content, size - content);
      return;
    }
    // Not what the decoder accepts: the packet goes verbatim, and the columns as they were.
    for (size_t c = 0; c < columns_.size(); ++c) columns_[c].used = sizes_[c];
    previous_ = saved_previous_;
    columns_[kRawPackets].push(1);
    columns_[kVerbatim].append(packet + format::kPacketHeaderSize, size - format::kPacketHeaderSize);
  }

  // The events of a sound packet into the columns; false when the packet is not one.
  bool encode_events(const uint8_t* packet, size_t size, size_t& content) {
    if (!format::check_packet_header(packet, size).empty()) return false;
    const auto& header = *reinterpret_cast<const PacketHeader*>(packet);
    if (header.packet_size_bits / 8 != size) return false;
    content = format::content_bytes(header);
    const auto& table = format::event_table();
    uint64_t ticks = header.timestamp_begin;
    size_t cursor = format::kPacketHeaderSize;
    // Every event takes at least a compact header: the kinds and times columns get their room
    // for the whole packet once, and are written through cursors.
    const size_t most_events = (content - cursor) / format::kCompactHeaderSize;
    uint8_t* kinds = columns_[kKinds].room(most_events);
    uint8_t* times = columns_[kTimes].room(most_events * 10);
    while (cursor < content) {
      const uint8_t* data = packet + cursor;
      const size_t left = content - cursor;
      format::EventHeader event;
      if (format::read_event_header(data, left, ticks, event) != format::EventHeaderStatus::ok) return false;
      // Other bits in an extended header's first byte would not come back: such a packet goes verbatim.
      if (event.extended && data[0] != format::kExtendedId) return false;
      const format::EventSpec* spec = format::lookup_event(table, header.stream_id, event.id);
      if (!spec) return false;
      *kinds++ = static_cast<uint8_t>(event.extended ? format::kExtendedId : event.id);
      if (event.extended) columns_[kExtendedIds].append(data + 1, sizeof(uint32_t));
      times = write_varint(times, event.ticks - ticks);
      ticks = event.ticks;
      const uint8_t* field = data + event.size;
      if (!encode_fields(*spec, field, packet + content)) return false;
      cursor = static_cast<size_t>(field - packet);
    }
    columns_[kKinds].set_end(kinds);
    columns_[kTimes].set_end(times);
    return cursor == content;
  }

  // The common case, a payload of fixed size (no string, no sequence): its room was checked once.
  void encode_fixed_fields(const format::EventSpec& spec, size_t first_column, const uint8_t*& at) {
    for (size_t f = 0; f < spec.fields.size(); ++f) {
      const size_t column = first_column + f;
      switch (spec.fields[f].type) {
        case FieldType::u8:
          columns_[column].push(*at++);
          break;
        case FieldType::u32:
          put_integer(column, load<uint32_t>(at));
          at += 4;
          break;
        case FieldType::f64:
          columns_[column].append(at, 8);
          at += 8;
          break;
        default:  // u64, s64: a string or a sequence makes the payload's size variable
          put_integer(column, load<uint64_t>(at));
          at += 8;
          break;
      }
    }
  }

  bool encode_fields(const format::EventSpec& spec, const uint8_t*& at, const uint8_t* end) {
    const size_t first_column = kFirstField + static_cast<size_t>(&spec - first_spec_) * kFieldsPerEvent;
    if (spec.fixed_payload_size >= 0) {
      if (static_cast<size_t>(end - at) < static_cast<size_t>(spec.fixed_payload_size)) return false;
      encode_fixed_fields(spec, first_column, at);
      return true;
    }
    uint32_t last_u32 = 0;
    for (size_t f = 0; f < spec.fields.size(); ++f) {
      const size_t column = first_column + f;
      const FieldType type = spec.fields[f].type;
      if (static_cast<size_t>(end - at) < format::field_size(type)) return false;
      switch (type) {
        case FieldType::u8:
          columns_[column].push(*at++);
          break;
        case FieldType::u32:
          last_u32 = load<uint32_t>(at);
          put_integer(column, last_u32);
          at += 4;
          break;
        case FieldType::u64:
        case FieldType::s64:
          put_integer(column, load<uint64_t>(at));
          at += 8;
          break;
        case FieldType::f64:
          columns_[column].append(at, 8);
          at += 8;
          break;
        case FieldType::string: {
          const void* nul = std::memchr(at, 0, static_cast<size_t>(end - at));
          if (!nul) return false;
          const auto* after = static_cast<const uint8_t*>(nul) + 1;
          columns_[column].append(at, static_cast<size_t>(after - at));
          at = after;
          break;
        }
        case FieldType::u64_sequence:
          if (last_u32 > static_cast<size_t>(end - at) / 8) return false;
          for (uint32_t i = 0; i < last_u32; ++i, at += 8) put_integer(column, load<uint64_t>(at));
          break;
      }
    }
    return true;
  }

  uint8_t* take(size_t n) {
    if (out_capacity_ - out_size_ < n) throw UnitError("the unit decodes past its size");
    uint8_t* at = out_ + out_size_;
    out_size_ += n;
    return at;
  }

  void decode_packet() {
    const size_t start = out_size_;
    readers_[kHeaders].bytes(take(format::kPacketHeaderSize), format::kPacketHeaderSize);
    const uint8_t* header = out_ + start;
    const auto stream_id = load<uint32_t>(header + offsetof(PacketHeader, stream_id));
    const uint64_t size = load<uint64_t>(header + offsetof(PacketHeader, packet_size_bits)) / 8;
    const uint64_t content = load<uint64_t>(header + offsetof(PacketHeader, content_size_bits)) / 8;
    if (size < format::kPacketHeaderSize || content > size ||
        size - format::kPacketHeaderSize > out_capacity_ - out_size_)
      throw UnitError("a packet header with impossible sizes");
    if (readers_[kRawPackets].byte() != 0) {
      readers_[kVerbatim].bytes(take(size - format::kPacketHeaderSize), size - format::kPacketHeaderSize);
      return;
    }
    if (content < format::kPacketHeaderSize) throw UnitError("a packet header with impossible sizes");
    take(size - format::kPacketHeaderSize);
    uint8_t* packet = out_ + start;
    size_t cursor = format::kPacketHeaderSize;
    uint64_t ticks = load<uint64_t>(header + offsetof(PacketHeader, timestamp_begin));
    const auto& table = format::event_table();
    while (cursor < content) {
      const uint8_t kind = readers_[kKinds].byte();
      const bool extended = kind == format::kExtendedId;
      uint32_t id = kind;
      if (extended) readers_[kExtendedIds].bytes(reinterpret_cast<uint8_t*>(&id), sizeof id);
      ticks += readers_[kTimes].varint();
      if (cursor + (extended ? format::kExtendedHeaderSize : format::kCompactHeaderSize) > size)
        throw UnitError("an event past its packet");
      uint8_t* at = format::write_event_header(packet + cursor, !extended, id, ticks);
      const format::EventSpec* spec = format::lookup_event(table, stream_id, id);
      if (!spec) throw UnitError(fmt::format("event id {} is not in the catalogue", id));
      decode_fields(*spec, packet, size, at);
      cursor = static_cast<size_t>(at - packet);
    }
    if (cursor != content) throw UnitError("a packet's events do not end at its content size");
    readers_[kVerbatim].bytes(packet + content, size - content);
  }

  void decode_fields(const format::EventSpec& spec, uint8_t* packet, uint64_t size, uint8_t*& at) {
    const auto room = [&](size_t n) {
      if (static_cast<size_t>(at - packet) + n > size) throw UnitError("a payload past its packet");
    };
    uint32_t last_u32 = 0;
    for (size_t f = 0; f < spec.fields.size(); ++f) {
      const size_t column = field_column(&spec, f);
      ColumnReader& reader = readers_[column];
      switch (spec.fields[f].type) {
        case FieldType::u8:
          room(1);
          *at++ = reader.byte();
          break;
        case FieldType::u32:
          room(4);
          last_u32 = static_cast<uint32_t>(get_integer(column, 4));
          std::memcpy(at, &last_u32, 4);
          at += 4;
          break;
        case FieldType::u64:
        case FieldType::s64: {
          room(8);
          const uint64_t value = get_integer(column, 8);
          std::memcpy(at, &value, 8);
          at += 8;
          break;
        }
        case FieldType::f64:
          room(8);
          reader.bytes(at, 8);
          at += 8;
          break;
        case FieldType::string: {
          const void* nul = std::memchr(reader.at, 0, static_cast<size_t>(reader.end - reader.at));
          if (!nul) throw UnitError("a string without its NUL");
          const size_t n = static_cast<size_t>(static_cast<const uint8_t*>(nul) - reader.at) + 1;
          room(n);
          reader.bytes(at, n);
          at += n;
          break;
        }
        case FieldType::u64_sequence:
          room(size_t{last_u32} * 8);
          for (uint32_t i = 0; i < last_u32; ++i, at += 8) {
            const uint64_t value = get_integer(column, 8);
            std::memcpy(at, &value, 8);
          }
          break;
      }
    }
  }

  std::vector<Column> columns_;  // encoding; decoding only takes their count
  std::vector<uint64_t> previous_;
  std::vector<size_t> sizes_;             // encode_packet: the columns before the packet
  std::vector<uint64_t> saved_previous_;  // and their previous values
  std::vector<ColumnReader> readers_;
  const format::EventSpec* first_spec_;  // the catalogue's first: a spec's index numbers its columns
  uint8_t* out_ = nullptr;
  size_t out_size_ = 0;
  size_t out_capacity_ = 0;
};

void put_entry(const UnitEntry& entry, std::vector<uint8_t>& out) {
  put<uint32_t>(out, kSkippableMagic);
  put<uint32_t>(out, kEntrySize);
  put<uint32_t>(out, entry.magic);
  put<uint16_t>(out, entry.version);
  put<uint8_t>(out, static_cast<uint8_t>(entry.content));
  put<uint8_t>(out, 0);
  put<uint64_t>(out, entry.raw_size);
  put<uint64_t>(out, entry.frame_size);
  put<uint32_t>(out, entry.packets);
  put<uint32_t>(out, entry.events);
  put<uint64_t>(out, entry.first_timestamp);
  put<uint64_t>(out, entry.last_timestamp);
}

UnitEntry read_entry(const uint8_t* at) {
  UnitEntry entry;
  entry.magic = load<uint32_t>(at);
  entry.version = load<uint16_t>(at + 4);
  entry.content = static_cast<UnitContent>(at[6]);
  entry.raw_size = load<uint64_t>(at + 8);
  entry.frame_size = load<uint64_t>(at + 16);
  entry.packets = load<uint32_t>(at + 24);
  entry.events = load<uint32_t>(at + 28);
  entry.first_timestamp = load<uint64_t>(at + 32);
  entry.last_timestamp = load<uint64_t>(at + 40);
  return entry;
}

// Why an entry is not one this version writes, or "".
std::string entry_problem(const UnitEntry& entry) {
  if (entry.magic != kUnitMagic) return "not a chronicle unit entry";
  if (entry.version != kUnitVersion)
    return fmt::format("unit format version {} (this chronicle reads 1)", entry.version);
  if (entry.raw_size > kMaxUnitRawSize)
    return fmt::format("a unit of {} bytes, more than any chronicle writes", entry.raw_size);
  if (entry.content != UnitContent::packets && entry.content != UnitContent::bytes) return "a unit of unknown content";
  return {};
}

}  // namespace

bool looks_compressed(const uint8_t* data, size_t size) {
  return size >= 4 && load<uint32_t>(data) == kSkippableMagic;
}

// The buffers are not zero-filled: a frame header may claim hundreds of megabytes, and only what
// is decoded is touched. They only grow, and are kept from unit to unit.
struct UnitDecoder::State {
  ZSTD_DCtx* context = nullptr;
  Transform transform;
  std::unique_ptr<uint8_t[]> inflated;
  size_t inflated_capacity = 0;
  std::unique_ptr<uint8_t[]> raw;
  size_t raw_capacity = 0;

  static uint8_t* room(std::unique_ptr<uint8_t[]>& buffer, size_t& capacity, size_t size) {
    if (capacity < size || !buffer) {
      buffer.reset(new uint8_t[std::max<size_t>(size, 1)]);
      capacity = size;
    }
    return buffer.get();
  }
};

UnitDecoder::UnitDecoder() : state_(std::make_unique<State>()) {
  state_->context = ZSTD_createDCtx();
  if (!state_->context) throw std::bad_alloc();
}

UnitDecoder::~UnitDecoder() {
  if (state_) ZSTD_freeDCtx(state_->context);
}
UnitDecoder::UnitDecoder(UnitDecoder&&) noexcept = default;
UnitDecoder& UnitDecoder::operator=(UnitDecoder&& other) noexcept {
  if (this != &other) {
    if (state_) ZSTD_freeDCtx(state_->context);
    state_ = std::move(other.state_);
  }
  return *this;
}

std::span<const uint8_t> UnitDecoder::decode(std::span<const uint8_t> file, const UnitPlace& unit) {
  const UnitEntry& entry = unit.entry;
  if (const std::string problem = entry_problem(entry); !problem.empty()) throw UnitError(problem);
  const uint64_t frame_start = unit.offset + kSkippableHeader + kEntrySize;
  if (unit.offset > file.size() || file.size() - unit.offset < kSkippableHeader + kEntrySize ||
      entry.frame_size > file.size() - frame_start)
    throw UnitError("the unit's frame runs past the end of the file (cut short)");
  const std::span<const uint8_t> frame = file.subspan(frame_start, entry.frame_size);
  const unsigned long long content_size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (content_size == ZSTD_CONTENTSIZE_ERROR || content_size == ZSTD_CONTENTSIZE_UNKNOWN ||
      content_size > 2 * kMaxUnitRawSize)
    throw UnitError("not a zstd frame with its content size");
  uint8_t* inflated = State::room(state_->inflated, state_->inflated_capacity, content_size);
  const size_t got = ZSTD_decompressDCtx(state_->context, inflated, content_size, frame.data(), frame.size());
  if (ZSTD_isError(got)) throw UnitError(fmt::format("zstd: {}", ZSTD_getErrorName(got)));
  if (got != content_size) throw UnitError("zstd gave less than the frame's content size");
  if (entry.content == UnitContent::bytes) {
    if (got != entry.raw_size) throw UnitError("the unit decodes to another size than its entry says");
    return {inflated, got};
  }
  uint8_t* raw = State::room(state_->raw, state_->raw_capacity, entry.raw_size);
  state_->transform.decode({inflated, got}, raw, entry.raw_size);
  return {raw, entry.raw_size};
}

std::vector<UnitPlace> list_units(std::span<const uint8_t> file, std::vector<UnitProblem>& problems) {
  std::vector<UnitPlace> units;
  uint64_t raw_offset = 0;
  size_t offset = 0;
  while (offset < file.size()) {
    const size_t left = file.size() - offset;
    const uint8_t* at = file.data() + offset;
    if (left < kSkippableHeader + kEntrySize || load<uint32_t>(at) != kSkippableMagic ||
        load<uint32_t>(at + 4) != kEntrySize) {
      problems.push_back({offset, left, "no unit entry here: the rest of the file cannot be framed"});
      break;
    }
    const UnitEntry entry = read_entry(at + kSkippableHeader);
    const size_t unit_bytes = kSkippableHeader + kEntrySize;
    if (entry.frame_size > left - unit_bytes) {
      problems.push_back({offset, left, "the unit's frame runs past the end of the file (cut short)"});
      break;
    }
    if (const std::string problem = entry_problem(entry); !problem.empty()) {
      problems.push_back({offset, unit_bytes + entry.frame_size, problem});
    } else {
      units.push_back({offset, unit_bytes + entry.frame_size, raw_offset, entry});
      raw_offset += entry.raw_size;
    }
    offset += unit_bytes + entry.frame_size;
  }
  return units;
}

struct UnitWriter::State {
  int level = 1;
  Transform transform;
  ZSTD_CCtx* context = nullptr;
  std::vector<uint8_t> transformed;
  std::vector<uint8_t> frame;
  std::vector<std::vector<uint8_t>> spare_buffers;  // warm_up's, for take_buffer
};

UnitWriter::UnitWriter(int level) : state_(std::make_unique<State>()) {
  state_->level = level;
  state_->context = ZSTD_createCCtx();
  if (!state_->context) throw std::bad_alloc();
  // A content checksum in every frame: a damaged unit fails to decode rather than giving back
  // other bytes that the transform might still accept (a few bytes per unit, one hash pass).
  ZSTD_CCtx_setParameter(state_->context, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(state_->context, ZSTD_c_checksumFlag, 1);
}

UnitWriter::~UnitWriter() {
  ZSTD_freeCCtx(state_->context);
}

void UnitWriter::append(std::span<const uint8_t> raw, UnitContent content, uint32_t events, std::vector<uint8_t>& out) {
  UnitEntry entry;
  entry.magic = kUnitMagic;
  entry.version = kUnitVersion;
  entry.content = content;
  entry.raw_size = raw.size();
  entry.events = events;
  std::span<const uint8_t> input = raw;
  if (content == UnitContent::packets) {
    for (size_t offset = 0; offset < raw.size();) {
      const auto& header = *reinterpret_cast<const PacketHeader*>(raw.data() + offset);
      if (entry.packets == 0) entry.first_timestamp = header.timestamp_begin;
      entry.last_timestamp = header.timestamp_end.load(std::memory_order_relaxed);
      ++entry.packets;
      offset += header.packet_size_bits / 8;
    }
    state_->transform.encode(raw, state_->transformed);
    input = state_->transformed;
  }
  state_->frame.resize(ZSTD_compressBound(input.size()));
  const size_t size =
      ZSTD_compress2(state_->context, state_->frame.data(), state_->frame.size(), input.data(), input.size());
  if (ZSTD_isError(size)) throw std::runtime_error(fmt::format("zstd: {}", ZSTD_getErrorName(size)));
  entry.frame_size = size;
  put_entry(entry, out);
  out.insert(out.end(), state_->frame.begin(), state_->frame.begin() + static_cast<ptrdiff_t>(size));
}

namespace {

// Packets of spans (begins and ends, as a span storm writes them) filling `unit_bytes`.
std::vector<uint8_t> made_up_spans(size_t unit_bytes) {
  constexpr size_t kPacketBytes = 64 << 10;
  std::vector<uint8_t> unit;
  unit.reserve(unit_bytes + kPacketBytes);
  uint64_t ticks = 1'000'000;
  uint32_t site = 1;
  for (uint64_t seq = 0; unit.size() < unit_bytes; ++seq) {
    const size_t start = unit.size();
    unit.resize(start + kPacketBytes);
    uint8_t* packet = unit.data() + start;
    PacketHeader header{};
    header.magic = format::kPacketMagic;
    header.stream_id = format::kStreamThread;
    header.timestamp_begin = ticks;
    header.packet_seq_num.store(seq, std::memory_order_relaxed);
    uint8_t* at = packet + format::kPacketHeaderSize;
    for (bool begin = true; at + format::kCompactHeaderSize + sizeof site <= packet + kPacketBytes; begin = !begin) {
      ticks += 21;
      const auto id = static_cast<uint32_t>(begin ? format::EventId::span_begin : format::EventId::span_end);
      at = format::write_event_header(at, true, id, ticks);
      std::memcpy(at, &site, sizeof site);
      at += sizeof site;
      if (!begin) site = site % 7 + 1;
    }
    const auto content = static_cast<uint64_t>(at - packet);
    header.timestamp_end.store(ticks, std::memory_order_relaxed);
    header.content_size_bits.store(content * 8, std::memory_order_relaxed);
    header.packet_size_bits = kPacketBytes * 8;
    std::memcpy(static_cast<void*>(packet), &header, sizeof header);
  }
  return unit;
}

}  // namespace

void UnitWriter::warm_up(size_t unit_bytes, size_t buffers) {
  std::vector<uint8_t> unit = made_up_spans(unit_bytes);
  std::vector<uint8_t> out;
  append(unit, UnitContent::packets, 0, out);
  for (size_t i = 0; i < buffers; ++i) {
    std::vector<uint8_t> buffer(unit.capacity());  // touched: zero-filled
    buffer.clear();
    state_->spare_buffers.push_back(std::move(buffer));
  }
}

std::vector<uint8_t> UnitWriter::take_buffer() {
  if (state_->spare_buffers.empty()) return {};
  std::vector<uint8_t> buffer = std::move(state_->spare_buffers.back());
  state_->spare_buffers.pop_back();
  return buffer;
}

void append_unit(std::span<const uint8_t> raw, UnitContent content, uint32_t events, std::vector<uint8_t>& out,
                 int level) {
  UnitWriter(level).append(raw, content, events, out);
}

uint64_t decode_file(std::span<const uint8_t> file, const std::function<void(std::span<const uint8_t>)>& sink,
                     std::vector<UnitProblem>& problems, uint64_t max_raw_bytes) {
  std::vector<UnitProblem> framing;
  const std::vector<UnitPlace> units = list_units(file, framing);
  uint64_t claimed = 0;  // stops at the first unit past the cap, each at most kMaxUnitRawSize: no overflow
  for (const UnitPlace& unit : units)
    if ((claimed += unit.entry.raw_size) > max_raw_bytes)
      throw FileCapError(fmt::format("its units decode to more than {} bytes", max_raw_bytes));
  UnitDecoder decoder;
  uint64_t handed = 0;
  auto framing_problem = framing.begin();
  for (const UnitPlace& unit : units) {
    // Problems in the order of the file.
    for (; framing_problem != framing.end() && framing_problem->offset < unit.offset; ++framing_problem)
      problems.push_back(*framing_problem);
    try {
      const std::span<const uint8_t> raw = decoder.decode(file, unit);
      sink(raw);
      handed += raw.size();
    } catch (const UnitError& failure) {
      problems.push_back({unit.offset, unit.bytes, failure.what()});
    }
  }
  problems.insert(problems.end(), framing_problem, framing.end());
  return handed;
}

}  // namespace chronicle::compression
