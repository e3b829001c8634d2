#include "collector/collector.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <fmt/format.h>
#include <signal.h>
#include <algorithm>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include "compression/ctfz.hpp"
#include "format/clock.hpp"
#include "format/input_error.hpp"
#include "format/metadata.hpp"
#include "format/output_file.hpp"
#include "format/packet_decoder.hpp"
#include "shm/mapping_check.hpp"
#include "shm/shm_file.hpp"

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer's runtime: the calling thread's memory accesses are not recorded in between.
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#endif

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

uint64_t stream_instance_of(const uint8_t* packet) {
  return reinterpret_cast<const PacketHeader*>(packet)->stream_instance_id;
}

// Copies bytes of a ring slot that only a writer reusing the slot changes (the flight
// recorder's seqlock, session_channels.cpp open_packet): a copy that overlapped the rewrite is thrown
// away by the check of packet_seq_num after it (copy_slot). ThreadSanitizer cannot see that
// check: the writer's stores after its fence are ordered with nothing the reader does, so it
// would report the overlap the check is there for. Under it, these reads are not recorded; the
// writer's side, and the build without it, are unchanged.
void copy_under_seqlock(void* into, const void* from, size_t size) {
#if defined(__SANITIZE_THREAD__)
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  std::memcpy(into, from, size);
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
#else
  std::memcpy(into, from, size);
#endif
}

// The header of a live slot. The fields its writer stores while the packet is open (the end
// time, the content size, the discard count: commit_event, note_discarded, close_packet) and
// those it stores atomically when it reuses the slot (the sequence number, the start time) are
// loaded as atomics: a memcpy would read them while they are stored, a data race even though the
// copy's values of them are replaced before use. The others change only while the slot is
// rewritten.
void copy_live_header(const PacketHeader& live, PacketHeader& into) {
  constexpr auto relaxed = std::memory_order_relaxed;
  copy_under_seqlock(&into, &live, offsetof(PacketHeader, timestamp_begin));
  into.timestamp_begin = std::atomic_ref<uint64_t>(const_cast<uint64_t&>(live.timestamp_begin)).load(relaxed);
  into.timestamp_end.store(live.timestamp_end.load(relaxed), relaxed);
  into.content_size_bits.store(live.content_size_bits.load(relaxed), relaxed);
  copy_under_seqlock(&into.packet_size_bits, &live.packet_size_bits, sizeof live.packet_size_bits);
  into.packet_seq_num.store(live.packet_seq_num.load(relaxed), relaxed);
  into.events_discarded.store(live.events_discarded.load(relaxed), relaxed);
  copy_under_seqlock(&into.thread_id, &live.thread_id, format::kPacketHeaderSize - offsetof(PacketHeader, thread_id));
}

}  // namespace

// Step 14 of include/chronicle/detail/ring_protocol.md, with why a missed wake-up costs at most
// `timeout`.
void Collector::wait_for_work(std::chrono::microseconds timeout) {
  ShmHeader& header = mapping_.header();
  header.collector_waiting.store(1, std::memory_order_seq_cst);
  const uint32_t requests = header.drain_requests.load(std::memory_order_acquire);
  // A writer that filled its ring before it could see us waiting did not wake us: look first.
  bool pending = false;
  if (header.policy == format::BufferPolicy::stream) {
    const uint32_t channels = mapping_.channel_count();
    for (uint32_t channel = 0; channel < channels && !pending; ++channel)
      pending = mapping_.packets_committed(channel) > consumed_[channel];
  }
  if (!pending) {
    shm::wait_for_drain_request(header, requests, timeout);
  }
  header.collector_waiting.store(0, std::memory_order_relaxed);
}

std::string shared_directory_problem(const std::string& directory) {
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) return {};
  if (info.st_uid != ::geteuid()) return fmt::format("{} belongs to another user (uid {})", directory, info.st_uid);
  if (info.st_mode & (S_IWGRP | S_IWOTH))
    return fmt::format("{} is writable by {} (mode {:o})", directory,
                       info.st_mode & S_IWOTH ? "every user" : "its group", info.st_mode & 07777);
  return {};
}

std::shared_ptr<compression::UnitWriter> warmed_unit_writer(size_t packet_size, size_t buffers) {
  auto writer = std::make_shared<compression::UnitWriter>();
  writer->warm_up(kCompressedUnitBytes + packet_size, buffers);
  return writer;
}

