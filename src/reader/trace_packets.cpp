// The packet index of a trace: every stream file mapped (a .ctfz's units listed), every packet
// checked, on threads for a large trace, and where each readable one is kept for the cursors.
#include "reader/trace_reader.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>

#include "compression/ctfz.hpp"
#include "reader/run_on_threads.hpp"
#include "reader/trace_reader_internal.hpp"

namespace chronicle::reader {
namespace {

namespace fs = std::filesystem;

}  // namespace

// How far a reader of a stream's files has gone: the pages behind it are let go every
// kReleaseStep bytes (of the mapped file: the compressed bytes of a .ctfz).
constexpr uint64_t kReleaseStep = 4 << 20;

struct ReleasedBehind {
  const MappedFile* file = nullptr;
  uint64_t released = 0;  // the pages from where the reader came into the file up to here were let go

  // The reader is at `offset` of `next`. What it lets go of in a file starts where it came in: a
  // reader of a later piece of the file (a cursor over a packet range, a window of the check) must
  // not take the pages another is reading before it.
  void at(const MappedFile* next, uint64_t offset) {
    if (next != file) {
      if (file) file->release(released, file->size());
      file = next;
      released = offset;
    }
    if (offset >= released + kReleaseStep) {
      file->release(released, offset);
      released = offset;
    }
  }
  // The reader is done with the file.
  void finish() {
    if (file) file->release(released, file->size());
    file = nullptr;
  }
};

// Where a cursor is: the unit it reads, decoded (a .ctfz), and the pages it has let go.
struct Trace::ReadPosition {
  compression::UnitDecoder decoder;
  uint32_t file = UINT32_MAX;
  uint32_t unit = UINT32_MAX;
  const uint8_t* raw = nullptr;
  ReleasedBehind behind;
};

namespace {

std::string unit_damage(const std::string& reason) {
  return fmt::format("compressed unit: {} (offsets in this file's compressed bytes)", reason);
}

}  // namespace

// A stream file mapped for reading; for a compressed one, its units are listed (those that cannot
// be framed are damage).
std::unique_ptr<Trace::StreamFile> Trace::open_stream_file(const std::string& path, uint64_t committed,
                                                           std::vector<Damage>& damage) const {
  auto file = std::make_unique<StreamFile>();
  file->mapped = std::make_unique<MappedFile>(path, owner_, committed);
  file->compressed = compression::has_compressed_name(path) ||
                     compression::looks_compressed(file->mapped->data(), file->mapped->size());
  if (!file->compressed) return file;
  std::vector<compression::UnitProblem> problems;
  file->units = compression::list_units(file->bytes(), problems);
  for (const compression::UnitProblem& problem : problems)
    damage.push_back({path, problem.offset, problem.bytes, std::nullopt, unit_damage(problem.reason)});
  return file;
}

// One stream's files opened and every packet checked: what open() keeps of it.
struct Trace::IndexedStream {
  StreamInfo info;
  std::vector<std::unique_ptr<StreamFile>> files;
  std::vector<PacketPlace> readable;
  std::vector<uint32_t> event_types;
  std::vector<Damage> damage;
  uint64_t last_discarded = 0;  // the cumulative count of the last packet kept
};

// Bytes of a stream file being indexed: a plain file's mapping, or a unit of a .ctfz decoded.
struct Trace::PacketBytes {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  uint64_t base = 0;                   // where data[0] is in the file's (decoded) bytes
  uint32_t file = 0;                   // in the stream's files
  uint32_t unit = 0;                   // in a .ctfz file's units (0 for a plain file)
  const MappedFile* mapped = nullptr;  // the mapping `data` is, whose pages are let go behind the
                                       // check (null for a decoded unit)
};

// Each stream is checked apart from the others (on a thread of its own when the trace is large),
// and the results are kept in the order of the stream names, as one thread would.
void Trace::index_streams(const std::map<std::string, StreamFiles>& stream_files,
                          const std::map<std::string, uint64_t>* starts, bool live) {
  struct Job {
    StreamFiles files;
    uint64_t start = 0;
    uint64_t bytes = 0;
  };
  std::vector<Job> jobs;
  uint64_t total_bytes = 0;
  for (const auto& [name, files] : stream_files) {
    Job job{files};
    // Read again from where `starts` says: the files before are read already.
    for (size_t k = files.size(); starts && k-- > 0;)
      if (const auto found = starts->find(files[k].path); found != starts->end()) {
        job.files.erase(job.files.begin(), job.files.begin() + static_cast<ptrdiff_t>(k));
        job.start = found->second;
        break;
      }
    for (const ListedFile& listed : job.files) {
      std::error_code size_error;
      const uint64_t size = fs::file_size(listed.path, size_error);
      job.bytes += size_error ? 0 : size;
    }
    total_bytes += job.bytes;
    jobs.push_back(std::move(job));
  }
  std::vector<std::optional<IndexedStream>> results(jobs.size());
  release_pages_ = total_bytes > options_.bytes_kept_mapped;
  // Threads pay for themselves on large traces only. A stream that holds more of the trace than
  // one thread's share has its packets checked on as many threads as its share (a program's main
  // thread often writes a few bytes beside one busy thread).
  const size_t threads = total_bytes < kBytesForThreadedOpen ? 1 : default_thread_count();
  const auto threads_for = [&](const Job& job) -> size_t {
    if (threads == 1) return 1;
    const double share =
        static_cast<double>(threads) * static_cast<double>(job.bytes) / static_cast<double>(total_bytes);
    return std::clamp<size_t>(static_cast<size_t>(share + 0.5), 1, threads);
  };
  const std::vector<std::exception_ptr> failures = run_on_threads(jobs.size(), threads, [&](size_t index) {
    const Job& job = jobs[index];
    results[index] = index_stream(job.files, job.start, starts != nullptr, live, threads_for(job));
  });
  for (size_t index = 0; index < jobs.size(); ++index) {
    if (failures[index]) std::rethrow_exception(failures[index]);
    IndexedStream& stream = *results[index];
    damage_.insert(damage_.end(), stream.damage.begin(), stream.damage.end());
    if (stream.readable.empty()) continue;  // nothing of this stream to show; damage() says why
    streams_.push_back(std::move(stream.info));
    files_.push_back(std::move(stream.files));
    readable_packets_.push_back(std::move(stream.readable));
    packet_event_types_.push_back(std::move(stream.event_types));
  }
}

Trace::IndexedStream Trace::index_stream(const StreamFiles& stream_files, uint64_t start, bool growing, bool live,
                                         size_t threads) const {
  IndexedStream indexed;
  StreamInfo& info = indexed.info;
  std::vector<std::unique_ptr<StreamFile>>& files = indexed.files;
  for (size_t k = 0; k < stream_files.size(); ++k) {
    const std::string& path = stream_files[k].path;
    std::unique_ptr<StreamFile> file;
    try {
      file = open_stream_file(path, stream_files[k].limit, indexed.damage);
    } catch (const TraceError&) {
      std::error_code ignored;
      if (live && !fs::exists(path, ignored)) continue;  // its chunk removed since it was listed
      throw;
    }
    info.files.push_back(path);
    info.bytes += file->decoded_size();
    const uint64_t first = k == 0 ? start : 0;
    const auto file_index = static_cast<uint32_t>(files.size());
    if (!file->compressed) {
      const PacketBytes bytes{
          file->mapped->data(), file->mapped->size(), 0, file_index, 0, release_pages_ ? file->mapped.get() : nullptr};
      index_packets(bytes, first, growing, indexed, threads);
    } else {
      index_units(*file, first, file_index, indexed);
    }
    files.push_back(std::move(file));
  }
  info.path = info.files.empty() ? stream_files.front().path : info.files.front();
  info.events_discarded = indexed.last_discarded;
  return indexed;
}

// Checks the packets of a compressed file's units from the decoded offset `first` on.
void Trace::index_units(const StreamFile& file, uint64_t first, uint32_t file_index, IndexedStream& indexed) const {
  const std::string& path = indexed.info.files[file_index];
  compression::UnitDecoder decoder;
  ReleasedBehind behind;
  for (size_t k = 0; k < file.units.size(); ++k) {
    const compression::UnitPlace& unit = file.units[k];
    if (unit.raw_offset + unit.entry.raw_size <= first) continue;  // read in an earlier round
    if (release_pages_) behind.at(file.mapped.get(), unit.offset);
    if (unit.entry.content != compression::UnitContent::packets) {
      indexed.damage.push_back(
          {path, unit.offset, unit.bytes, std::nullopt, unit_damage("a unit of bytes where packets were expected")});
      continue;
    }
    std::span<const uint8_t> raw;
    try {
      raw = decoder.decode(file.bytes(), unit);
    } catch (const compression::UnitError& failure) {
      indexed.damage.push_back({path, unit.offset, unit.bytes, std::nullopt, unit_damage(failure.what())});
      continue;
    }
    // The collector writes whole packets in a unit: none is being written in one.
    const PacketBytes bytes{raw.data(), raw.size(), unit.raw_offset, file_index, static_cast<uint32_t>(k), nullptr};
    index_packets(bytes, first > unit.raw_offset ? first - unit.raw_offset : 0, false, indexed, 1);
  }
  behind.finish();
}

// How much of a file the check frames, then checks (on threads, packet by packet), then keeps
// at a time: the pages it holds.
constexpr uint64_t kCheckWindow = 16 << 20;

// A framed packet of a window being checked, and what the check found.
struct Trace::CheckedPacket {
  uint64_t offset = 0;  // in `data`
  uint64_t bytes = 0;
  std::string header_problem;   // its header's, but for the discard count (which needs the packet before)
  std::string content_problem;  // its events'
  uint32_t types = 0;
};

// Checks the packets of `bytes` from offset `first` of its data on, and keeps the sound ones. The
// packets of a window are checked on `threads` threads, apart; what they found is taken in order.
void Trace::index_packets(const PacketBytes& bytes, uint64_t first, bool growing, IndexedStream& indexed,
                          size_t threads) const {
  // Named apart, not as a structured binding: clang before 16 cannot capture one in a lambda.
  const uint8_t* const data = bytes.data;
  const uint64_t size = bytes.size;
  const uint64_t base = bytes.base;
  const std::string& path = indexed.info.files[bytes.file];
  ReleasedBehind behind;
  std::vector<CheckedPacket> window;
  uint64_t offset = first;
  while (offset < size) {
    if (bytes.mapped) behind.at(bytes.mapped, offset);
    // Framing: where each packet of the window ends, from its header.
    window.clear();
    std::optional<Damage> unframed;
    for (const uint64_t end = offset + kCheckWindow; offset < size && offset < end;) {
      const uint64_t left = size - offset;
      const std::optional<uint64_t> packet_bytes = format::framed_packet_size(data + offset, left);
      if (!packet_bytes) {
        // The collector appends whole packets: one that ends short is being written now.
        // Else where this packet ends, and so where the next one starts, is unknown: the rest is lost.
        if (!growing)
          unframed = Damage{path, base + offset, left, std::nullopt, format::check_packet_header(data + offset, left)};
        offset = size;
        break;
      }
      window.push_back({offset, *packet_bytes, {}, {}, 0});
      offset += *packet_bytes;
    }
    const auto check = [&](size_t k) {
      CheckedPacket& packet = window[k];
      packet.header_problem = header_problem(data + packet.offset, base + packet.offset);
      if (packet.header_problem.empty())
        packet.content_problem = content_problem(data + packet.offset, base + packet.offset, packet.types);
    };
    const std::vector<std::exception_ptr> failures = run_on_threads(window.size(), threads, check);
    for (const std::exception_ptr& failure : failures)
      if (failure) std::rethrow_exception(failure);
    for (const CheckedPacket& packet : window) keep_checked(bytes, packet, indexed);
    if (unframed) indexed.damage.push_back(std::move(*unframed));
  }
  behind.finish();
}

// A checked packet taken into the index in its stream's order: readable, or damage and why.
void Trace::keep_checked(const PacketBytes& bytes, const CheckedPacket& checked, IndexedStream& indexed) const {
  const uint8_t* packet = bytes.data + checked.offset;
  const auto& header = *reinterpret_cast<const format::PacketHeader*>(packet);
  const uint64_t offset = bytes.base + checked.offset;
  std::string problem = checked.header_problem;
  if (problem.empty() && header.events_discarded.load(std::memory_order_relaxed) < indexed.last_discarded)
    problem = fmt::format("events_discarded decreases (it is cumulative) (at offset {})",
                          offset + offsetof(format::PacketHeader, events_discarded));
  if (problem.empty()) problem = checked.content_problem;
  if (problem.empty()) {
    indexed.readable.push_back({bytes.file, bytes.unit, offset});
    indexed.event_types.push_back(checked.types);
    indexed.last_discarded = header.events_discarded.load(std::memory_order_relaxed);
    indexed.info.thread_id = header.thread_id;
    ++indexed.info.packets;
    return;
  }
  // Its events can still be counted when only the header's other fields are wrong.
  const uint64_t content = format::content_bytes(header);
  std::optional<uint64_t> events;
  if (content >= format::kPacketHeaderSize && content <= checked.bytes) events = format::count_events(packet, content);
  indexed.damage.push_back({indexed.info.files[bytes.file], offset, checked.bytes, events, problem});
}

const uint8_t* Trace::packet_at(size_t stream, size_t packet, std::shared_ptr<ReadPosition>& position) const {
  const PacketPlace& place = readable_packets_[stream][packet];
  const StreamFile& file = *files_[stream][place.file];
  if (!position) position = std::make_shared<ReadPosition>();
  if (!file.compressed) {
    if (release_pages_) position->behind.at(file.mapped.get(), place.offset);
    return file.mapped->data() + place.offset;
  }
  const compression::UnitPlace& unit = file.units[place.unit];
  if (release_pages_) position->behind.at(file.mapped.get(), unit.offset);
  if (position->file != place.file || position->unit != place.unit) {
    position->file = position->unit = UINT32_MAX;
    try {
      position->raw = position->decoder.decode(file.bytes(), unit).data();
    } catch (const compression::UnitError& failure) {
      throw TraceError(streams_[stream].files[place.file], unit.offset,
                       unit_damage(fmt::format("{}, where it decoded when the trace was opened (the file changed)",
                                               failure.what())));
    }
    position->file = place.file;
    position->unit = place.unit;
  }
  return position->raw + (place.offset - unit.raw_offset);
}

// What makes a framed packet's header unreadable (but for its discard count, which needs the
// packet before), or an empty string.
std::string Trace::header_problem(const uint8_t* packet, uint64_t offset) const {
  const std::string problem = format::check_packet_header(packet, std::numeric_limits<size_t>::max());
  if (!problem.empty()) return problem;
  const auto& header = *reinterpret_cast<const format::PacketHeader*>(packet);
  if (header.stream_id != format::kStreamThread)
    return fmt::format("stream id {} where thread events were expected", header.stream_id);
  if (std::memcmp(header.uuid, description_.uuid.data(), 16) != 0)
    return fmt::format("packet uuid differs from the metadata's (at offset {})",
                       offset + offsetof(format::PacketHeader, uuid));
  return {};
}

// What makes a packet's events unreadable, or an empty string. Walks every event as the decoder
// would, so that the cursors never meet a fault after they have handed out part of a packet, and
// notes the packet's event types.
std::string Trace::content_problem(const uint8_t* packet, uint64_t offset, uint32_t& event_types) const {
  const auto& header = *reinterpret_cast<const format::PacketHeader*>(packet);
  if (format::events_decode(packet, format::content_bytes(header), event_types)) return {};
  // Damage (rare): the decoder, which the cursors will use, has the last word and says what and where.
  try {
    format::PacketDecoder decoder(packet, format::content_bytes(header));
    format::RawEvent event;
    while (decoder.next(event)) event_types |= format::read_type_bits(*event.spec);
  } catch (const format::DecodeError& error) {
    return fmt::format("{} (at offset {})", error.what(), offset + error.offset());
  }
  return {};
}

}  // namespace chronicle::reader
