// The TSDL metadata of a chronicle trace: generated from the catalogue, and read back.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "chronicle/detail/layout.hpp"

namespace chronicle::format {

// What a trace lacks beyond the events_discarded of its packets: written by the collector as env
// fields of the metadata (chronicle_*), 0 when a trace's metadata has none.
struct TraceLosses {
  uint64_t events_no_channel = 0;    // of threads that got no ring (more than max_threads, no shm)
  uint64_t definitions_dropped = 0;  // site and thread definitions that did not fit the strings packet
  uint64_t packets_undecodable = 0;  // packets the collector found damaged and left out
  uint64_t packets_unwritten = 0;    // packets the collector could not write (e.g. disk full)
  uint64_t events_unwritten = 0;     // the events of those packets
  uint64_t bytes_unwritten = 0;
  bool any() const {
    return events_no_channel || definitions_dropped || packets_undecodable || packets_unwritten || bytes_unwritten;
  }
};

// The losses in words ("30 events of threads without a ring, 2 definitions that did not fit"),
// "" when there are none.
std::string describe_losses(const TraceLosses& losses);

// How `chronicle merge` moved a trace's clock onto the clock of its reference host: env fields
// (chronicle_clock_*) of a merged trace's metadata, so that the tools can say how far to trust
// times across hosts. The calibration in the metadata is already the corrected one.
struct ClockCorrection {
  std::string reference_host;
  int64_t offset_ns = 0;  // what was added to the trace's wall-clock reference (realtime_ns_at_start)
  int64_t drift_ppb = 0;  // the rate change applied on top, in parts per billion
  int64_t bound_ns = -1;  // the alignment's error bound; -1 when unknown (no pairs, messages one way only)
  uint64_t pairs = 0;     // send/receive pairs that supported it
  std::string method;     // how it was found, in words ("message pairs", "wall clock: no pairs", ...)
};

struct TraceDescription {
  std::array<uint8_t, 16> uuid{};
  ClockCalibration clock{};
  int32_t pid = 0;
  std::string process_name;
  std::string hostname;
  BufferPolicy policy = BufferPolicy::stream;
  TraceLosses losses;
  std::optional<ClockCorrection> correction;  // only in merged traces
  // The granularity of the trace's times when coarser than its clock's tick: a time t happened
  // within (t - resolution, t + resolution). 0: the clock's own (a recorded trace). An OTLP input
  // whose times are whole milliseconds has 1,000,000.
  uint64_t time_resolution_ns = 0;
  // What tells this host's clock from another's of the same hostname: the kernel's boot id for a
  // recorded trace, OpenTelemetry's host.id for an OTLP input; "" when unknown (older traces).
  std::string host_id;
  // Where the trace's events come from when chronicle did not record them: kSourceOtlp for
  // another service's spans that merge read from OTLP input. "" for a recorded trace.
  std::string source;
};
inline constexpr std::string_view kSourceOtlp = "otlp";

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

// `metadata` (a chronicle trace's, as parse_metadata reads it) with its clock calibration replaced
// by `clock` (the clock's freq, offset_s and offset, and the env fields the reader computes them
// from) and `correction` recorded in its env (replaced if it has one). Every other byte is kept,
// so that events this build does not know stay declared. Throws std::runtime_error when a field
// to replace is missing.
std::string with_clock(std::string_view metadata, const ClockCalibration& clock, const ClockCorrection& correction);

std::string uuid_to_string(const std::array<uint8_t, 16>& uuid);

// 2: span_end names the span it closes; 3: context events; 4: samples, context switches, modules;
// 5: attributes and span status; 6: task_invoke (a task's resolution and run's beginning in one
// event).
inline constexpr int kFormatVersion = 6;
// Version 2 traces differ only by having no context events, so this build reads them too.
inline constexpr int kOldestReadableFormatVersion = 2;
// The stream file that counts the events of threads that got no channel (two empty packets).
inline constexpr std::string_view kNoChannelStreamName = "no-channel";
inline constexpr std::string_view kTracerName = "chronicle";

}  // namespace chronicle::format
