// The files of a trace, as the collector writes them: stream files (plain packets, or compressed
// units), rotation into chunks with its disk reserve, the definitions, the metadata and the
// no-channel stream. The draining of the rings that feeds them is in collector.cpp.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string_view>

#include "collector/collector.hpp"
#include "compression/ctfz.hpp"
#include "format/clock.hpp"
#include "format/metadata.hpp"
#include "format/output_file.hpp"
#include "format/packet_decoder.hpp"

namespace chronicle::collector {
namespace {

using format::ChannelDescriptor;
using format::PacketHeader;
using format::ShmHeader;

// Returns 0, or the errno of the write that failed.
int write_all(int fd, const iovec* parts, int count) {
  std::vector<iovec> left(parts, parts + count);
  size_t index = 0;
  while (index < left.size()) {
    ssize_t n = ::writev(fd, left.data() + index, static_cast<int>(left.size() - index));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    size_t written = static_cast<size_t>(n);
    while (index < left.size() && written >= left[index].iov_len) written -= left[index++].iov_len;
    if (index < left.size()) {
      left[index].iov_base = static_cast<uint8_t*>(left[index].iov_base) + written;
      left[index].iov_len -= written;
    }
  }
  return 0;
}

// Under a random temporary name, renamed over `path`: the tools' one rule for a file
// (format::PrivateFile). Dot names: readers skip what a crash leaves behind.
void write_file(const std::string& path, const void* data, size_t size) {
  format::write_private_file(path, std::string_view(static_cast<const char*>(data), size), format::WhenExists::replace);
}

// The room in `directory`, as a hidden file whose name goes into `path`: 0, or why not (errno).
int reserve_room_in(const std::string& directory, int64_t bytes, std::string& path) {
  path = directory + "/.reserve.XXXXXX";
  const int fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) return errno;
  const int failure = ::posix_fallocate(fd, 0, bytes);
  ::close(fd);
  if (failure != 0) ::unlink(path.c_str());
  return failure;
}

}  // namespace

// A file of the trace (metadata, definitions, the no-channel stream), compressed when the trace
// is: `packets` says whether it holds CTF packets (else text).
void Collector::write_trace_file(const std::string& name, const void* data, size_t size, bool packets) {
  if (!options_.compress) return write_file(files_dir_ + "/" + name, data, size);
  std::vector<uint8_t> unit;
  compression::append_unit({static_cast<const uint8_t*>(data), size},
                           packets ? compression::UnitContent::packets : compression::UnitContent::bytes, 0, unit);
  write_file(files_dir_ + "/" + name + std::string(compression::kSuffix), unit.data(), unit.size());
}

// Writes a compressed stream's pending packets as one unit. A unit the disk does not take is
// counted as unwritten, packet by packet, as write_packet counts a plain packet.
void Collector::flush_unit(StreamFile& stream) {
  if (stream.unit.empty()) return;
  std::vector<uint8_t>& encoded = encoded_;
  encoded.clear();
  unit_writer_->append(stream.unit, compression::UnitContent::packets,
                       static_cast<uint32_t>(std::min<uint64_t>(stream.unit_events, UINT32_MAX)), encoded);
  iovec part{encoded.data(), encoded.size()};
  if (write_all(stream.fd, &part, 1) != 0) {
    if (::ftruncate(stream.fd, static_cast<off_t>(stream.size)) != 0 ||
        ::lseek(stream.fd, static_cast<off_t>(stream.size), SEEK_SET) < 0)
      throw std::runtime_error(
          fmt::format("cannot write {} nor cut back its partial unit: {}", stream.name, std::strerror(errno)));
    stats_.packets -= stream.unit_packets;
    stats_.events -= stream.unit_events;
    stats_.bytes -= stream.unit_content;
    stats_.packets_unwritten += stream.unit_packets;
    stats_.events_unwritten += stream.unit_events;
    stats_.bytes_unwritten += stream.unit_content;
  } else {
    stream.size += encoded.size();
    chunk_bytes_ += encoded.size();
    stream.last_discarded = std::max(stream.last_discarded, stream.unit_discarded);
  }
  pending_unit_bytes_ -= stream.unit.size();
  stream.unit_first_slot.clear();
  stream.unit.clear();
  stream.unit_events = stream.unit_packets = stream.unit_content = stream.unit_discarded = 0;
}

