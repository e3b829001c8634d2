// Copies a session's rings out of its shared mapping into a CTF trace directory: live while the
// program runs (stream policy), at its end, after its death, or as a snapshot.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "chronicle/detail/layout.hpp"
#include "format/metadata.hpp"
#include "format/output_file.hpp"
#include "shm/session_mapping.hpp"

namespace chronicle::compression {
class UnitWriter;
}

namespace chronicle::collector {

// The session's mapping as a reader sees it, and its roles: the shm protocol (shm/session_mapping.hpp),
// named here as the collector's users always have.
using shm::CategoryView;
using shm::claim_session;
using shm::kMaxPacketSequence;
using shm::release_session;
using shm::request_drain;
using shm::session_totals;
using shm::SessionGeometry;
using shm::SessionMapping;
using shm::SessionTotals;

struct CollectorStats {
  uint64_t events = 0;
  uint64_t bytes = 0;  // written to stream files
  uint64_t packets = 0;
  uint64_t discarded = 0;  // cumulative over threads, as last seen
  uint64_t decode_errors = 0;
  // snapshot(): packets of a ring's window a writer reused while they were copied (or damaged,
  // also counted in decode_errors), and the older ones before such a packet. They are left out so
  // that each thread's events stay contiguous (a flight recorder keeps the newest window): the
  // snapshot starts later, it lacks nothing inside.
  uint64_t packets_left_out = 0;
  // Copied but not written: the trace files could not take them (e.g. disk full).
  uint64_t packets_unwritten = 0;
  uint64_t events_unwritten = 0;
  uint64_t bytes_unwritten = 0;
  // Events discarded whose count only unwritten packets carried (told as unwritten events, so that
  // the trace's events, discards and losses add up to what the program wrote).
  uint64_t discards_unwritten = 0;
  // Files the trace lacks, or has only an earlier version of, and why (e.g. disk full).
  std::vector<std::string> files_unwritten;
  // Rotation: chunks begun, and the oldest ones removed to stay under max_size (not losses: the
  // trace keeps the newest stretch by design, as a flight recorder does).
  uint64_t chunks = 0;
  uint64_t chunks_removed = 0;
  // Rotation: the tries to begin a chunk that failed (no room for it and its last files), and why
  // the last did. Not a loss: the chunk being written goes on past its bound until a try succeeds.
  uint64_t chunk_begin_failures = 0;
  std::string chunk_begin_failure;
  // From the mapping, as last seen.
  uint64_t events_no_channel = 0;
  uint64_t definitions_dropped = 0;
  // What the trace lacks beyond its packets' events_discarded, as its metadata records it.
  format::TraceLosses losses() const;
};

// Why a trace written into `directory` could be tampered with by another user (it belongs to
// another user, or its group or everyone may write in it: they could replace the files being
// written), or "" when only this user can write there (or it does not exist yet).
std::string shared_directory_problem(const std::string& directory);

// Makes `directory` with mode 0700 unless it exists, never through a planted link (output_file.hpp).
using format::create_private_directory;

// How a collector lays out its trace (docs/long-captures.md).
struct CollectorOptions {
  // Compressed files (.ctfz, compression/ctfz.hpp): each stream in units of about
  // kCompressedUnitBytes, cut early after kCompressedUnitAge so that a crash or a live reader
  // misses little.
  bool compress = false;
  // Rotation: the trace is a directory of chunks (chunk-000001, ...), each a whole trace, and a new
  // one begins once the current one holds this many bytes, or is this old (0: never).
  uint64_t rotate_bytes = 0;
  std::chrono::nanoseconds rotate_every{0};
  // With rotation: the oldest chunks are removed while the trace is larger than this (0: never).
  // The chunk being written is never removed.
  uint64_t max_size = 0;
  // Stream policy, for a reader of the growing trace (record --otlp-endpoint): a thread's open
  // packet whose events have waited this long in its ring, the thread writing nothing more, is
  // cut: what it holds is written as a packet of its own, and the rest of it later as another,
  // so that a quiet thread does not hold back what complete_below() says is in the files (0:
  // never; the trace is then written packet for packet as the rings hold them).
  std::chrono::nanoseconds cut_open_packets_after{0};
  // With compress: the unit writer to use, warmed before the program starts (UnitWriter::warm_up)
  // and shared by the collectors that one thread drains. Without one, each collector makes and
  // warms its own when it is made.
  std::shared_ptr<compression::UnitWriter> unit_writer;
  // Appends to the plain trace already in the output directory (`chronicle recover`): each of its
  // stream files is cut back to its last whole packet and goes on from there; a packet of a
  // stream whose file already holds that sequence number (written by the collector that died
  // before it handed the slot back) is not written again.
  bool append = false;
  // Whose CPU time drain() stores in the session's header (ShmHeader::collector_cpu_ns): the
  // calling thread's (a collector thread inside the program), or, for a process that exists to
  // collect (`chronicle record`), the whole process's.
  bool counts_process_cpu = false;
};
inline constexpr size_t kCompressedUnitBytes = size_t{1} << 20;
inline constexpr std::chrono::seconds kCompressedUnitAge{1};
// All streams' units together: past this, a stream's unit is written at its next packet, so that
// a program of many threads does not hold a megabyte per thread in its collector.
inline constexpr size_t kCompressedPendingBytes = size_t{64} << 20;
// A unit writer for rings of `packet_size` packets, warmed (UnitWriter::warm_up) with `buffers`
// unit buffers: made before the program writes, so that the collector's first units do not
// stall on first-touch page faults.
std::shared_ptr<compression::UnitWriter> warmed_unit_writer(size_t packet_size, size_t buffers);
// The name of the trace's n-th chunk (from 1) under a rotated trace's directory.
std::string chunk_name(uint64_t number);

class Collector {
 public:
  // Creates `output_dir` if needed (mode 0700; the files in it are 0600). Writes a first
  // metadata file at once.
  Collector(SessionMapping& mapping, std::string output_dir);
  Collector(SessionMapping& mapping, std::string output_dir, CollectorOptions options);
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // Stream policy: copies the packets writers have closed and hands their slots back. Returns
  // the bytes copied (0: nothing to do). Flight policy: nothing (the rings are read at the end).
  size_t drain();

