// The event catalogue: every event type, its id, stream and fields. The TSDL metadata, the
// writer's encoders (checked by the round-trip tests) and the reader's decoder all follow it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "chronicle/detail/layout.hpp"

namespace chronicle::format {

// u64_sequence: as many u64 as the u32 field right before it says (a CTF sequence).
enum class FieldType : uint8_t { u8, u32, u64, s64, f64, string, u64_sequence };

struct FieldSpec {
  std::string_view name;
  FieldType type;
  // When set, the integer's values are named (by index) and the metadata declares a CTF enum.
  std::span<const std::string_view> enumerators = {};
};

struct EventSpec {
  uint32_t stream_id;
  uint32_t id;
  std::string_view name;
  std::span<const FieldSpec> fields;
  int32_t fixed_payload_size = -1;  // bytes when no field is a string or a sequence, else -1 (set by the catalogue)
  // A compound event (one header for events of one instant): the events every chronicle tool
  // reads it back as, in order, and counts it as. Empty for an event that stands for itself.
  std::span<const EventId> stands_for = {};
};

// How many events a stored event counts as: the writer's counts, the collector's, the reader's
// and the discards all count these, so that a compound event changes no figure a user sees.
constexpr uint32_t events_of(const EventSpec& spec) {
  return spec.stands_for.empty() ? 1 : static_cast<uint32_t>(spec.stands_for.size());
}

// Bit `id` for an event id (bit 31 for ids from 31 on, which no sound thread packet holds): what
// events_decode collects, so that a reader can later visit only the packets holding some types.
constexpr uint32_t event_type_bit(uint32_t id) {
  return uint32_t{1} << (id < 31 ? id : 31);
}

// The bits of the events a reader reads back from one stored event of `spec`: its own, and for a
// compound event those of the events it stands for.
constexpr uint32_t read_type_bits(const EventSpec& spec) {
  uint32_t bits = event_type_bit(spec.id);
  for (const EventId part : spec.stands_for) bits |= event_type_bit(static_cast<uint32_t>(part));
  return bits;
}

std::span<const EventSpec> catalogue();
const EventSpec* find_event(uint32_t stream_id, uint32_t id);

// The decoder's lookup: a direct table for the compact-header ids of both streams.
inline constexpr uint32_t kDirectLookupIds = 32;
struct EventTable {
  const EventSpec* by_id[2][kDirectLookupIds] = {};
};
const EventTable& event_table();

inline const EventSpec* lookup_event(const EventTable& table, uint32_t stream_id, uint32_t id) {
  if (stream_id < 2 && id < kDirectLookupIds) [[likely]]
    return table.by_id[stream_id][id];
  return find_event(stream_id, id);
}

// Bytes the payload of `spec` takes at `data` (at most `available`), or nullopt if it does not
// fit (a string without its terminating NUL, a field cut short).
std::optional<size_t> payload_size(const EventSpec& spec, const uint8_t* data, size_t available);

std::string_view field_type_name(FieldType type);

// Bytes a field of `type` takes in a payload; 0 for a string (as long as its text, and a NUL).
inline constexpr size_t field_size(FieldType type) {
  switch (type) {
    case FieldType::u8:
      return 1;
    case FieldType::u32:
      return 4;
    case FieldType::u64:
    case FieldType::s64:
    case FieldType::f64:
      return 8;
    case FieldType::string:
      return 0;  // as long as its text
    case FieldType::u64_sequence:
      return 0;  // 8 bytes per element
  }
  return 0;
}

// The names the metadata gives task kinds and outcomes ("unknown"/"?" for a value out of range).
std::string_view task_kind_name(TaskKind kind);
std::string_view task_outcome_name(TaskOutcome outcome);
std::string_view cpu_state_name(CpuState state);
// OTLP's SpanKind as span_context's metadata names it ("?" out of range).
std::string_view otlp_span_kind_name(uint8_t kind);

}  // namespace chronicle::format