std::string chunk_name(uint64_t number) {
  return fmt::format("chunk-{:06}", number);
}

Collector::Collector(SessionMapping& mapping, std::string output_dir)
    : Collector(mapping, std::move(output_dir), CollectorOptions{}) {}

Collector::Collector(SessionMapping& mapping, std::string output_dir, CollectorOptions options)
    : mapping_(mapping), output_dir_(std::move(output_dir)), options_(options), files_dir_(output_dir_) {
  create_private_directory(output_dir_);
  if (options_.rotate_bytes > 0 || options_.rotate_every.count() > 0) {
    chunk_number_ = 1;
    files_dir_ = output_dir_ + "/" + chunk_name(chunk_number_);
    create_private_directory(files_dir_);
    chunk_started_ = std::chrono::steady_clock::now();
    stats_.chunks = 1;
  }
  consumed_.assign(mapping_.geometry().max_channels, 0);
  cuts_.assign(mapping_.geometry().max_channels, OpenPacketCut{});
  scratch_.resize(mapping_.geometry().packet_size);
  if (options_.compress)
    unit_writer_ = options_.unit_writer ? options_.unit_writer : warmed_unit_writer(mapping_.geometry().packet_size, 1);
  if (options_.append) reopen_stream_files();
  write_metadata(false);
  reserve_room();
}

Collector::~Collector() {
  // Normally finish() wrote every unit; after an exception, what is left is written if it can be.
  try {
    flush_units(false);
  } catch (const std::exception&) {
  }
  for (auto& [channel, stream] : streams_)
    if (stream.fd >= 0) ::close(stream.fd);
  release_room();
}

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

