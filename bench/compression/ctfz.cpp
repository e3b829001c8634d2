// Experiment for issue 17: how small do chronicle's CTF packets get under zstd, as they are and
// after an exactly invertible transform (timestamp deltas, struct-of-arrays columns driven by the
// event catalogue)?
//
//   ctfz TRACE_DIR [--unit BYTES[,BYTES...]] [--levels 1,3,9] [--options a,b,...] [--reps N]
//
// Reads every thread-* stream file of TRACE_DIR, cuts it into units (one packet, or consecutive
// packets until BYTES of raw input), and for every option and level: transforms the unit,
// compresses it (one zstd frame), decompresses it, inverts the transform and compares the result
// with the original bytes (bit for bit). Prints one markdown row per (option, unit, level).
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "format/catalogue.hpp"
#include "format/packet_decoder.hpp"

using namespace chronicle;
using format::FieldType;
using format::PacketHeader;

namespace {

// ---------------------------------------------------------------------------------------------
// Options

enum class Ts { word, delta_u32, delta_varint, delta_varint_by_id };
enum class Field { raw, varint, delta };

struct Option {
  std::string name;
  bool transform = true;  // false: the packet bytes as they are
  bool columnar = true;   // false: rows kept (one column for every event's bytes)
  Ts ts = Ts::delta_varint;
  Field field = Field::raw;
  bool separate = false;  // each column its own zstd frame instead of one frame for the unit
};

std::vector<Option> all_options() {
  return {
      {"raw", false},
      {"rows+tsdelta", true, false, Ts::delta_varint, Field::raw},
      {"rows+tsdelta+fdelta", true, false, Ts::delta_varint, Field::delta},
      {"cols", true, true, Ts::word, Field::raw},
      {"cols+tsdelta32", true, true, Ts::delta_u32, Field::raw},
      {"cols+tsdelta", true, true, Ts::delta_varint, Field::raw},
      {"cols+tsdelta+fvarint", true, true, Ts::delta_varint, Field::varint},
      {"cols+tsdelta+fdelta", true, true, Ts::delta_varint, Field::delta},
      {"cols+tsbyid", true, true, Ts::delta_varint_by_id, Field::raw},
      {"cols+tsbyid+fdelta", true, true, Ts::delta_varint_by_id, Field::delta},
      {"cols+tsbyid+fdelta/sep", true, true, Ts::delta_varint_by_id, Field::delta, true},
  };
}

// ---------------------------------------------------------------------------------------------
// Column slots. The transform is defined from the catalogue: every (event type, field) has its own
// column; nothing is written per event type by hand.

constexpr int kSlots = 256;
constexpr int kMeta = 0;     // per packet: 0 transformed, 1 kept raw (did not decode soundly)
constexpr int kHeader = 1;   // per packet: the 88-byte header and context, as they are
constexpr int kRaw = 2;      // raw packets' bytes after the header; every packet's padding
constexpr int kKind = 3;     // per event: its compact id (0..30), or 31 for an extended header
constexpr int kExtId = 4;    // per extended event: its u32 id
constexpr int kTs = 5;       // per event: its time (5..36 when split by event id)
constexpr int kFields = 40;  // 40 + catalogue index * 8 + field index

int field_slot(const format::EventSpec* spec, size_t field) {
  return kFields + static_cast<int>(spec - format::catalogue().data()) * 8 + static_cast<int>(field);
}

void put_varint(std::vector<uint8_t>& out, uint64_t value) {
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
uint64_t zigzag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t unzigzag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

template <class T>
void put_le(std::vector<uint8_t>& out, T value) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&value);
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

// Where the inverse transform writes: a buffer of fixed capacity, never zero-filled.
struct Output {
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t capacity = 0;
  uint8_t* grow(size_t n) {
    if (capacity - size < n) throw std::runtime_error("output past its capacity");
    uint8_t* at = data + size;
    size += n;
    return at;
  }
};

struct Columns {
  std::vector<uint8_t> col[kSlots];
  void clear() {
    for (auto& c : col) c.clear();
  }
};

struct Reader {
  const uint8_t* p = nullptr;
  const uint8_t* end = nullptr;
  void need(size_t n) const {
    if (static_cast<size_t>(end - p) < n) throw std::runtime_error("column overrun");
  }
  uint8_t byte() {
    need(1);
    return *p++;
  }
  void bytes(uint8_t* into, size_t n) {
    need(n);
    std::memcpy(into, p, n);
    p += n;
  }
  template <class T>
  T le() {
    T value;
    bytes(reinterpret_cast<uint8_t*>(&value), sizeof(T));
    return value;
  }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      const uint8_t b = byte();
      value |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return value;
    }
    throw std::runtime_error("bad varint");
  }
};