  // For a collector that attaches to a running session: start after the packets an earlier
  // collector consumed (they were written to its trace, and their slots reused since).
  void start_after_consumed();

  // Copies everything the rings still hold: closed packets, every thread's open packet as it
  // stands (or, for the flight policy, the ring's window), the definitions and the metadata.
  void finish();

  // The rings' current contents without consuming them (either policy), then the definitions
  // and metadata: what `chronicle snapshot` writes.
  void snapshot();

  // Sleeps until a writer asks for a drain, or `timeout` passes. Returns at once when closed
  // packets are already waiting.
  void wait_for_work(std::chrono::microseconds timeout);

  // Stream policy, while the program runs: every event older than this (ticks) is in the trace
  // files, as the last drain() found the rings; 0 before any, and always for the flight policy.
  // What a reader of the growing trace may read in time order (exports::OtlpLivePush).
  uint64_t complete_below() const { return complete_below_; }
  // By path under output_dir() ("thread-7", "chunk-000003/thread-7.ctfz" when rotating), the bytes
  // of whole packets (or units) in each stream file of the chunk being written: what a reader may
  // map while the collector still writes (reader::Trace's `committed`). The files of earlier
  // chunks are whole.
  std::map<std::string, uint64_t> committed_sizes() const;
  // Rotating: the name of the chunk being written ("chunk-000003"); else "".
  std::string writing_chunk() const;

  const CollectorStats& stats() const { return stats_; }
  const std::string& output_dir() const { return output_dir_; }
  // Where the files are being written: output_dir(), or its current chunk when rotating.
  const std::string& files_dir() const { return files_dir_; }

