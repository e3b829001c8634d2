// The compressed trace files (".ctfz"): chronicle's CTF files cut into units, each transformed
// (columns per event field, varint deltas of the time and of the integers) and compressed as one
// zstd frame. The design and its measurements: bench/compression/RESULTS.md.
//
// A .ctfz file is a series of units. A unit is a zstd skippable frame holding its UnitEntry,
// then one zstd frame holding the unit's content:
//   - packets: whole CTF packets of one stream, transformed before the codec. A packet the
//     decoder would not accept is kept verbatim, so that damage round-trips too.
//   - bytes: any bytes as they are (the metadata's text).
// Each unit decodes alone (the deltas start again in each), and decoding gives back the
// original bytes exactly: `chronicle convert` writes them as a plain CTF trace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace chronicle::compression {

// A compressed file is named as its plain twin with this suffix ("thread-7.ctfz",
// "metadata.ctfz"). A compressed directory holds no file named "metadata", so that babeltrace2
// does not take it for a CTF trace it cannot read.
inline constexpr std::string_view kSuffix = ".ctfz";
bool has_compressed_name(std::string_view file_name);
// "thread-7.ctfz" -> "thread-7"; a plain name is returned as it is.
std::string plain_name(std::string_view file_name);

enum class UnitContent : uint8_t { packets = 0, bytes = 1 };

// The index entry before each unit's frame, little-endian in the skippable frame.
struct UnitEntry {
  uint32_t magic = 0;  // kUnitMagic
  uint16_t version = 0;
  UnitContent content = UnitContent::packets;
  uint8_t reserved = 0;
  uint64_t raw_size = 0;         // bytes the unit decodes to
  uint64_t frame_size = 0;       // bytes of the zstd frame after the entry
  uint32_t packets = 0;          // packets in the unit (0 for bytes)
  uint32_t events = 0;           // events in its packets (as counted when written)
  uint64_t first_timestamp = 0;  // the first packet's timestamp_begin
  uint64_t last_timestamp = 0;   // the last packet's timestamp_end
};
inline constexpr uint32_t kUnitMagic = 0x5A465443;  // "CTFZ"
inline constexpr uint16_t kUnitVersion = 1;
// Units larger than this are damage: the collector cuts units at about 1 MiB.
inline constexpr uint64_t kMaxUnitRawSize = uint64_t{256} << 20;

// True when `data` starts as a .ctfz file does (a skippable frame), where a CTF file starts
// with the packet magic.
bool looks_compressed(const uint8_t* data, size_t size);

// A unit that could not be decoded: where it starts in the compressed file and why.
struct UnitProblem {
  uint64_t offset = 0;
  uint64_t bytes = 0;  // compressed bytes skipped
  std::string reason;
};

// Appends one unit holding `raw` to `out`. For UnitContent::packets, `raw` is whole packets one
// after the other (each as long as its packet_size says), `events` their event count.
// `level`: zstd's (1 is what the collector uses: see RESULTS.md).
void append_unit(std::span<const uint8_t> raw, UnitContent content, uint32_t events, std::vector<uint8_t>& out,
                 int level = 1);

// The same, keeping its buffers and zstd context from unit to unit: a fresh megabyte per unit
// cost the collector more in page faults than the transform itself.
class UnitWriter {
 public:
  explicit UnitWriter(int level = 1);
  ~UnitWriter();
  UnitWriter(const UnitWriter&) = delete;
  UnitWriter& operator=(const UnitWriter&) = delete;
  void append(std::span<const uint8_t> raw, UnitContent content, uint32_t events, std::vector<uint8_t>& out);

  // Grows and touches, before they are needed, what writing units of `unit_bytes` uses: the
  // columns, zstd's context, and `buffers` raw unit buffers handed out by take_buffer(). Memory
  // a collector first touches while the program writes stalls it (a page fault costs ~20 us on
  // a VM, so the first megabyte unit took 20 ms), and the first ring can fill meanwhile.
  void warm_up(size_t unit_bytes, size_t buffers);
  // A warmed buffer for a stream's unit (empty, its capacity kept), or an empty vector.
  std::vector<uint8_t> take_buffer();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A unit that does not decode (DecodeUnit), or a damaged entry: what is wrong with it.
class UnitError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A unit of a .ctfz file, as its entry describes it.
struct UnitPlace {
  uint64_t offset = 0;      // where its skippable frame starts in the compressed file
  uint64_t bytes = 0;       // its entry and frame
  uint64_t raw_offset = 0;  // where its bytes start in the decoded file: the raw sizes of the units before
  UnitEntry entry;
};

// The file's seek table: its units in order, found from their entries alone (nothing is
// decompressed, a page or so is read per unit). A unit whose entry is not one this version
// writes is listed in `problems` and left out; where the units stop being framed (a file cut
// short, a damaged size), the rest of the file is.
std::vector<UnitPlace> list_units(std::span<const uint8_t> file, std::vector<UnitProblem>& problems);

// Decodes one unit at a time, keeping its buffers and zstd context from unit to unit: a reader
// holds one unit's raw bytes, whatever the size of the file.
class UnitDecoder {
 public:
  UnitDecoder();
  ~UnitDecoder();
  UnitDecoder(UnitDecoder&&) noexcept;
  UnitDecoder& operator=(UnitDecoder&&) noexcept;
  // The raw bytes of `unit` of `file` (as list_units found it), valid until the next call.
  // Throws UnitError when they do not decode.
  std::span<const uint8_t> decode(std::span<const uint8_t> file, const UnitPlace& unit);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Thrown by decode_file when a file's units together claim more raw bytes than its caller caps
// the whole file at (each unit alone is capped at kMaxUnitRawSize).
class FileCapError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Decodes a whole .ctfz file, handing each unit's raw bytes to `sink` in order. A unit that does
// not decode is skipped and listed in `problems`; when the next unit cannot be found after it,
// the rest of the file is. Throws FileCapError, before decoding any unit, when the units' raw
// sizes add up to more than `max_raw_bytes`. Returns the raw bytes handed out.
uint64_t decode_file(std::span<const uint8_t> file, const std::function<void(std::span<const uint8_t>)>& sink,
                     std::vector<UnitProblem>& problems, uint64_t max_raw_bytes = UINT64_MAX);

}  // namespace chronicle::compression