// ---------------------------------------------------------------------------------------------
// The transform

uint64_t g_packets_transformed = 0, g_packets_kept_raw = 0;  // over every run

class Transform {
 public:
  explicit Transform(const Option& option) : opt_(option) {}

  // Appends the unit's packets to `cols` (cleared by the caller).
  void encode(const std::vector<std::pair<const uint8_t*, size_t>>& packets, Columns& cols) {
    cols_ = &cols;
    std::memset(prev_, 0, sizeof prev_);
    for (const auto& [packet, size] : packets) encode_packet(packet, size);
  }

  // Rebuilds the unit's packets from the columns into `out`.
  void decode(const Columns& cols, size_t packets, Output& out) {
    for (int s = 0; s < kSlots; ++s) rd_[s] = {cols.col[s].data(), cols.col[s].data() + cols.col[s].size()};
    std::memset(prev_, 0, sizeof prev_);
    for (size_t i = 0; i < packets; ++i) decode_packet(out);
    for (int s = 0; s < kSlots; ++s)
      if (rd_[s].p != rd_[s].end) throw std::runtime_error("column not used up");
  }

 private:
  int slot(int s) const { return opt_.columnar || s < kKind ? s : kKind; }
  std::vector<uint8_t>& col(int s) { return cols_->col[slot(s)]; }
  Reader& rd(int s) { return rd_[slot(s)]; }
  int ts_slot(uint32_t id) const {
    return opt_.ts == Ts::delta_varint_by_id ? kTs + static_cast<int>(id < 31 ? id : 31) : kTs;
  }

  void put_u(int s, uint64_t value, size_t width, bool is_signed) {
    auto& out = col(s);
    switch (opt_.field) {
      case Field::raw:
        out.insert(out.end(), reinterpret_cast<const uint8_t*>(&value),
                   reinterpret_cast<const uint8_t*>(&value) + width);
        break;
      case Field::varint:
        if (is_signed)
          put_varint(out, zigzag(static_cast<int64_t>(value)));
        else
          put_varint(out, value);
        break;
      case Field::delta:
        put_varint(out, zigzag(static_cast<int64_t>(value - prev_[s])));
        prev_[s] = value;
        break;
    }
  }
  uint64_t get_u(int s, size_t width, bool is_signed) {
    auto& in = rd(s);
    uint64_t value = 0;
    switch (opt_.field) {
      case Field::raw:
        in.bytes(reinterpret_cast<uint8_t*>(&value), width);
        break;
      case Field::varint:
        value = is_signed ? static_cast<uint64_t>(unzigzag(in.varint())) : in.varint();
        break;
      case Field::delta:
        value = prev_[s] + static_cast<uint64_t>(unzigzag(in.varint()));
        prev_[s] = value;
        break;
    }
    if (width < 8) value &= (uint64_t{1} << (width * 8)) - 1;
    return value;
  }

  // One pass over the packet's events, with the decoder's checks; a packet that fails any is kept
  // raw (its columns rolled back).
  void encode_packet(const uint8_t* packet, size_t size) {
    col(kHeader).insert(col(kHeader).end(), packet, packet + format::kPacketHeaderSize);
    size_t saved[kSlots];
    uint64_t saved_prev[kSlots];
    for (int s = 0; s < kSlots; ++s) saved[s] = cols_->col[s].size();
    std::memcpy(saved_prev, prev_, sizeof prev_);
    size_t content = 0;
    if (encode_events(packet, size, content)) {
      col(kMeta).push_back(0);
      ++g_packets_transformed;
      // The padding after the content (zeros as the collector writes it, kept whatever it is).
      col(kRaw).insert(col(kRaw).end(), packet + content, packet + size);
      return;
    }
    for (int s = 0; s < kSlots; ++s) cols_->col[s].resize(saved[s]);
    std::memcpy(prev_, saved_prev, sizeof prev_);
    col(kMeta).push_back(1);
    ++g_packets_kept_raw;
    col(kRaw).insert(col(kRaw).end(), packet + format::kPacketHeaderSize, packet + size);
  }