void Collector::flush_units(bool only_old) {
  const auto now = std::chrono::steady_clock::now();
  for (auto& [instance, stream] : streams_)
    if (!stream.unit.empty() && (!only_old || now - stream.unit_started >= kCompressedUnitAge)) flush_unit(stream);
}

// Closes the current chunk as a whole trace (its definitions and metadata as of now) and begins
// the next. Stream files keep their names from chunk to chunk, so that a reader joins them.
void Collector::rotate() {
  // The next chunk first, with its room for the last files: where it cannot be made (a full disk),
  // the current chunk goes on with the room it holds, and a check kChunkRetryInterval later tries
  // again. Nothing is lost by it but the bound of the chunk's size; --max-size may free room
  // meanwhile.
  remove_oldest_chunks();
  const std::string next = output_dir_ + "/" + chunk_name(chunk_number_ + 1);
  std::string next_reserve;
  try {
    create_private_directory(next);
    if (const int failure = reserve_room_in(next, kRoomForLastFiles, next_reserve); failure != 0) {
      std::error_code ignored;
      std::filesystem::remove_all(next, ignored);
      throw std::runtime_error(fmt::format("cannot begin {}: {}", next, std::strerror(failure)));
    }
  } catch (const std::exception& error) {
    ++stats_.chunk_begin_failures;
    stats_.chunk_begin_failure = error.what();
    next_chunk_try_ = std::chrono::steady_clock::now() + kChunkRetryInterval;
    return;
  }
  flush_units(false);
  for (auto& [instance, stream] : streams_) {
    if (stream.fd >= 0) ::close(stream.fd);
    stream.fd = -1;
    stream.size = 0;
  }
  write_last_files();
  ++chunk_number_;
  ++stats_.chunks;
  files_dir_ = next;
  reserve_path_ = next_reserve;
  chunk_started_ = std::chrono::steady_clock::now();
  chunk_bytes_ = 0;
  strings_written_ = 0;
  // Written again at the chunk's end (write_last_files), which tells a failure that lasts.
  try {
    write_metadata(false);
  } catch (const std::exception&) {
  }
  write_new_definitions();
  remove_oldest_chunks();
}

static uint64_t directory_bytes(const std::filesystem::path& directory) {
  uint64_t total = 0;
  std::error_code error;
  // Not the hidden files: the room reserved for the last files is given back at the chunk's end.
  for (const auto& entry : std::filesystem::directory_iterator(directory, error))
    if (entry.is_regular_file(error) && !entry.path().filename().string().starts_with("."))
      total += entry.file_size(error);
  return total;
}

void Collector::remove_oldest_chunks() {
  if (options_.max_size == 0) return;
  namespace fs = std::filesystem;
  std::vector<uint64_t> chunks;  // numbers, oldest first
  std::map<uint64_t, uint64_t> sizes;
  uint64_t total = 0;
  for (uint64_t number = chunk_number_; number >= 1; --number) {
    const fs::path chunk = fs::path(output_dir_) / chunk_name(number);
    std::error_code error;
    if (!fs::is_directory(chunk, error)) break;
    sizes[number] = directory_bytes(chunk);
    total += sizes[number];
  }
  for (auto& [number, size] : sizes) {
    if (total <= options_.max_size || number == chunk_number_) break;
    std::error_code error;
    fs::remove_all(fs::path(output_dir_) / chunk_name(number), error);
    if (error) break;
    total -= size;
    ++stats_.chunks_removed;
  }
}

// Streams that fill the disk would leave no room for the last definitions and metadata, without
// which the packets written cannot be read (or their losses told): that room is taken now.
void Collector::reserve_room() {
  std::string path;
  if (reserve_room_in(files_dir_, kRoomForLastFiles, path) == 0) reserve_path_ = path;
}

