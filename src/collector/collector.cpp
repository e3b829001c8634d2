// The collector's side of the ring protocol (include/chronicle/detail/ring_protocol.md): waiting
// for work, draining closed packets, cutting open ones, handing slots back, finishing a session
// and snapshotting a flight recorder. The files it writes: trace_files.cpp; appending to a trace
// whose collector died: append.cpp.
#include "collector/collector.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
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
  // A writer that passed a quarter of its ring before it could see us waiting did not wake us:
  // look first, with the writer's own condition (step 13), so that a ring that is merely not empty
  // waits for the batch a busy program's drains are made of.
  bool pending = false;
  if (header.policy == format::BufferPolicy::stream) {
    const uint32_t channels = mapping_.channel_count();
    const uint64_t ring = mapping_.geometry().packets_per_channel;
    for (uint32_t channel = 0; channel < channels && !pending; ++channel) {
      const uint64_t committed = mapping_.packets_committed(channel);
      pending = 4 * (committed - std::min(committed, consumed_[channel])) >= ring;
    }
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

void Collector::hand_back_written() {
  // The read position of each channel, held back by the slots pending units still hold: one
  // pass over the channels and one over what is held, not every stream for every channel.
  const uint32_t channels = mapping_.channel_count();
  std::vector<uint64_t> written(consumed_.begin(), consumed_.begin() + channels);
  for (const auto& [instance, stream] : streams_)
    for (const auto& [channel, first] : stream.unit_first_slot)
      if (channel < channels) written[channel] = std::min(written[channel], first);
  for (uint32_t channel = 0; channel < channels; ++channel) {
    ChannelDescriptor& desc = mapping_.channel(channel);
    // Only this collector stores the count (ring_protocol.md): relaxed to read its own value.
    if (written[channel] > desc.packets_consumed.load(std::memory_order_relaxed))
      desc.packets_consumed.store(written[channel], std::memory_order_release);
  }
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
  if (copied != 0) store_cpu_time();
  return copied;
}

// The monitor's measured part of the tracing's cost: after each drain that copied something (a
// system call a drain, when its work is some packets).
void Collector::store_cpu_time() {
  mapping_.header().collector_cpu_ns.store(
      recorder::read_clock_ns(options_.counts_process_cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_THREAD_CPUTIME_ID),
      std::memory_order_relaxed);
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
    for (format::RawEvent event; decoder.next(event);) {
      last_ticks = event.ticks;
      events += format::events_of(*event.spec);
    }
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

}  // namespace chronicle::collector