  bool encode_events(const uint8_t* packet, size_t size, size_t& content) {
    if (!format::check_packet_header(packet, size).empty()) return false;
    const auto& header = *reinterpret_cast<const PacketHeader*>(packet);
    if (header.packet_size_bits / 8 != size) return false;
    content = format::content_bytes(header);
    const uint32_t stream_id = header.stream_id;
    const auto& table = format::event_table();
    uint64_t ticks = header.timestamp_begin;
    size_t cursor = format::kPacketHeaderSize;
    auto& kinds = col(kKind);
    while (cursor < content) {
      const uint8_t* data = packet + cursor;
      const size_t left = content - cursor;
      uint32_t id = data[0] & 31u;
      uint64_t t;
      size_t header_size;
      const bool extended = id == format::kExtendedId;
      if (extended) {
        if (data[0] != 31 || left < format::kExtendedHeaderSize) return false;
        std::memcpy(&id, data + 1, 4);
        std::memcpy(&t, data + 5, 8);
        if (t < ticks) return false;
        header_size = format::kExtendedHeaderSize;
      } else {
        if (left < format::kCompactHeaderSize) return false;
        uint32_t word;
        std::memcpy(&word, data, 4);
        const uint64_t low = word >> format::kCompactIdBits;
        t = (ticks & ~format::kCompactTimestampMask) | low;
        if (low < (ticks & format::kCompactTimestampMask)) t += format::kCompactTimestampMask + 1;
        header_size = format::kCompactHeaderSize;
      }
      const format::EventSpec* spec = format::lookup_event(table, stream_id, id);
      if (!spec) return false;
      if (spec->fixed_payload_size >= 0 && static_cast<size_t>(spec->fixed_payload_size) > left - header_size)
        return false;
      kinds.push_back(extended ? 31 : static_cast<uint8_t>(id));
      if (extended) put_le<uint32_t>(col(kExtId), id);
      const uint64_t delta = t - ticks;
      switch (opt_.ts) {
        case Ts::word:
          if (extended)
            put_le<uint64_t>(col(kTs), t);
          else
            put_le<uint32_t>(col(kTs), static_cast<uint32_t>(t & format::kCompactTimestampMask));
          break;
        case Ts::delta_u32:
          if (extended)
            put_le<uint64_t>(col(kTs), delta);
          else
            put_le<uint32_t>(col(kTs), static_cast<uint32_t>(delta));
          break;
        case Ts::delta_varint:
        case Ts::delta_varint_by_id:
          put_varint(col(ts_slot(id)), delta);
          break;
      }
      ticks = t;
      // The payload, field by field, as the catalogue declares it.
      const uint8_t* p = data + header_size;
      const uint8_t* const end = packet + content;
      uint32_t last_u32 = 0;
      const auto& fields = spec->fields;
      for (size_t f = 0; f < fields.size(); ++f) {
        const int s = field_slot(spec, f);
        const size_t width = format::field_size(fields[f].type);
        if (static_cast<size_t>(end - p) < width) return false;
        switch (fields[f].type) {
          case FieldType::u8:
            col(s).push_back(*p++);
            break;
          case FieldType::u32: {
            std::memcpy(&last_u32, p, 4);
            put_u(s, last_u32, 4, false);
            p += 4;
            break;
          }
          case FieldType::u64:
          case FieldType::s64: {
            uint64_t v;
            std::memcpy(&v, p, 8);
            put_u(s, v, 8, fields[f].type == FieldType::s64);
            p += 8;
            break;
          }
          case FieldType::f64:
            col(s).insert(col(s).end(), p, p + 8);
            p += 8;
            break;
          case FieldType::string: {
            const void* nul = std::memchr(p, 0, static_cast<size_t>(end - p));
            if (!nul) return false;
            const size_t n = static_cast<size_t>(static_cast<const uint8_t*>(nul) - p) + 1;
            col(s).insert(col(s).end(), p, p + n);
            p += n;
            break;
          }
          case FieldType::u64_sequence:
            if (last_u32 > static_cast<size_t>(end - p) / 8) return false;
            for (uint32_t i = 0; i < last_u32; ++i, p += 8) {
              uint64_t v;
              std::memcpy(&v, p, 8);
              put_u(s, v, 8, false);
            }
            break;
        }
      }
      cursor = static_cast<size_t>(p - packet);
    }
    return cursor == content;
  }

