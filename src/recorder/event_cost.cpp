#include "recorder/event_cost.hpp"

#include <time.h>

#include <algorithm>
#include <array>
#include <memory>

#include "chronicle/detail/writer.hpp"

namespace chronicle::recorder {
namespace {

constexpr size_t kEventsPerRound = 4096;
constexpr size_t kRounds = 7;

uint64_t now_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
}

// One round: kEventsPerRound instants through begin_event/commit_event, as emit_with_name writes
// them, into `packet`. Returns the nanoseconds it took.
uint64_t time_one_round(uint8_t* packet, size_t packet_bytes, format::CategoryCounts* counts) {
  detail::ThreadWriter writer{};
  writer.packet = reinterpret_cast<format::PacketHeader*>(packet);
  writer.pos = packet + format::kPacketHeaderSize;
  writer.end = packet + packet_bytes;
  writer.category_counts = counts;
  // generation 0 is what g_generation holds while start() runs, so enter_trace_point lets it in.
  const uint64_t begin = now_ns();
  for (size_t i = 0; i < kEventsPerRound; ++i) {
    // The two loads every enabled trace point makes before it writes.
    if (detail::g_category_state[0].load(std::memory_order_relaxed) == 0xff) break;
    uint64_t ticks = detail::read_ticks();
    uint8_t* out = detail::begin_event(writer, 0, static_cast<uint32_t>(format::EventId::instant),
                                       sizeof(format::NamePayload), ticks);
    if (!out) break;  // a session started meanwhile: this round measures less, the median ignores it
    const format::NamePayload payload{1};
    std::memcpy(out, &payload, sizeof payload);
    detail::commit_event(writer, 0, out + sizeof payload, ticks);
  }
  return now_ns() - begin;
}

}  // namespace

uint64_t measure_event_cost_ps() {
  // A compact header and a name: 8 bytes, with room to spare for the odd extended header.
  const size_t packet_bytes = format::kPacketHeaderSize + kEventsPerRound * format::kExtendedHeaderSize + 64;
  auto packet = std::make_unique<uint64_t[]>(packet_bytes / sizeof(uint64_t) + 1);
  auto counts = std::make_unique<format::CategoryCounts[]>(1);
  std::array<uint64_t, kRounds> rounds{};
  for (uint64_t& round : rounds)
    round = time_one_round(reinterpret_cast<uint8_t*>(packet.get()), packet_bytes, counts.get());
  std::nth_element(rounds.begin(), rounds.begin() + kRounds / 2, rounds.end());
  return rounds[kRounds / 2] * 1000 / kEventsPerRound;
}

}  // namespace chronicle::recorder