void Collector::release_room() {
  if (!reserve_path_.empty()) ::unlink(reserve_path_.c_str());
  reserve_path_.clear();
}

// The definitions and the metadata after the last packet. A file that cannot be written keeps its
// previous version (the definitions as of the last drain, the metadata of the start), and the
// stats say which and why rather than losing the packets already written with an exception.
void Collector::write_last_files() {
  write_units_for_the_count();
  stats_.discards_unwritten = 0;
  for (const auto& [instance, stream] : streams_)
    stats_.discards_unwritten += stream.seen_discarded - stream.last_discarded;
  release_room();
  try {
    write_strings();
  } catch (const std::exception& error) {
    stats_.files_unwritten.push_back(error.what());
  }
  try {
    write_metadata(true);
  } catch (const std::exception& error) {
    stats_.files_unwritten.push_back(error.what());
  }
}

std::map<std::string, uint64_t> Collector::committed_sizes() const {
  const std::string chunk = writing_chunk();
  const std::string prefix = chunk.empty() ? chunk : chunk + "/";
  std::map<std::string, uint64_t> sizes;
  for (const auto& [instance, stream] : streams_)
    if (stream.fd >= 0) sizes[prefix + stream.name] = stream.size;
  return sizes;
}

std::string Collector::writing_chunk() const {
  return chunk_number_ == 0 ? std::string() : chunk_name(chunk_number_);
}