  void decode_packet(Output& out) {
    const size_t start = out.size;
    rd(kHeader).bytes(out.grow(format::kPacketHeaderSize), format::kPacketHeaderSize);
    const auto header_u64 = [&](size_t offset) {
      uint64_t v;
      std::memcpy(&v, out.data + start + offset, 8);
      return v;
    };
    uint32_t stream_id;
    std::memcpy(&stream_id, out.data + start + offsetof(PacketHeader, stream_id), 4);
    const uint64_t size = header_u64(offsetof(PacketHeader, packet_size_bits)) / 8;
    const uint64_t timestamp_begin = header_u64(offsetof(PacketHeader, timestamp_begin));
    const uint64_t content = header_u64(offsetof(PacketHeader, content_size_bits)) / 8;
    if (size < format::kPacketHeaderSize || content > size) throw std::runtime_error("bad sizes");
    if (rd(kMeta).byte() != 0) {
      rd(kRaw).bytes(out.grow(size - format::kPacketHeaderSize), size - format::kPacketHeaderSize);
      return;
    }
    out.grow(size - format::kPacketHeaderSize);
    uint8_t* packet = out.data + start;
    size_t cursor = format::kPacketHeaderSize;
    uint64_t ticks = timestamp_begin;
    const auto& table = format::event_table();
    while (cursor < content) {
      const uint8_t kind = rd(kKind).byte();
      const bool extended = kind == 31;
      const uint32_t id = extended ? rd(kExtId).le<uint32_t>() : kind;
      uint64_t t = 0;
      switch (opt_.ts) {
        case Ts::word:
          if (extended) {
            t = rd(kTs).le<uint64_t>();
          } else {
            const uint64_t low = rd(kTs).le<uint32_t>();
            t = (ticks & ~format::kCompactTimestampMask) | low;
            if (low < (ticks & format::kCompactTimestampMask)) t += format::kCompactTimestampMask + 1;
          }
          break;
        case Ts::delta_u32:
          t = ticks + (extended ? rd(kTs).le<uint64_t>() : rd(kTs).le<uint32_t>());
          break;
        case Ts::delta_varint:
        case Ts::delta_varint_by_id:
          t = ticks + rd(ts_slot(id)).varint();
          break;
      }
      ticks = t;
      uint8_t* data = packet + cursor;
      // Room for the largest header; payloads are bounds-checked as they are written.
      if (cursor + (extended ? format::kExtendedHeaderSize : format::kCompactHeaderSize) > size)
        throw std::runtime_error("event past the packet");
      uint8_t* p = format::write_event_header(data, !extended, id, t);
      const format::EventSpec* spec = format::lookup_event(table, stream_id, id);
      if (!spec) throw std::runtime_error("unknown event");
      uint32_t last_u32 = 0;
      const auto room = [&](size_t n) {
        if (static_cast<size_t>(p - packet) + n > size) throw std::runtime_error("payload past the packet");
      };
      const auto& fields = spec->fields;
      for (size_t f = 0; f < fields.size(); ++f) {
        const int s = field_slot(spec, f);
        switch (fields[f].type) {
          case FieldType::u8:
            room(1);
            *p++ = rd(s).byte();
            break;
          case FieldType::u32: {
            room(4);
            last_u32 = static_cast<uint32_t>(get_u(s, 4, false));
            std::memcpy(p, &last_u32, 4);
            p += 4;
            break;
          }
          case FieldType::u64:
          case FieldType::s64: {
            room(8);
            const uint64_t v = get_u(s, 8, fields[f].type == FieldType::s64);
            std::memcpy(p, &v, 8);
            p += 8;
            break;
          }
          case FieldType::f64:
            room(8);
            rd(s).bytes(p, 8);
            p += 8;
            break;
          case FieldType::string: {
            auto& in = rd(s);
            const void* nul = std::memchr(in.p, 0, in.end - in.p);
            if (!nul) throw std::runtime_error("string without NUL");
            const size_t n = static_cast<const uint8_t*>(nul) - in.p + 1;
            room(n);
            in.bytes(p, n);
            p += n;
            break;
          }
          case FieldType::u64_sequence:
            room(size_t{last_u32} * 8);
            for (uint32_t i = 0; i < last_u32; ++i, p += 8) {
              const uint64_t v = get_u(s, 8, false);
              std::memcpy(p, &v, 8);
            }
            break;
        }
      }
      cursor = static_cast<size_t>(p - packet);
    }
    if (cursor != content) throw std::runtime_error("events do not end at the content size");
    rd(kRaw).bytes(packet + content, size - content);
  }