 private:
  // One per stream instance: a channel's ring carries the packets of each thread that used it
  // in turn, told apart by the packet header's stream_instance_id.
  struct StreamFile {
    int fd = -1;
    std::string name;  // the file's name in the output directory
    uint64_t last_seq_written = ~uint64_t{0};
    uint64_t size = 0;            // bytes of whole packets (or units) in the file
    uint64_t last_discarded = 0;  // cumulative for this stream, as last written
    // The same as any packet carried it, written or not: when the packets after the last written
    // one could not be written, the discards they alone counted are not in the trace.
    uint64_t seen_discarded = 0;
    uint64_t unit_discarded = 0;  // compressed: the largest count in the pending unit
    // Compressed: the packets not yet written, in one unit.
    std::vector<uint8_t> unit;
    uint64_t unit_events = 0;
    uint64_t unit_packets = 0;
    uint64_t unit_content = 0;
    std::chrono::steady_clock::time_point unit_started;
    // Compressed: per channel, the first ring slot whose packet is in the pending unit. Slots are
    // handed back to the writer only once the unit holding their packets is written, so that a
    // collector killed before then leaves them in the mapping for `recover` (ring_protocol.md).
    std::map<uint32_t, uint64_t> unit_first_slot;
    // Packets the stream's cut packets added (OpenPacketCut): every later packet's sequence
    // number moves up by this many, so that the numbers in the files have no gap.
    uint64_t seq_shift = 0;
    // CollectorOptions::append: the last packet the file held when this collector opened it.
    std::optional<uint64_t> written_before;
  };
  // A thread's open packet cut while it is open (CollectorOptions::cut_open_packets_after): the
  // first `offset` bytes of packet `seq` (header included) are written, the last of their events
  // at `last_ticks`, which starts the packet that holds the rest (so the events' 27-bit
  // timestamps rebuild the same times).
  struct OpenPacketCut {
    uint64_t seq = ~uint64_t{0};
    uint64_t offset = 0;  // 0: nothing of it written yet
    uint64_t last_ticks = 0;
    std::optional<std::chrono::steady_clock::time_point> waiting_since;  // events past `offset` first seen
    // Whether packet `packet` of the channel is this cut's, with part of it written.
    bool has_written(uint64_t packet) const { return seq == packet && offset > 0; }
    // Where packet `packet`'s events not yet written begin.
    uint64_t unwritten_from(uint64_t packet) const { return has_written(packet) ? offset : format::kPacketHeaderSize; }
  };
  void reopen_stream_files();
  void cut_open_packet(uint32_t channel);
  // The part of packet `seq` of `channel` (copied at `packet`, `content` bytes) that is not
  // written yet: moved to the start of its events, after a header that begins at the cut's last
  // event. Returns its content bytes (`content` when the packet was not cut).
  uint64_t drop_written_part(uint32_t channel, uint64_t seq, uint8_t* packet, uint64_t content);
  void add_to_unit(StreamFile& stream, const ::iovec* parts, std::optional<uint64_t> known_events);
  void flush_unit(StreamFile& stream);
  bool chunk_is_full() const;
  void flush_units(bool only_old);
  // Hands the slots back whose packets are in the files (the drain's read position, held back
  // by the pending units).
  void hand_back_written();
  void write_units_for_the_count();
  void rotate();
  void remove_oldest_chunks();
  void write_trace_file(const std::string& name, const void* data, size_t size, bool packets);
  StreamFile& stream_for(const format::PacketHeader& packet);
  uint64_t discarded_in_streams() const;
  uint64_t complete_bound() const;
  bool holds_nothing_unwritten(uint32_t channel, uint64_t committed) const;
  enum class PacketTime { begin, end };
  std::optional<uint64_t> stable_packet_time(uint32_t channel, uint64_t seq, PacketTime which) const;
  uint64_t pending_units_begin() const;
  // `known_events`: the count the writer left for a closed packet; without it the packet's
  // events are counted by walking them.
  void write_packet(uint32_t channel, const uint8_t* packet, uint64_t content, uint64_t timestamp_end,
                    uint64_t discarded, std::optional<uint64_t> known_events = std::nullopt);
  // A packet copied out of its ring slot: the header fields a concurrent writer may change are
  // those read with the copy.
  struct PacketCopy {
    uint64_t seq = 0;
    uint64_t content = 0;
    uint64_t timestamp_end = 0;
    uint64_t discarded = 0;
  };
  enum class CopyResult { copied, overwritten, damaged };
  CopyResult copy_slot(uint32_t channel, uint64_t seq, uint8_t* into, PacketCopy& copy);
  bool copy_stable(uint32_t channel, uint64_t seq, uint64_t discarded_at_least = 0);
  void snapshot_channel(uint32_t channel);
  void write_strings();
  void write_new_definitions();
  void write_last_files();
  void reserve_room();
  void release_room();
  static constexpr int64_t kRoomForLastFiles = int64_t{256} << 10;
  void write_no_channel_stream();
  void write_metadata(bool refine_clock);
  void count_events(const uint8_t* packet, uint64_t content);

  SessionMapping& mapping_;
  std::string output_dir_;
  void store_cpu_time();
  CollectorOptions options_;
  std::string files_dir_;      // output_dir_, or its current chunk
  uint64_t chunk_number_ = 0;  // 0: not rotating
  uint64_t chunk_bytes_ = 0;   // in the current chunk's stream files
  std::chrono::steady_clock::time_point chunk_started_;
  // After a chunk failed to begin, the next try waits this long: each try makes a directory, asks
  // for room and removes the directory, too much to repeat at every packet of a full disk.
  static constexpr std::chrono::seconds kChunkRetryInterval{1};
  std::chrono::steady_clock::time_point next_chunk_try_;  // none before it
  std::map<uint64_t, StreamFile> streams_;                // by stream instance
  std::set<std::string> names_taken_;                     // by streams_, in any chunk
  std::shared_ptr<compression::UnitWriter> unit_writer_;  // kept from unit to unit
  size_t pending_unit_bytes_ = 0;                         // in every stream's unit
  std::vector<uint8_t> encoded_;
  std::vector<uint64_t> consumed_;   // per channel, stream policy
  std::vector<OpenPacketCut> cuts_;  // per channel, stream policy
  std::vector<uint8_t> scratch_;
  std::vector<uint8_t> window_;  // a ring's packets copied by snapshot()
  CollectorStats stats_;
  uint64_t latest_timestamp_ = 0;  // of the packets written
  uint64_t complete_below_ = 0;
  uint64_t strings_written_ = 0;  // content bytes of the definitions file written last
  std::string reserve_path_;
};

}  // namespace chronicle::collector
