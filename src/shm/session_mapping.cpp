#include "shm/session_mapping.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>

#include "shm/mapping_check.hpp"
#include "shm/shm_file.hpp"

namespace chronicle::shm {

using format::ChannelDescriptor;
using format::ShmHeader;

void request_drain(format::ShmHeader& header) {
  header.drain_requests.fetch_add(1, std::memory_order_release);
  // Not FUTEX_PRIVATE: the collector may be another process sharing the mapping.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header.drain_requests), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

void wait_for_drain_request(format::ShmHeader& header, uint32_t requests_seen, std::chrono::microseconds timeout) {
  timespec wait{static_cast<time_t>(timeout.count() / 1'000'000),
                static_cast<long>(timeout.count() % 1'000'000) * 1000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header.drain_requests), FUTEX_WAIT, requests_seen, &wait, nullptr, 0);
}

SessionMapping::SessionMapping(const std::string& path) : SessionMapping(path, std::optional<uid_t>()) {}

SessionMapping::SessionMapping(const std::string& path, uid_t owner) : SessionMapping(path, std::optional(owner)) {}

SessionMapping::SessionMapping(const std::string& path, std::optional<uid_t> owner)
    : file_(path, true, owner, format::kShmHeaderSize, "session"), base_(file_.base()) {
  validate();
}

SessionMapping::SessionMapping(uint8_t* base, size_t size) : file_(base, size, "(in-process)"), base_(base) {
  validate();
}

SessionMapping::~SessionMapping() = default;

namespace {

// Trace times are nanoseconds since 1970 in an int64 (CTF's offset_s, readers' clocks): the
// wall time at tick 0 must be one of those, and the frequency one a clock has (up to 2^40 Hz).
void check_clock(const MappingCheck& check, const format::ClockCalibration& clock) {
  constexpr uint64_t kHighestFrequency = uint64_t{1} << 40;
  check.within("clock.frequency_hz", offsetof(ShmHeader, clock) + offsetof(format::ClockCalibration, frequency_hz),
               clock.frequency_hz, 1, kHighestFrequency);
  const long double origin_ns = static_cast<long double>(clock.realtime_ns_at_start) -
                                static_cast<long double>(clock.ticks_at_start) * 1e9L / clock.frequency_hz;
  if (origin_ns < 0 || clock.realtime_ns_at_start > static_cast<uint64_t>(INT64_MAX))
    check.fail("clock.realtime_ns_at_start",
               offsetof(ShmHeader, clock) + offsetof(format::ClockCalibration, realtime_ns_at_start),
               fmt::format("{} with {} ticks at {} Hz puts tick 0 outside 1970..2262", clock.realtime_ns_at_start,
                           clock.ticks_at_start, clock.frequency_hz));
}

}  // namespace

// The header is copied first: what is checked is what is used, whatever the writer does next.
void SessionMapping::validate() {
  MappingCheck check(file_.path(), "session", file_.size());
  if (file_.size() < format::kShmHeaderSize) check.fail("file size", 0, "is smaller than the header");
  // Only the fields fixed at creation, which end where the live counters begin: the writers
  // store to those (channel_count, category flags...) meanwhile, and a plain copy would race.
  alignas(ShmHeader) uint8_t copy[sizeof(ShmHeader)] = {};
  std::memcpy(copy, base_, offsetof(ShmHeader, channel_count));
  const ShmHeader& h = *reinterpret_cast<const ShmHeader*>(copy);
#define CHRONICLE_FIELD(name) #name, offsetof(ShmHeader, name)
  if (h.magic != format::kShmMagic)
    check.fail(CHRONICLE_FIELD(magic), fmt::format("0x{:016x} is not a chronicle session's (bad magic)", h.magic));
  if (h.version != format::kShmVersion)
    check.fail(CHRONICLE_FIELD(version), fmt::format("{} is not layout version {}", h.version, format::kShmVersion));
  if (h.file_size != file_.size())
    check.fail(CHRONICLE_FIELD(file_size), fmt::format("says {} bytes, the file has {}", h.file_size, file_.size()));
  check.within(CHRONICLE_FIELD(packet_size), h.packet_size, 1024, file_.size());
  if (h.packet_size % format::kPacketAlignment != 0)
    check.fail(CHRONICLE_FIELD(packet_size), fmt::format("{} is not a multiple of 8", h.packet_size));
  check.within(CHRONICLE_FIELD(packets_per_channel), h.packets_per_channel, 2, file_.size());
  check.within(CHRONICLE_FIELD(max_channels), h.max_channels, 1, file_.size());
  SessionGeometry& g = geometry_;
  g.packet_size = h.packet_size;
  g.packets_per_channel = h.packets_per_channel;
  g.max_channels = h.max_channels;
  g.ring_bytes = check.product(CHRONICLE_FIELD(packets_per_channel), h.packet_size, h.packets_per_channel);
  const uint64_t rings_size = check.product(CHRONICLE_FIELD(max_channels), g.ring_bytes, h.max_channels);
  const uint64_t slots = check.product(CHRONICLE_FIELD(max_channels), h.packets_per_channel, h.max_channels);
  const uint64_t counts_size = check.product(CHRONICLE_FIELD(max_channels), slots, sizeof(uint32_t));
  const uint64_t table_size = check.product(CHRONICLE_FIELD(max_channels), h.max_channels, sizeof(ChannelDescriptor));
  // The regions follow each other in this order, none overlapping the next.
  const uint64_t categories_end =
      check.region({CHRONICLE_FIELD(categories_offset)}, h.categories_offset, {CHRONICLE_FIELD(categories_offset)},
                   format::kCategoryTableSize, format::kShmHeaderSize, alignof(format::CategoryEntry));
  const uint64_t table_end =
      check.region({CHRONICLE_FIELD(channel_table_offset)}, h.channel_table_offset, {CHRONICLE_FIELD(max_channels)},
                   table_size, categories_end, alignof(ChannelDescriptor));
  check.within(CHRONICLE_FIELD(strings_size), h.strings_size, format::kPacketHeaderSize, file_.size());
  const uint64_t strings_end =
      check.region({CHRONICLE_FIELD(strings_offset)}, h.strings_offset, {CHRONICLE_FIELD(strings_size)}, h.strings_size,
                   table_end, format::kPacketAlignment);
  const uint64_t rings_end =
      check.region({CHRONICLE_FIELD(rings_offset)}, h.rings_offset, {CHRONICLE_FIELD(max_channels)}, rings_size,
                   strings_end, format::kPacketAlignment);
  const uint64_t packet_events_end =
      check.region({CHRONICLE_FIELD(packet_events_offset)}, h.packet_events_offset, {CHRONICLE_FIELD(max_channels)},
                   counts_size, rings_end, alignof(uint32_t));
  const uint64_t rows_size =
      check.product(CHRONICLE_FIELD(max_channels), h.max_channels, format::kCategoryCountsRowSize);
  check.region({CHRONICLE_FIELD(category_counts_offset)}, h.category_counts_offset, {CHRONICLE_FIELD(max_channels)},
               rows_size, packet_events_end, alignof(format::CategoryCounts));
  check_clock(check, h.clock);
  clock_ = h.clock;
#undef CHRONICLE_FIELD
  g.channel_table_offset = h.channel_table_offset;
  g.strings_offset = h.strings_offset;
  g.strings_size = h.strings_size;
  g.rings_offset = h.rings_offset;
  g.packet_events_offset = h.packet_events_offset;
  g.categories_offset = h.categories_offset;
  g.category_counts_offset = h.category_counts_offset;
  event_cost_ps_ = h.event_cost_ps;
}

std::vector<CategoryView> SessionMapping::categories() const {
  const uint32_t count =
      std::min<uint32_t>(header().category_count.load(std::memory_order_acquire), format::kMaxCategories);
  const auto* table = reinterpret_cast<const format::CategoryEntry*>(base_ + geometry_.categories_offset);
  std::vector<CategoryView> out;
  for (uint32_t i = 0; i < count; ++i) {
    char name[format::kCategoryNameSize];
    std::memcpy(name, table[i].name, sizeof name);  // the writer's bytes, copied once
    name[sizeof name - 1] = '\0';
    out.push_back({name, header().category_enabled[i].load(std::memory_order_relaxed)});
  }
  const uint32_t channels = channel_count();
  for (uint32_t channel = 0; channel < channels; ++channel) {
    const format::CategoryCounts* row = category_counts(channel);
    for (uint32_t i = 0; i < count; ++i) {
      out[i].events += row[i].events.load(std::memory_order_relaxed);
      out[i].bytes += row[i].bytes.load(std::memory_order_relaxed);
      out[i].discarded += row[i].discarded.load(std::memory_order_relaxed);
    }
  }
  return out;
}

SessionTotals session_totals(const std::vector<CategoryView>& categories, const format::ShmHeader& header) {
  SessionTotals totals;
  totals.discarded = header.events_no_channel.load(std::memory_order_relaxed);
  for (const CategoryView& category : categories) {
    totals.events += category.events;
    totals.bytes += category.bytes;
    totals.discarded += category.discarded;
  }
  return totals;
}

const format::CategoryCounts* SessionMapping::category_counts(uint32_t channel) const {
  return reinterpret_cast<const format::CategoryCounts*>(base_ + geometry_.category_counts_offset +
                                                         uint64_t{channel} * format::kCategoryCountsRowSize);
}

uint32_t SessionMapping::channel_count() const {
  return std::min(header().channel_count.load(std::memory_order_acquire), geometry_.max_channels);
}

ChannelDescriptor& SessionMapping::channel(uint32_t index) const {
  return reinterpret_cast<ChannelDescriptor*>(base_ + geometry_.channel_table_offset)[index];
}

uint64_t SessionMapping::packets_committed(uint32_t index) const {
  const uint64_t committed = channel(index).packets_committed.load(std::memory_order_acquire);
  if (committed >= kMaxPacketSequence) {
    const uint64_t offset = geometry_.channel_table_offset + uint64_t{index} * sizeof(ChannelDescriptor) +
                            offsetof(ChannelDescriptor, packets_committed);
    MappingCheck(file_.path(), "session", file_.size())
        .fail(fmt::format("channels[{}].packets_committed", index), offset,
              fmt::format("is {}, past any sequence a writer reaches (2^63)", committed));
  }
  return committed;
}

uint8_t* SessionMapping::ring_slot(uint32_t channel, uint64_t seq) const {
  return base_ + geometry_.rings_offset + channel * geometry_.ring_bytes +
         (seq % geometry_.packets_per_channel) * geometry_.packet_size;
}

std::atomic<uint32_t>& SessionMapping::packet_event_count(uint32_t channel, uint64_t seq) const {
  return reinterpret_cast<std::atomic<uint32_t>*>(
      base_ + geometry_.packet_events_offset)[uint64_t{channel} * geometry_.packets_per_channel +
                                              seq % geometry_.packets_per_channel];
}

bool SessionMapping::writer_alive() const {
  return file_.writer_alive();
}

bool SessionMapping::finished() const {
  return header().state.load(std::memory_order_acquire) == static_cast<uint32_t>(format::SessionState::finished);
}

// Claims the session's rings for this process (layout.hpp, ShmHeader::collector_pid): the lock
// decides, the pid only names the holder.
bool claim_session(SessionMapping& mapping, uint32_t& holder) {
  ShmHeader& header = mapping.header();
  if (!take_role(mapping.fd(), offsetof(ShmHeader, collector_pid))) {
    holder = header.collector_pid.load(std::memory_order_acquire);
    return false;
  }
  holder = static_cast<uint32_t>(getpid());
  header.collector_pid.store(holder, std::memory_order_release);
  return true;
}

void release_session(SessionMapping& mapping) {
  mapping.header().collector_pid.store(0, std::memory_order_release);
  give_up_role(mapping.fd(), offsetof(ShmHeader, collector_pid));
}

}  // namespace chronicle::shm