  Option opt_;
  Columns* cols_ = nullptr;
  Reader rd_[kSlots];
  uint64_t prev_[kSlots];
};

// One blob for one zstd frame: a directory (slot, length) of the non-empty columns, then the columns.
void serialize(const Columns& cols, std::vector<uint8_t>& blob) {
  blob.clear();
  for (int s = 0; s < kSlots; ++s)
    if (!cols.col[s].empty()) {
      put_varint(blob, static_cast<uint64_t>(s) + 1);
      put_varint(blob, cols.col[s].size());
    }
  put_varint(blob, 0);
  for (int s = 0; s < kSlots; ++s) blob.insert(blob.end(), cols.col[s].begin(), cols.col[s].end());
}

void deserialize(const uint8_t* data, size_t size, Columns& cols) {
  cols.clear();
  Reader in{data, data + size};
  std::vector<std::pair<int, size_t>> dir;
  for (;;) {
    const uint64_t s = in.varint();
    if (s == 0) break;
    if (s > kSlots) throw std::runtime_error("bad slot");
    dir.emplace_back(static_cast<int>(s - 1), in.varint());
  }
  for (const auto& [s, n] : dir) {
    cols.col[s].resize(n);
    in.bytes(cols.col[s].data(), n);
  }
  if (in.p != in.end) throw std::runtime_error("trailing bytes");
}

// ---------------------------------------------------------------------------------------------
// Input

struct StreamFile {
  std::string name;
  std::vector<uint64_t> storage;  // 8-byte aligned
  size_t size = 0;
  std::vector<std::pair<size_t, size_t>> packets;  // offset, size
  uint64_t events = 0;
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(storage.data()); }
};

