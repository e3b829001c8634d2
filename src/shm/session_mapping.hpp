// A session's shared mapping as every reader sees it (the collector, in this process or in
// `record`; top, ctl, snapshot, recover), the roles taken in it, and the collector's wake-up: the
// shm protocol of a session, used by the runtime and the tools alike
// (include/chronicle/detail/ring_protocol.md).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chronicle/detail/layout.hpp"
#include "shm/reader_mapping.hpp"

namespace chronicle::shm {

// Where a session's regions are, as checked when the mapping was opened. Readers use this copy,
// never the header's fields again: a writer that changed them later would send a reader outside
// the file.
struct SessionGeometry {
  uint32_t packet_size = 0;
  uint32_t packets_per_channel = 0;
  uint32_t max_channels = 0;
  uint64_t ring_bytes = 0;
  uint64_t channel_table_offset = 0;
  uint64_t strings_offset = 0;
  uint64_t strings_size = 0;
  uint64_t rings_offset = 0;
  uint64_t packet_events_offset = 0;
  uint64_t categories_offset = 0;
  uint64_t category_counts_offset = 0;
};

// A category as the mapping lists it, with its state (format::kCategoryOff, or level + 1) and what
// the program's threads wrote and lost in it so far (format::CategoryCounts, summed over channels).
struct CategoryView {
  std::string name;
  uint8_t state = 0;
  uint64_t events = 0;
  uint64_t bytes = 0;
  uint64_t discarded = 0;
};

// A process's figures over all its categories; `discarded` also counts the events of threads
// that had no ring (ShmHeader::events_no_channel), which no category holds.
struct SessionTotals {
  uint64_t events = 0;
  uint64_t bytes = 0;
  uint64_t discarded = 0;
};
SessionTotals session_totals(const std::vector<CategoryView>& categories, const format::ShmHeader& header);

// Packet sequence numbers at or past this are damage: a writer closing a packet every
// nanosecond would need 292 years to get there, and a reader can add to them without wrapping.
inline constexpr uint64_t kMaxPacketSequence = uint64_t{1} << 63;

// A session's shared mapping as a reader sees it. Opened from a file (another process's
// session, live or dead) or wrapping memory this process already has mapped.
class SessionMapping {
 public:
  // Maps the file read-write and checks every size and offset of its header against the file's
  // size (docs/guarantees.md, "Hostile mappings"); throws MappingError (a
  // format::InputError) naming the field and its offset, std::runtime_error when the file cannot
  // be opened.
  explicit SessionMapping(const std::string& path);
  // The same for a reader that found the file by a process's pid: a file `owner` does not own is
  // refused with MappingRefused.
  SessionMapping(const std::string& path, uid_t owner);
  SessionMapping(uint8_t* base, size_t size);  // not owned
  ~SessionMapping();
  SessionMapping(const SessionMapping&) = delete;
  SessionMapping& operator=(const SessionMapping&) = delete;

  const format::ShmHeader& header() const { return *reinterpret_cast<const format::ShmHeader*>(base_); }
  format::ShmHeader& header() { return *reinterpret_cast<format::ShmHeader*>(base_); }
  uint8_t* base() const { return base_; }
  const std::string& path() const { return file_.path(); }
  // The open file (read-write), for the roles' locks (take_role); -1 for a mapping in this
  // process's own memory.
  int fd() const { return file_.fd(); }

  // True while the writing process holds its lock on the file (false for wrapped memory).
  bool writer_alive() const;
  bool finished() const;

  const SessionGeometry& geometry() const { return geometry_; }
  // Channels in use (never more than max_channels).
  uint32_t channel_count() const;
  format::ChannelDescriptor& channel(uint32_t index) const;
  // The channel's packets_committed; throws MappingError when it is past kMaxPacketSequence.
  uint64_t packets_committed(uint32_t index) const;
  uint8_t* ring_slot(uint32_t channel, uint64_t seq) const;
  std::atomic<uint32_t>& packet_event_count(uint32_t channel, uint64_t seq) const;
  uint8_t* strings() const { return base_ + geometry_.strings_offset; }
  // The categories the program has met so far, in its order (the index its trace points use).
  std::vector<CategoryView> categories() const;
  // Channel `channel`'s counts, one per category index.
  const format::CategoryCounts* category_counts(uint32_t channel) const;
  // The per-event cost the program measured at start (picoseconds; 0: none).
  uint64_t event_cost_ps() const { return event_cost_ps_; }
  // The clock calibration as checked: its wall time at tick 0 fits the trace's int64 nanoseconds.
  const format::ClockCalibration& clock() const { return clock_; }

 private:
  SessionMapping(const std::string& path, std::optional<uid_t> owner);
  void validate();
  SessionGeometry geometry_;
  format::ClockCalibration clock_{};
  uint64_t event_cost_ps_ = 0;
  ReaderMapping file_;
  uint8_t* base_;  // file_.base(), used on every access
};

// Wakes the collector of this session if it sleeps (a writer whose ring fills, or stop()).
void request_drain(format::ShmHeader& header);
// The collector's side: sleeps until request_drain() moves ShmHeader::drain_requests past
// `requests_seen`, or `timeout` passes.
void wait_for_drain_request(format::ShmHeader& header, uint32_t requests_seen, std::chrono::microseconds timeout);

// Makes this process the one that drains the mapping's rings (ShmHeader::collector_pid, a role
// held by a lock on the file: take_role); false, with the claimant in `holder`, when a running
// process has them. Released with the mapping (or by release_session).
bool claim_session(SessionMapping& mapping, uint32_t& holder);
void release_session(SessionMapping& mapping);

}  // namespace chronicle::shm