Collector::StreamFile& Collector::stream_for(const PacketHeader& packet) {
  StreamFile& stream = streams_[packet.stream_instance_id];
  if (stream.fd >= 0) return stream;
  const std::string_view compressed = options_.compress ? compression::kSuffix : std::string_view();
  if (options_.compress && stream.unit.capacity() == 0) stream.unit = unit_writer_->take_buffer();
  if (!stream.name.empty()) {
    // Its file in a new chunk, under the name it had in the first.
    const std::string path = files_dir_ + "/" + stream.name;
    stream.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (stream.fd < 0) throw std::runtime_error(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
    return stream;
  }
  // A new file each time (O_EXCL never opens what is there, a planted link included): a name
  // taken by an earlier thread of the same id, or by anyone else, moves on to the next suffix.
  std::string path = fmt::format("{}/thread-{}{}", files_dir_, packet.thread_id, compressed);
  for (int suffix = 2;; ++suffix) {
    // A name an earlier stream had in an earlier chunk is taken too: a reader joins files by name.
    const bool taken = names_taken_.contains(std::filesystem::path(path).filename().string());
    stream.fd = taken ? -1 : ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (stream.fd >= 0) {
      stream.name = std::filesystem::path(path).filename().string();
      names_taken_.insert(stream.name);
      return stream;
    }
    if ((!taken && errno != EEXIST) || suffix > 10'000)
      throw std::runtime_error(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
    path = fmt::format("{}/thread-{}-{}{}", files_dir_, packet.thread_id, suffix, compressed);
  }
}

void Collector::count_events(const uint8_t* packet, uint64_t content) {
  // Sizes only: decoding whole events to count them was most of `record`'s CPU time.
  if (auto events = format::count_events(packet, content)) {
    stats_.events += *events;
  } else {
    ++stats_.decode_errors;
  }
}

// Writes one packet trimmed to its content: on disk packet_size = content_size, with the end
// time and discard count as read (they may be newer than the copy's header).
void Collector::write_packet(uint32_t channel, const uint8_t* packet, uint64_t content, uint64_t timestamp_end,
                             uint64_t discarded, std::optional<uint64_t> known_events) {
  PacketHeader header_copy;
  std::memcpy(static_cast<void*>(&header_copy), packet, sizeof header_copy);
  const uint64_t packet_size = format::padded_packet_size(content);
  header_copy.content_size_bits.store(content * 8, std::memory_order_relaxed);
  header_copy.packet_size_bits = packet_size * 8;
  header_copy.timestamp_end.store(std::max(timestamp_end, header_copy.timestamp_begin), std::memory_order_relaxed);
  header_copy.events_discarded.store(discarded, std::memory_order_relaxed);
  StreamFile& stream = stream_for(header_copy);
  header_copy.packet_seq_num.store(header_copy.packet_seq_num.load(std::memory_order_relaxed) + stream.seq_shift,
                                   std::memory_order_relaxed);
  if (stream.written_before && header_copy.packet_seq_num.load(std::memory_order_relaxed) <= *stream.written_before)
    return;
  static const uint8_t kZeros[format::kPacketAlignment] = {};
  iovec parts[3] = {{&header_copy, sizeof header_copy},
                    {const_cast<uint8_t*>(packet) + format::kPacketHeaderSize, content - format::kPacketHeaderSize},
                    {const_cast<uint8_t*>(kZeros), packet_size - content}};
  // Every event takes at least 4 bytes: a larger count is damage, and the packet is walked.
  const bool count_known =
      known_events && *known_events <= (content - format::kPacketHeaderSize) / format::kCompactHeaderSize;
  if (options_.compress) {
    stream.unit_first_slot.try_emplace(channel, consumed_[channel]);
    return add_to_unit(stream, parts, count_known ? known_events : std::nullopt);
  }
  if (write_all(stream.fd, parts, 3) != 0) {
    // A disk that is full now may have room later: count this packet as lost and go on. The
    // part of it that was written goes, or the packet after it would be read as its rest (and a
    // packet running past the end of its file makes babeltrace2 refuse the whole trace).
    if (::ftruncate(stream.fd, static_cast<off_t>(stream.size)) != 0 ||
        ::lseek(stream.fd, static_cast<off_t>(stream.size), SEEK_SET) < 0)
      throw std::runtime_error(fmt::format("cannot write the stream of channel {} nor cut back its partial packet: {}",
                                           channel, std::strerror(errno)));
    ++stats_.packets_unwritten;
    stats_.bytes_unwritten += content;
    stream.seen_discarded = std::max(stream.seen_discarded, discarded);
    if (count_known) {
      stats_.events_unwritten += *known_events;
    } else if (auto events = format::count_events(packet, content)) {
      stats_.events_unwritten += *events;
    }
    return;
  }
  stream.size += packet_size;
  chunk_bytes_ += packet_size;
  stream.last_discarded = std::max(stream.last_discarded, discarded);
  stream.seen_discarded = std::max(stream.seen_discarded, discarded);
  stream.last_seq_written = header_copy.packet_seq_num.load(std::memory_order_relaxed);
  latest_timestamp_ = std::max(latest_timestamp_, header_copy.timestamp_end.load(std::memory_order_relaxed));
  if (count_known)
    stats_.events += *known_events;
  else
    count_events(packet, content);
  stats_.bytes += content;
  ++stats_.packets;
}

// Compressed: the packet joins its stream's unit, written once about kCompressedUnitBytes are
// there (or they are kCompressedUnitAge old). Counted as written now, and moved to the unwritten
// counts if the unit cannot be written.
void Collector::add_to_unit(StreamFile& stream, const iovec* parts, std::optional<uint64_t> known_events) {
  if (stream.unit.empty()) stream.unit_started = std::chrono::steady_clock::now();
  const size_t start = stream.unit.size();
  for (int i = 0; i < 3; ++i) {
    const auto* bytes = static_cast<const uint8_t*>(parts[i].iov_base);
    stream.unit.insert(stream.unit.end(), bytes, bytes + parts[i].iov_len);
  }
  const uint8_t* packet = stream.unit.data() + start;
  const auto& header = *reinterpret_cast<const PacketHeader*>(packet);
  const uint64_t content = format::content_bytes(header);
  uint64_t events = 0;
  if (known_events) {
    events = *known_events;
  } else if (auto counted = format::count_events(packet, content)) {
    events = *counted;
  } else {
    ++stats_.decode_errors;
  }
  stream.unit_discarded = std::max(stream.unit_discarded, header.events_discarded.load(std::memory_order_relaxed));
  stream.seen_discarded = std::max(stream.seen_discarded, stream.unit_discarded);
  stream.last_seq_written = header.packet_seq_num.load(std::memory_order_relaxed);
  latest_timestamp_ = std::max(latest_timestamp_, header.timestamp_end.load(std::memory_order_relaxed));
  stats_.events += events;
  stats_.bytes += content;
  ++stats_.packets;
  stream.unit_events += events;
  stream.unit_content += content;
  ++stream.unit_packets;
  pending_unit_bytes_ += stream.unit.size() - start;
  // A unit holds its packets' slots (unit_first_slot): at most a quarter of a ring, where the
  // writer would wake the collector anyway.
  if (stream.unit.size() >= kCompressedUnitBytes || pending_unit_bytes_ >= kCompressedPendingBytes ||
      4 * stream.unit_packets >= mapping_.geometry().packets_per_channel)
    flush_unit(stream);
}

// Compressed: the oldest time in the packets held for units not yet written (their first
// packets' beginnings); the largest time when none is held.
uint64_t Collector::pending_units_begin() const {
  uint64_t begin = std::numeric_limits<uint64_t>::max();
  for (const auto& [instance, stream] : streams_)
    if (stream.unit.size() >= format::kPacketHeaderSize)
      begin = std::min(begin, reinterpret_cast<const PacketHeader*>(stream.unit.data())->timestamp_begin);
  return begin;
}

bool Collector::chunk_is_full() const {
  const bool by_size = options_.rotate_bytes > 0 && chunk_bytes_ >= options_.rotate_bytes;
  if (!by_size && options_.rotate_every.count() == 0) return false;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_chunk_try_) return false;  // the last try failed a moment ago
  return by_size || now - chunk_started_ >= options_.rotate_every;
}

// Compressed: the pending units are written before the discards are counted, which counts
// those written only.
void Collector::write_units_for_the_count() {
  try {
    flush_units(false);
  } catch (const std::exception& error) {
    stats_.files_unwritten.push_back(error.what());
  }
}

uint64_t Collector::discarded_in_streams() const {
  uint64_t sum = 0;
  for (const auto& [instance, stream] : streams_) sum += stream.last_discarded;
  return sum;
}

format::TraceLosses CollectorStats::losses() const {
  format::TraceLosses out;
  out.events_no_channel = events_no_channel;
  out.definitions_dropped = definitions_dropped;
  out.packets_undecodable = decode_errors;
  out.packets_unwritten = packets_unwritten;
  out.events_unwritten = events_unwritten + discards_unwritten;
  out.bytes_unwritten = bytes_unwritten;
  return out;
}

// Events of threads that got no channel are lost before any packet could count them. So that
// babeltrace2 reports them as it reports other discarded events, they get a stream of their own:
// two empty packets of the thread stream class, the first counting 0 and the second all of them
// (events_discarded is cumulative; a first packet with a count would read "may have discarded").
void Collector::write_no_channel_stream() {
  const ShmHeader& header = mapping_.header();
  stats_.events_no_channel = header.events_no_channel.load(std::memory_order_relaxed);
  stats_.definitions_dropped = header.strings_dropped.load(std::memory_order_relaxed);
  stats_.discarded += stats_.events_no_channel;
  if (stats_.events_no_channel == 0) return;
  PacketHeader packets[2] = {};
  for (uint64_t seq = 0; seq < 2; ++seq) {
    PacketHeader& packet = packets[seq];
    packet.magic = format::kPacketMagic;
    std::memcpy(packet.uuid, header.uuid, 16);
    packet.stream_id = format::kStreamThread;
    packet.stream_instance_id = mapping_.geometry().max_channels;  // no channel has this index
    packet.timestamp_begin = mapping_.clock().ticks_at_start;
    packet.timestamp_end.store(
        seq == 0 ? mapping_.clock().ticks_at_start : std::max(latest_timestamp_, mapping_.clock().ticks_at_start),
        std::memory_order_relaxed);
    packet.content_size_bits.store(format::kPacketHeaderSize * 8, std::memory_order_relaxed);
    packet.packet_size_bits = format::padded_packet_size(format::kPacketHeaderSize) * 8;
    packet.packet_seq_num.store(seq, std::memory_order_relaxed);
    packet.events_discarded.store(seq == 0 ? 0 : stats_.events_no_channel, std::memory_order_relaxed);
    packet.thread_id = 0;  // no thread has id 0
    packet.pid = static_cast<uint32_t>(header.pid);
  }
  static_assert(format::padded_packet_size(format::kPacketHeaderSize) == sizeof(PacketHeader));
  write_trace_file(std::string(format::kNoChannelStreamName), packets, sizeof packets, true);
}

// While the program runs: a disk that fills up later still leaves the definitions of the packets
// written before (a failure here is tried again by the next drain, and reported by finish()).
void Collector::write_new_definitions() {
  const ShmHeader& header = mapping_.header();
  const auto& live = *reinterpret_cast<const PacketHeader*>(mapping_.base() + header.strings_offset);
  const uint64_t content = format::content_bytes(live);
  if (content <= strings_written_) return;
  try {
    write_strings();
    strings_written_ = content;
  } catch (const std::exception&) {
  }
}

void Collector::write_strings() {
  const uint8_t* packet = mapping_.strings();
  const auto& live = *reinterpret_cast<const PacketHeader*>(packet);
  const uint64_t content =
      std::clamp<uint64_t>(format::content_bytes(live), format::kPacketHeaderSize, mapping_.geometry().strings_size);
  std::vector<uint8_t> copy(format::padded_packet_size(content), 0);
  // Writers append definitions while this runs: the header's live fields are read as the atomics
  // they are, and only the definitions that content_size (acquired) covers are copied as bytes.
  PacketHeader header_copy;
  std::memcpy(static_cast<void*>(&header_copy), packet, offsetof(PacketHeader, timestamp_end));
  header_copy.timestamp_end.store(live.timestamp_end.load(std::memory_order_relaxed), std::memory_order_relaxed);
  header_copy.content_size_bits.store(content * 8, std::memory_order_relaxed);
  header_copy.packet_size_bits = copy.size() * 8;
  header_copy.packet_seq_num.store(live.packet_seq_num.load(std::memory_order_relaxed), std::memory_order_relaxed);
  header_copy.events_discarded.store(live.events_discarded.load(std::memory_order_relaxed), std::memory_order_relaxed);
  header_copy.thread_id = live.thread_id;
  header_copy.pid = live.pid;
  std::memcpy(copy.data(), static_cast<const void*>(&header_copy), sizeof header_copy);
  std::memcpy(copy.data() + format::kPacketHeaderSize, packet + format::kPacketHeaderSize,
              content - format::kPacketHeaderSize);
  write_trace_file("strings", copy.data(), copy.size(), true);
}

namespace {

// The kernel's id of this boot: one clock for every trace recorded on this machine until it
// reboots, whatever the hostname says (and the same across network namespaces). "" when the
// file cannot be read. Kept in a char array, which no exit handler destroys: a collector may
// write its last metadata while the process exits.
std::string_view boot_id() {
  static const std::array<char, 65> id = [] {
    std::array<char, 65> text{};
    std::ifstream file("/proc/sys/kernel/random/boot_id");
    std::string line;
    std::getline(file, line);
    if (line.size() < text.size()) std::copy(line.begin(), line.end(), text.begin());
    return text;
  }();
  return std::string_view(id.data());
}

}  // namespace

void Collector::write_metadata(bool refine_clock) {
  const ShmHeader& header = mapping_.header();
  format::TraceDescription trace;
  std::memcpy(trace.uuid.data(), header.uuid, 16);
  trace.clock = mapping_.clock();
  if (refine_clock) trace.clock.frequency_hz = recorder::refined_frequency(mapping_.clock());
  trace.pid = header.pid;
  trace.process_name.assign(header.process_name, strnlen(header.process_name, sizeof header.process_name));
  trace.hostname.assign(header.hostname, strnlen(header.hostname, sizeof header.hostname));
  trace.host_id.assign(boot_id());
  trace.policy = header.policy;
  trace.losses = stats_.losses();
  const std::string text = format::make_metadata(trace);
  write_trace_file("metadata", text.data(), text.size(), false);
}

}  // namespace chronicle::collector
