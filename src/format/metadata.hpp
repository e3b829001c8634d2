// The TSDL metadata of a chronicle trace: generated from the catalogue, and read back.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "chronicle/detail/layout.hpp"

namespace chronicle::format {

struct TraceDescription {
  std::array<uint8_t, 16> uuid{};
  ClockCalibration clock{};
  int32_t pid = 0;
  std::string process_name;
  std::string hostname;
  BufferPolicy policy = BufferPolicy::stream;
};

// The CTF clock's offset: wall time = offset_s + (offset + ticks) / frequency.
struct ClockOffset {
  int64_t seconds = 0;
  int64_t ticks = 0;
};
ClockOffset clock_offset(const ClockCalibration& clock);

// Nanoseconds since the Unix epoch of a tick count, per the calibration.
int64_t ticks_to_unix_ns(const ClockCalibration& clock, uint64_t ticks);

std::string make_metadata(const TraceDescription& trace);

// Reads what make_metadata wrote. Throws std::runtime_error with the reason when the text is
// not the metadata of a chronicle trace of a format version this build reads.
TraceDescription parse_metadata(std::string_view text);

std::string uuid_to_string(const std::array<uint8_t, 16>& uuid);

inline constexpr int kFormatVersion = 1;
inline constexpr std::string_view kTracerName = "chronicle";

}  // namespace chronicle::format