void Collector::hand_back_written() {
  for (uint32_t channel = 0; channel < mapping_.channel_count(); ++channel) {
    uint64_t written = consumed_[channel];
    for (const auto& [instance, stream] : streams_)
      if (const auto held = stream.unit_first_slot.find(channel); held != stream.unit_first_slot.end())
        written = std::min(written, held->second);
    ChannelDescriptor& desc = mapping_.channel(channel);
    // Only this collector stores the count (ring_protocol.md): relaxed to read its own value.
    if (written > desc.packets_consumed.load(std::memory_order_relaxed))
      desc.packets_consumed.store(written, std::memory_order_release);
  }
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

// How far in time the files will be complete once the closed packets are copied: the oldest
// time a writer may still record at. Per channel in use, under the slot's seqlock (session_channels.cpp,
// open_packet: packet_seq_num is kSeqRewriting while the header is written, then the packet's
// sequence number, stored with release):
//   - a packet open (slot `committed` holds packet `committed`): the thread records at or after
//     that packet's start;
//   - none open (the thread handed its packet over early, as the control thread does after each
//     sample, or its ring is full): at or after the end of its last closed packet, since a
//     thread's times never go back and a packet it opens later begins at its next event's time;
//   - a thread that takes a channel from now on: after this moment, and so after every packet
//     written so far.
// A channel being taken, or a slot being rewritten meanwhile, tells nothing: nothing more is
// complete this round.
uint64_t Collector::complete_bound() const {
  // With cuts (the live push), a channel whose events are all written (a thread waiting, with its
  // open packet cut, or none open) holds nothing back but an event its thread may be writing now:
  // one whose time it read at most a cut delay ago, as a trace point takes nanoseconds. Without
  // this, a thread that wrote once and then waited held the bound at its last event, and the
  // other threads' later events were not pushed until it wrote again or ended. The time is read
  // before the channels are looked at, so an event committed meanwhile is above it.
  std::optional<uint64_t> waiting_floor;
  if (options_.cut_open_packets_after.count() > 0) {
    const format::ClockCalibration& clock = mapping_.clock();
    const auto grace = static_cast<uint64_t>(std::chrono::duration<double>(options_.cut_open_packets_after).count() *
                                             static_cast<double>(clock.frequency_hz));
    const uint64_t now = recorder::read_ticks_now(clock);
    if (now > grace) waiting_floor = now - grace;
  }
  uint64_t bound = std::numeric_limits<uint64_t>::max();
  const uint32_t channels = mapping_.channel_count();
  for (uint32_t channel = 0; channel < channels; ++channel) {
    const ChannelDescriptor& desc = mapping_.channel(channel);
    const auto state = static_cast<format::ChannelState>(desc.state.load(std::memory_order_acquire));
    if (state == format::ChannelState::closed) continue;
    if (state != format::ChannelState::active) return complete_below_;
    const uint64_t committed = mapping_.packets_committed(channel);
    std::optional<uint64_t> from = stable_packet_time(channel, committed, PacketTime::begin);
    if (!from && committed > 0) from = stable_packet_time(channel, committed - 1, PacketTime::end);
    if (!from) return complete_below_;
    // An open packet cut in an earlier round: its events up to the cut's last one are written.
    if (cuts_[channel].has_written(committed)) from = std::max(*from, cuts_[channel].last_ticks);
    if (waiting_floor && holds_nothing_unwritten(channel, committed)) from = std::max(*from, *waiting_floor);
    bound = std::min(bound, *from);
  }
  return bound == std::numeric_limits<uint64_t>::max() ? latest_timestamp_ : bound;
}

// Whether every event channel `channel` has committed is written: its closed packets (the first
// `committed`), and of its open packet, if it has one, what the writer has published of it.
bool Collector::holds_nothing_unwritten(uint32_t channel, uint64_t committed) const {
  if (consumed_[channel] != committed) return false;
  const auto& open = *reinterpret_cast<const PacketHeader*>(mapping_.ring_slot(channel, committed));
  if (open.packet_seq_num.load(std::memory_order_acquire) != committed) return true;  // not opened yet
  return format::content_bytes(open) <= cuts_[channel].unwritten_from(committed);
}

// Packet `seq`'s start or end time as its slot holds it, if the slot holds that packet before and
// after the read (the seqlock).
std::optional<uint64_t> Collector::stable_packet_time(uint32_t channel, uint64_t seq, PacketTime which) const {
  auto& header = *reinterpret_cast<PacketHeader*>(mapping_.ring_slot(channel, seq));
  if (header.packet_seq_num.load(std::memory_order_acquire) != seq) return std::nullopt;
  // Atomic (plain loads on x86): the writer stores them while it fills the packet.
  const uint64_t time = which == PacketTime::begin
                            ? std::atomic_ref<uint64_t>(header.timestamp_begin).load(std::memory_order_relaxed)
                            : header.timestamp_end.load(std::memory_order_relaxed);
  format::memory_fence(std::memory_order_acquire);
  if (header.packet_seq_num.load(std::memory_order_relaxed) != seq) return std::nullopt;
  return time;
}

size_t Collector::drain() {
  ShmHeader& header = mapping_.header();
  if (header.policy != format::BufferPolicy::stream) return 0;
  // Before the definitions: every site an event older than the bound names is defined by now.
  const uint64_t bound = complete_bound();
  write_new_definitions();
  size_t copied = 0;
  const SessionGeometry& geometry = mapping_.geometry();
  const uint32_t channels = mapping_.channel_count();
  for (uint32_t channel = 0; channel < channels; ++channel) {
    ChannelDescriptor& desc = mapping_.channel(channel);
    // A stream writer never runs more than a ring ahead of what was consumed: a count past that
    // is damage, and at most one ring's worth of it is looked at.
    const uint64_t committed =
        std::min(mapping_.packets_committed(channel), consumed_[channel] + geometry.packets_per_channel);
    for (uint64_t seq = consumed_[channel]; seq < committed; ++seq) {
      const uint8_t* packet = mapping_.ring_slot(channel, seq);
      const auto& packet_header = *reinterpret_cast<const PacketHeader*>(packet);
      // Read once and bounded by the slot: the check below reads the header again.
      const uint64_t content =
          std::clamp<uint64_t>(format::content_bytes(packet_header), format::kPacketHeaderSize, geometry.packet_size);
      if (format::check_packet_header(packet, geometry.packet_size).empty() &&
          packet_header.packet_seq_num.load(std::memory_order_relaxed) == seq) {
        const uint64_t timestamp_end = packet_header.timestamp_end.load(std::memory_order_relaxed);
        const uint64_t discarded = packet_header.events_discarded.load(std::memory_order_relaxed);
        if (cuts_[channel].has_written(seq)) {
          // Cut while it was open: its rest, counted by walking it.
          std::memcpy(scratch_.data(), packet, content);
          const uint64_t rest = drop_written_part(channel, seq, scratch_.data(), content);
          write_packet(channel, scratch_.data(), rest, timestamp_end, discarded);
        } else {
          write_packet(channel, packet, content, timestamp_end, discarded,
                       mapping_.packet_event_count(channel, seq).load(std::memory_order_relaxed));
        }
        copied += content;
        // By packet, so that a chunk ends within a packet (or a unit) of the size asked for.
        if (chunk_number_ > 0 && chunk_is_full()) rotate();
      } else {
        ++stats_.decode_errors;
      }
      consumed_[channel] = seq + 1;
      // Hands the slot back to the writer (compressed: once its unit is written).
      if (!options_.compress) desc.packets_consumed.store(seq + 1, std::memory_order_release);
    }
    if (options_.cut_open_packets_after.count() > 0) cut_open_packet(channel);
  }
  if (options_.compress) {
    flush_units(true);
    hand_back_written();
  }
  if (chunk_number_ > 0 && chunk_is_full()) rotate();
  // The packets copied into units not yet written are not in the files either.
  complete_below_ = std::max(complete_below_, std::min(bound, pending_units_begin()));
  return copied;
}

// Cuts the channel's open packet when its events past the last cut have waited
// options_.cut_open_packets_after (CollectorOptions): they are written as a packet of their own,
// numbered as the open packet is, and the stream's later packets one further on. The packet is
// open (or closed but not consumed): its slot cannot be reused until this collector consumes it,
// and what its content size covers (acquire) stays as it is, so the copy needs no seqlock.
void Collector::cut_open_packet(uint32_t channel) {
  const uint64_t seq = mapping_.packets_committed(channel);
  if (seq != consumed_[channel]) return;  // closed packets wait first (the ring lapped this round's limit)
  OpenPacketCut& cut = cuts_[channel];
  if (cut.seq != seq) {
    cut = OpenPacketCut{};
    cut.seq = seq;
  }
  const uint8_t* packet = mapping_.ring_slot(channel, seq);
  const auto& live = *reinterpret_cast<const PacketHeader*>(packet);
  if (live.packet_seq_num.load(std::memory_order_acquire) != seq) return;  // not opened yet
  const uint64_t content = std::min<uint64_t>(format::content_bytes(live), mapping_.geometry().packet_size);
  const uint64_t from = cut.unwritten_from(seq);
  if (content <= from) {
    cut.waiting_since.reset();
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!cut.waiting_since) cut.waiting_since = now;
  if (now - *cut.waiting_since < options_.cut_open_packets_after) return;
  uint8_t* part = scratch_.data();
  copy_live_header(live, *reinterpret_cast<PacketHeader*>(part));
  std::memcpy(part + format::kPacketHeaderSize, packet + from, content - from);
  const uint64_t part_content = format::kPacketHeaderSize + content - from;
  auto& part_header = *reinterpret_cast<PacketHeader*>(part);
  if (cut.offset > 0) part_header.timestamp_begin = cut.last_ticks;
  part_header.content_size_bits.store(part_content * 8, std::memory_order_relaxed);
  // The mapping may be damaged or hostile (docs/guarantees.md): only a sound header is cut.
  if (!format::check_packet_header(part, mapping_.geometry().packet_size).empty() ||
      part_header.stream_id != format::kStreamThread)
    return;
  uint64_t last_ticks = part_header.timestamp_begin;
  uint64_t events = 0;
  try {
    format::PacketDecoder decoder(part, part_content);
    for (format::RawEvent event; decoder.next(event); ++events) last_ticks = event.ticks;
  } catch (const format::DecodeError&) {
    return;  // damaged: left for the packet's close, which writes it whole
  }
  if (live.packet_seq_num.load(std::memory_order_acquire) != seq) return;
  write_packet(channel, part, part_content, last_ticks, live.events_discarded.load(std::memory_order_relaxed), events);
  ++stream_for(part_header).seq_shift;
  cut.offset = content;
  cut.last_ticks = last_ticks;
  cut.waiting_since.reset();
}

uint64_t Collector::drop_written_part(uint32_t channel, uint64_t seq, uint8_t* packet, uint64_t content) {
  OpenPacketCut& cut = cuts_[channel];
  if (cut.seq != seq) return content;
  const uint64_t offset = cut.offset;
  const uint64_t last_ticks = cut.last_ticks;
  cut = OpenPacketCut{};  // written now: the channel's next packet starts uncut
  if (offset == 0) return content;
  const uint64_t rest = content > offset ? content - offset : 0;
  std::memmove(packet + format::kPacketHeaderSize, packet + offset, rest);
  reinterpret_cast<PacketHeader*>(packet)->timestamp_begin = last_ticks;
  return format::kPacketHeaderSize + rest;
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

// Copies the packet of sequence `seq` from its slot into `into` (packet_size bytes), checking
// with the seqlock that the writer did not reuse the slot meanwhile.
Collector::CopyResult Collector::copy_slot(uint32_t channel, uint64_t seq, uint8_t* into, PacketCopy& copy) {
  const uint32_t packet_size = mapping_.geometry().packet_size;
  const uint8_t* packet = mapping_.ring_slot(channel, seq);
  const auto& live = *reinterpret_cast<const PacketHeader*>(packet);
  if (live.packet_seq_num.load(std::memory_order_acquire) != seq) return CopyResult::overwritten;
  copy.seq = seq;
  copy.content = std::min<uint64_t>(format::content_bytes(live), packet_size);
  copy.discarded = live.events_discarded.load(std::memory_order_relaxed);
  copy_live_header(live, *reinterpret_cast<PacketHeader*>(into));
  // The events: published by the content size (acquire), or being rewritten (the check below).
  if (copy.content > format::kPacketHeaderSize)
    copy_under_seqlock(into + format::kPacketHeaderSize, packet + format::kPacketHeaderSize,
                       copy.content - format::kPacketHeaderSize);
  copy.timestamp_end = live.timestamp_end.load(std::memory_order_relaxed);
  format::memory_fence(std::memory_order_acquire);
  if (live.packet_seq_num.load(std::memory_order_relaxed) != seq) return CopyResult::overwritten;
  reinterpret_cast<PacketHeader*>(into)->content_size_bits.store(copy.content * 8, std::memory_order_relaxed);
  if (!format::check_packet_header(into, packet_size).empty()) return CopyResult::damaged;
  return CopyResult::copied;
}

// Copies packet `seq` and writes it if the copy is whole. Returns whether it did.
bool Collector::copy_stable(uint32_t channel, uint64_t seq, uint64_t discarded_at_least) {
  PacketCopy copy;
  const CopyResult result = copy_slot(channel, seq, scratch_.data(), copy);
  stats_.decode_errors += result == CopyResult::damaged;
  if (result != CopyResult::copied) return false;
  copy.content = drop_written_part(channel, seq, scratch_.data(), copy.content);
  write_packet(channel, scratch_.data(), copy.content, copy.timestamp_end,
               std::max(copy.discarded, discarded_at_least));
  return true;
}

void Collector::start_after_consumed() {
  for (uint32_t channel = 0; channel < mapping_.channel_count(); ++channel)
    consumed_[channel] = std::min(mapping_.channel(channel).packets_consumed.load(std::memory_order_acquire),
                                  mapping_.packets_committed(channel));
}

void Collector::finish() {
  ShmHeader& header = mapping_.header();
  if (header.policy == format::BufferPolicy::flight) return snapshot();
  drain();
  const uint32_t channels = mapping_.channel_count();
  for (uint32_t channel = 0; channel < channels; ++channel) {
    ChannelDescriptor& desc = mapping_.channel(channel);
    const uint64_t open_seq = mapping_.packets_committed(channel);
    // The packet being filled when the program stopped or died: its committed prefix, with the
    // channel's count of discarded events (a signal handler's drops reach only the channel).
    if (open_seq >= consumed_[channel]) {
      const uint8_t* packet = mapping_.ring_slot(channel, open_seq);
      const auto& live = *reinterpret_cast<const PacketHeader*>(packet);
      const uint64_t discarded = desc.events_discarded.load(std::memory_order_relaxed);
      const bool has_content = format::content_bytes(live) > format::kPacketHeaderSize ||
                               live.events_discarded.load(std::memory_order_relaxed) > 0 || discarded > 0;
      if (has_content) copy_stable(channel, open_seq, discarded);
    }
  }
  write_units_for_the_count();
  stats_.discarded = discarded_in_streams();
  try {
    write_no_channel_stream();
  } catch (const std::exception& error) {
    stats_.files_unwritten.push_back(error.what());
  }
  write_last_files();
}

void Collector::snapshot() {
  const uint32_t channels = mapping_.channel_count();
  for (uint32_t channel = 0; channel < channels; ++channel) snapshot_channel(channel);
  write_units_for_the_count();
  stats_.discarded = discarded_in_streams();
  try {
    write_no_channel_stream();
  } catch (const std::exception& error) {
    stats_.files_unwritten.push_back(error.what());
  }
  write_last_files();
}

// The ring's window, oldest to newest, is copied into memory before anything is written: a
// writer that laps the ring meanwhile rewrites slots not yet copied, and the fewer such slots the
// better. A slot lost that way (or damaged) would be a hole between the packets around it, so
// only the run of whole copies ending at the newest one is kept: each thread's events are
// contiguous from the first to the last, as a flight recorder's newest window should be. A copy
// that left packets out is tried again (the writer may have been lucky once), a few times.
void Collector::snapshot_channel(uint32_t channel) {
  constexpr int kAttempts = 4;
  const SessionGeometry& geometry = mapping_.geometry();
  const ChannelDescriptor& desc = mapping_.channel(channel);
  window_.resize(geometry.ring_bytes);
  std::vector<PacketCopy> run;  // whole copies since the last hole; packet i at window_[i * packet_size]
  uint64_t left_out = 0;
  uint64_t damaged = 0;
  uint64_t open_seq = 0;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    open_seq = mapping_.packets_committed(channel);
    const uint64_t window = geometry.packets_per_channel;
    const uint64_t first = std::max(open_seq + 1 > window ? open_seq + 1 - window : 0, consumed_[channel]);
    run.clear();
    left_out = 0;
    damaged = 0;
    for (uint64_t seq = first; seq <= open_seq; ++seq) {
      PacketCopy copy;
      const CopyResult result = copy_slot(channel, seq, window_.data() + run.size() * geometry.packet_size, copy);
      // With no packet open (its thread ended, or waits for a free slot), the slot after the
      // last closed packet still holds an older one: the window ends there, with no hole.
      if (seq == open_seq && result == CopyResult::overwritten) break;
      if (result != CopyResult::copied) {
        damaged += result == CopyResult::damaged;
        left_out += run.size() + 1;
        run.clear();
        continue;
      }
      run.push_back(copy);
    }
    if (left_out == 0) break;
  }
  stats_.packets_left_out += left_out;
  stats_.decode_errors += damaged;
  if (run.empty()) return;
  // The open packet carries the channel's count: a signal handler's drops reach only the channel.
  if (run.back().seq == open_seq)
    run.back().discarded = std::max(run.back().discarded, desc.events_discarded.load(std::memory_order_relaxed));
  // events_discarded is cumulative for the stream. A run that starts later than the stream's
  // first packet starts counting at its first packet, so that babeltrace2 reads a first packet
  // with 0 rather than "may have discarded", and the counts of the trace are the events lost
  // inside it. (Losses within that first packet cannot be told from older ones.) A later
  // thread's packets in the run (the channel was reused) start their stream: their counts are
  // their own from 0.
  const uint64_t first_instance = stream_instance_of(window_.data());
  const uint64_t base = run.front().seq == 0 ? 0 : run.front().discarded;
  for (size_t index = 0; index < run.size(); ++index) {
    const PacketCopy& copy = run[index];
    const uint8_t* packet = window_.data() + index * geometry.packet_size;
    const uint64_t own_base = stream_instance_of(packet) == first_instance ? base : 0;
    write_packet(channel, packet, copy.content, copy.timestamp_end, std::max(copy.discarded, own_base) - own_base);
  }
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

void Collector::write_metadata(bool refine_clock) {
  const ShmHeader& header = mapping_.header();
  format::TraceDescription trace;
  std::memcpy(trace.uuid.data(), header.uuid, 16);
  trace.clock = mapping_.clock();
  if (refine_clock) trace.clock.frequency_hz = recorder::refined_frequency(mapping_.clock());
  trace.pid = header.pid;
  trace.process_name.assign(header.process_name, strnlen(header.process_name, sizeof header.process_name));
  trace.hostname.assign(header.hostname, strnlen(header.hostname, sizeof header.hostname));
  trace.policy = header.policy;
  trace.losses = stats_.losses();
  const std::string text = format::make_metadata(trace);
  write_trace_file("metadata", text.data(), text.size(), false);
}

}  // namespace chronicle::collector