StreamFile load(const std::filesystem::path& path) {
  StreamFile file;
  file.name = path.filename().string();
  file.size = std::filesystem::file_size(path);
  file.storage.resize((file.size + 7) / 8);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(file.storage.data()), static_cast<std::streamsize>(file.size));
  size_t offset = 0;
  while (offset < file.size) {
    const auto size = format::framed_packet_size(file.data() + offset, file.size - offset);
    if (!size) {  // the rest is one raw piece: never happens in these traces
      std::fprintf(stderr, "%s: unframed bytes at %zu\n", file.name.c_str(), offset);
      std::exit(2);
    }
    file.packets.emplace_back(offset, *size);
    const auto& header = *reinterpret_cast<const PacketHeader*>(file.data() + offset);
    if (auto n = format::count_events(file.data() + offset, format::content_bytes(header))) file.events += *n;
    offset += *size;
  }
  return file;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ctfz TRACE_DIR [--unit B,...] [--levels L,...] [--options a,...] [--reps N]\n");
    return 2;
  }
  std::vector<size_t> units = {0, size_t{1} << 20};
  std::vector<int> levels = {1, 3, 9};
  std::vector<std::string> wanted;
  int reps = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--unit") {
      units.clear();
      for (auto& u : split(argv[i + 1])) units.push_back(std::stoull(u));
    } else if (flag == "--levels") {
      levels.clear();
      for (auto& l : split(argv[i + 1])) levels.push_back(std::stoi(l));
    } else if (flag == "--options") {
      wanted = split(argv[i + 1]);
    } else if (flag == "--reps") {
      reps = std::stoi(argv[i + 1]);
    }
  }
  std::vector<StreamFile> files;
  for (const auto& entry : std::filesystem::directory_iterator(argv[1]))
    if (entry.path().filename().string().rfind("thread-", 0) == 0) files.push_back(load(entry.path()));
  uint64_t events = 0, raw_bytes = 0, packets = 0;
  for (const auto& f : files) {
    events += f.events;
    raw_bytes += f.size;
    packets += f.packets.size();
  }
  std::printf("# %s: %zu thread files, %llu packets, %llu events, %llu bytes (%.3f B/event, %.0f B/packet)\n", argv[1],
              files.size(), (unsigned long long)packets, (unsigned long long)events, (unsigned long long)raw_bytes,
              double(raw_bytes) / double(events), double(raw_bytes) / double(packets));
  {
    // The floor for any transform that walks the events: format::events_decode over every packet.
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      const double t0 = now_s();
      uint32_t types = 0;
      for (const auto& f : files)
        for (const auto& [offset, size] : f.packets) {
          const auto& header = *reinterpret_cast<const PacketHeader*>(f.data() + offset);
          (void)format::events_decode(f.data() + offset, format::content_bytes(header), types);
        }
      best = std::min(best, now_s() - t0);
    }
    std::printf("# format::events_decode walk: %.2f ns/event\n", best * 1e9 / double(events));
  }
  std::printf(
      "| option | unit | level | B/event | ratio | transform ns/ev | zstd MB/s | unzstd MB/s | inverse ns/ev | write "
      "MB/s | read MB/s | round trip |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  std::fflush(stdout);

  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  Columns cols, back;
  std::vector<uint8_t> blob, frame, unblob;
  std::unique_ptr<uint8_t[]> rebuilt_storage;
  size_t rebuilt_capacity = 0;
  Output rebuilt;
  for (const auto& option : all_options()) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), option.name) == wanted.end()) continue;
    Transform transform(option);
    for (size_t unit : units)
      for (int level : levels) {
        double best_enc = 1e30, best_comp = 1e30, best_dec = 1e30, best_inv = 1e30;
        uint64_t compressed = 0, mismatches = 0;
        for (int rep = 0; rep < reps; ++rep) {
          double t_enc = 0, t_comp = 0, t_dec = 0, t_inv = 0;
          compressed = 0;
          mismatches = 0;
          for (const auto& f : files) {
            size_t i = 0;
            while (i < f.packets.size()) {
              // The unit: packets from i until `unit` bytes (at least one packet).
              std::vector<std::pair<const uint8_t*, size_t>> group;
              size_t bytes = 0;
              const size_t first = f.packets[i].first;
              do {
                group.emplace_back(f.data() + f.packets[i].first, f.packets[i].second);
                bytes += f.packets[i].second;
                ++i;
              } while (i < f.packets.size() && bytes + f.packets[i].second <= unit);
              const uint8_t* original = f.data() + first;
              double t0 = now_s();
              // Transform.
              if (option.transform) {
                cols.clear();
                transform.encode(group, cols);
                if (!option.separate) serialize(cols, blob);
              } else {
                blob.assign(original, original + bytes);
              }
              double t1 = now_s();
              t_enc += t1 - t0;
              // Compress, decompress.
              size_t unit_compressed = 0;
              if (option.separate) {
                // A directory of (slot, compressed length, raw length) and one frame per column.
                std::vector<uint8_t> dir;
                t0 = now_s();
                std::vector<std::vector<uint8_t>> frames(kSlots);
                for (int s = 0; s < kSlots; ++s) {
                  if (cols.col[s].empty()) continue;
                  frames[s].resize(ZSTD_compressBound(cols.col[s].size()));
                  const size_t n = ZSTD_compressCCtx(cctx, frames[s].data(), frames[s].size(), cols.col[s].data(),
                                                     cols.col[s].size(), level);
                  if (ZSTD_isError(n)) throw std::runtime_error(ZSTD_getErrorName(n));
                  frames[s].resize(n);
                  put_varint(dir, s + 1);
                  put_varint(dir, n);
                  put_varint(dir, cols.col[s].size());
                  unit_compressed += n;
                }
                put_varint(dir, 0);
                unit_compressed += dir.size();
                t1 = now_s();
                t_comp += t1 - t0;
                back.clear();
                for (int s = 0; s < kSlots; ++s) {
                  if (frames[s].empty()) continue;
                  back.col[s].resize(cols.col[s].size());
                  const size_t n = ZSTD_decompressDCtx(dctx, back.col[s].data(), back.col[s].size(), frames[s].data(),
                                                       frames[s].size());
                  if (ZSTD_isError(n) || n != back.col[s].size()) throw std::runtime_error("unzstd");
                }
                t_dec += now_s() - t1;
              } else {
                frame.resize(ZSTD_compressBound(blob.size()));
                t0 = now_s();
                const size_t n = ZSTD_compressCCtx(cctx, frame.data(), frame.size(), blob.data(), blob.size(), level);
                if (ZSTD_isError(n)) throw std::runtime_error(ZSTD_getErrorName(n));
                t1 = now_s();
                t_comp += t1 - t0;
                unit_compressed = n;
                const unsigned long long content = ZSTD_getFrameContentSize(frame.data(), n);
                unblob.resize(content);
                const size_t m = ZSTD_decompressDCtx(dctx, unblob.data(), unblob.size(), frame.data(), n);
                if (ZSTD_isError(m) || m != content) throw std::runtime_error("unzstd");
                t_dec += now_s() - t1;
              }
              compressed += unit_compressed;
              // Inverse transform, and the comparison.
              t0 = now_s();
              const uint8_t* result = unblob.data();
              if (option.transform) {
                if (!option.separate) deserialize(unblob.data(), unblob.size(), back);
                if (rebuilt_capacity < bytes) {
                  rebuilt_capacity = bytes;
                  rebuilt_storage.reset(new uint8_t[bytes]);
                }
                rebuilt = {rebuilt_storage.get(), 0, bytes};
                try {
                  transform.decode(back, group.size(), rebuilt);
                } catch (const std::exception& e) {
                  static int reported = 0;
                  if (++reported <= 5)
                    std::fprintf(stderr, "%s: decode failed at %zu: %s\n", f.name.c_str(), first, e.what());
                  rebuilt.size = 0;
                }
                result = rebuilt.data;
                if (rebuilt.size != bytes) result = nullptr;
              }
              t_inv += now_s() - t0;
              if (!result || std::memcmp(result, original, bytes) != 0) ++mismatches;
            }
          }
          best_enc = std::min(best_enc, t_enc);
          best_comp = std::min(best_comp, t_comp);
          best_dec = std::min(best_dec, t_dec);
          best_inv = std::min(best_inv, t_inv);
        }
        const double mb = double(raw_bytes) / 1e6;
        std::printf("| %s | %s | %d | %.3f | %.2f | %.1f | %.0f | %.0f | %.1f | %.0f | %.0f | %s |\n",
                    option.name.c_str(), unit == 0 ? "packet" : (std::to_string(unit >> 10) + " KiB").c_str(), level,
                    double(compressed) / double(events), double(raw_bytes) / double(compressed),
                    option.transform ? best_enc * 1e9 / double(events) : 0.0, mb / best_comp, mb / best_dec,
                    option.transform ? best_inv * 1e9 / double(events) : 0.0, mb / (best_enc + best_comp),
                    mb / (best_dec + best_inv),
                    mismatches == 0 ? "exact" : (std::to_string(mismatches) + " units differ").c_str());
        std::fflush(stdout);
      }
  }
  std::printf("# packets transformed: %llu, kept raw (not sound): %llu (summed over every run above)\n",
              (unsigned long long)g_packets_transformed, (unsigned long long)g_packets_kept_raw);
  ZSTD_freeCCtx(cctx);
  ZSTD_freeDCtx(dctx);
  return 0;
}
