#include "format/metadata.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "format/catalogue.hpp"

namespace chronicle::format {
namespace {

std::string quoted(std::string_view text) {
  std::string out;
  for (char c : text) out += (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) ? '_' : c;
  return out;
}

// Where the value of the first statement `key = VALUE;` begins and ends (before the ';').
std::optional<std::pair<size_t, size_t>> find_statement(std::string_view text, std::string_view key) {
  size_t from = 0;
  while (true) {
    size_t at = text.find(key, from);
    if (at == std::string_view::npos) return std::nullopt;
    from = at + key.size();
    bool starts = at == 0 || text[at - 1] == ' ' || text[at - 1] == '\t' || text[at - 1] == '\n';
    size_t cursor = from;
    while (cursor < text.size() && text[cursor] == ' ') ++cursor;
    if (!starts || cursor >= text.size() || text[cursor] != '=') continue;
    ++cursor;
    while (cursor < text.size() && text[cursor] == ' ') ++cursor;
    size_t end = text.find(';', cursor);
    if (end == std::string_view::npos) return std::nullopt;
    return std::pair{cursor, end};
  }
}

// Finds `key = ` at the start of a statement and returns the value text up to ';'.
std::optional<std::string_view> find_value(std::string_view text, std::string_view key) {
  const auto statement = find_statement(text, key);
  if (!statement) return std::nullopt;
  std::string_view value = text.substr(statement->first, statement->second - statement->first);
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
  return value;
}

int64_t integer_value(std::string_view text, std::string_view key) {
  auto value = find_value(text, key);
  if (!value) throw std::runtime_error(fmt::format("metadata has no '{}'", key));
  std::string copy(*value);
  char* end = nullptr;
  errno = 0;
  long long parsed = std::strtoll(copy.c_str(), &end, 10);
  if (errno != 0 || end == copy.c_str() || *end != '\0')
    throw std::runtime_error(fmt::format("metadata '{}' is not an integer: '{}'", key, copy));
  return parsed;
}

// A count the metadata of older traces does not have: 0 then.
uint64_t optional_count(std::string_view text, std::string_view key) {
  if (!find_value(text, key)) return 0;
  const int64_t value = integer_value(text, key);
  if (value < 0) throw std::runtime_error(fmt::format("metadata '{}' is negative: {}", key, value));
  return static_cast<uint64_t>(value);
}

// The env fields of TraceLosses, in one place for the writer and the reader.
constexpr std::string_view kEventsNoChannel = "chronicle_events_no_channel";
constexpr std::string_view kDefinitionsDropped = "chronicle_definitions_dropped";
constexpr std::string_view kPacketsUndecodable = "chronicle_packets_undecodable";
constexpr std::string_view kPacketsUnwritten = "chronicle_packets_unwritten";
constexpr std::string_view kEventsUnwritten = "chronicle_events_unwritten";
constexpr std::string_view kBytesUnwritten = "chronicle_bytes_unwritten";
constexpr std::string_view kTimeResolution = "chronicle_time_resolution_ns";
constexpr std::string_view kHostId = "chronicle_host_id";
constexpr std::string_view kSource = "chronicle_source";

std::string string_value(std::string_view text, std::string_view key) {
  auto value = find_value(text, key);
  return value ? std::string(*value) : std::string();
}

// The env fields of ClockCorrection, in one place for make_metadata, with_clock and the reader.
constexpr std::string_view kCorrectionReference = "chronicle_clock_reference_host";
constexpr std::string_view kCorrectionOffset = "chronicle_clock_correction_ns";
constexpr std::string_view kCorrectionDrift = "chronicle_clock_drift_ppb";
constexpr std::string_view kCorrectionBound = "chronicle_clock_bound_ns";
constexpr std::string_view kCorrectionPairs = "chronicle_clock_pairs";
constexpr std::string_view kCorrectionMethod = "chronicle_clock_method";

// Each env statement of `correction`: key and value as TSDL writes it.
std::vector<std::pair<std::string_view, std::string>> correction_fields(const ClockCorrection& correction) {
  return {{kCorrectionReference, fmt::format("\"{}\"", quoted(correction.reference_host))},
          {kCorrectionOffset, std::to_string(correction.offset_ns)},
          {kCorrectionDrift, std::to_string(correction.drift_ppb)},
          {kCorrectionBound, std::to_string(correction.bound_ns)},
          {kCorrectionPairs, std::to_string(static_cast<int64_t>(correction.pairs))},
          {kCorrectionMethod, fmt::format("\"{}\"", quoted(correction.method))}};
}

std::optional<ClockCorrection> parse_correction(std::string_view text) {
  if (!find_value(text, kCorrectionReference)) return std::nullopt;
  ClockCorrection correction;
  correction.reference_host = string_value(text, kCorrectionReference);
  correction.offset_ns = integer_value(text, kCorrectionOffset);
  correction.drift_ppb = integer_value(text, kCorrectionDrift);
  correction.bound_ns = integer_value(text, kCorrectionBound);
  correction.pairs = optional_count(text, kCorrectionPairs);
  correction.method = string_value(text, kCorrectionMethod);
  return correction;
}

// Replaces the value of statement `key` (the first one) by `value`.
void replace_value(std::string& text, std::string_view key, std::string_view value) {
  const auto statement = find_statement(text, key);
  if (!statement) throw std::runtime_error(fmt::format("metadata has no '{}' to replace", key));
  text.replace(statement->first, statement->second - statement->first, value);
}

}  // namespace

std::string describe_losses(const TraceLosses& losses) {
  std::string out;
  auto add = [&out](uint64_t count, std::string_view what) {
    if (count == 0) return;
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", count, what);
  };
  add(losses.events_no_channel, "events of threads without a ring");
  add(losses.definitions_dropped, "definitions that did not fit");
  add(losses.packets_undecodable, "damaged packets left out");
  if (losses.packets_unwritten || losses.bytes_unwritten)
    out += fmt::format("{}{} packets ({} events, {} bytes) not written", out.empty() ? "" : ", ",
                       losses.packets_unwritten, losses.events_unwritten, losses.bytes_unwritten);
  return out;
}

ClockOffset clock_offset(const ClockCalibration& clock) {
  // Wall time at tick 0, in nanoseconds; then split into whole seconds and leftover ticks.
  long double frequency = static_cast<long double>(clock.frequency_hz);
  long double origin_ns = static_cast<long double>(clock.realtime_ns_at_start) -
                          static_cast<long double>(clock.ticks_at_start) * 1e9L / frequency;
  // Out of int64's range only for a nonsensical clock: clamped, so that converting is defined
  // (readers then refuse the offset).
  long double seconds = std::clamp(std::floor(origin_ns / 1e9L), -0x1p62L, 0x1p62L);
  long double leftover_ns = std::clamp(origin_ns - seconds * 1e9L, 0.0L, 1e9L);
  return {static_cast<int64_t>(seconds), static_cast<int64_t>(std::llround(leftover_ns * frequency / 1e9L))};
}

int64_t ticks_to_unix_ns(const ClockCalibration& clock, uint64_t ticks) {
  ClockOffset offset = clock_offset(clock);
  long double ns = static_cast<long double>(offset.seconds) * 1e9L +
                   static_cast<long double>(offset.ticks + static_cast<long double>(ticks)) * 1e9L /
                       static_cast<long double>(clock.frequency_hz);
  return static_cast<int64_t>(std::llround(ns));
}

std::string with_clock(std::string_view metadata, const ClockCalibration& clock, const ClockCorrection& correction) {
  std::string text(metadata);
  const ClockOffset offset = clock_offset(clock);
  replace_value(text, "realtime_ns_at_start", std::to_string(static_cast<int64_t>(clock.realtime_ns_at_start)));
  replace_value(text, "ticks_at_start", std::to_string(static_cast<int64_t>(clock.ticks_at_start)));
  replace_value(text, "freq", std::to_string(clock.frequency_hz));
  replace_value(text, "offset_s", std::to_string(offset.seconds));
  replace_value(text, "offset", std::to_string(offset.ticks));
  std::string added;
  for (const auto& [key, value] : correction_fields(correction)) {
    if (find_statement(text, key))
      replace_value(text, key, value);
    else
      added += fmt::format("  {} = {};\n", key, value);
  }
  const size_t env = text.find("\nenv {");
  const size_t env_end = env == std::string::npos ? env : text.find("\n};", env);
  if (env_end == std::string::npos)
    throw std::runtime_error("metadata has no env block to record the clock correction in");
  text.insert(env_end + 1, added);
  return text;
}

std::string uuid_to_string(const std::array<uint8_t, 16>& u) {
  return fmt::format(
      "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}", u[0],
      u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

std::string make_metadata(const TraceDescription& trace) {
  const ClockOffset offset = clock_offset(trace.clock);
  std::string out;
  auto add = [&out](std::string_view line) {
    out += line;
    out += '\n';
  };
  add("/* CTF 1.8 */");
  add("");
  add("typealias integer { size = 8; align = 8; signed = false; } := uint8_t;");
  add("typealias integer { size = 32; align = 8; signed = false; } := uint32_t;");
  add("typealias integer { size = 64; align = 8; signed = false; } := uint64_t;");
  add("typealias integer { size = 64; align = 8; signed = true; } := int64_t;");
  add("typealias floating_point { exp_dig = 11; mant_dig = 53; align = 8; } := double;");
  add("typealias integer { size = 5; align = 1; signed = false; } := uint5_t;");
  add("typealias integer { size = 27; align = 1; signed = false; map = clock.ticks.value; } := uint27_clock_t;");
  add("typealias integer { size = 64; align = 8; signed = false; map = clock.ticks.value; } := uint64_clock_t;");
  add("");
  add("trace {");
  add("  major = 1;");
  add("  minor = 8;");
  out += fmt::format("  uuid = \"{}\";\n", uuid_to_string(trace.uuid));
  add("  byte_order = le;");
  add("  packet.header := struct {");
  add("    uint32_t magic;");
  add("    uint8_t uuid[16];");
  add("    uint32_t stream_id;");
  add("    uint64_t stream_instance_id;");
  add("  } align(8);");
  add("};");
  add("");
  add("env {");
  out += fmt::format("  tracer_name = \"{}\";\n", kTracerName);
  out += fmt::format("  chronicle_format = {};\n", kFormatVersion);
  out += fmt::format("  hostname = \"{}\";\n", quoted(trace.hostname));
  out += fmt::format("  procname = \"{}\";\n", quoted(trace.process_name));
  out += fmt::format("  vpid = {};\n", trace.pid);
  out += fmt::format("  buffer_policy = \"{}\";\n", trace.policy == BufferPolicy::flight ? "flight" : "stream");
  out += fmt::format("  clock_is_tsc = {};\n", trace.clock.is_tsc);
  out += fmt::format("  ticks_at_start = {};\n", static_cast<int64_t>(trace.clock.ticks_at_start));
  out += fmt::format("  monotonic_ns_at_start = {};\n", static_cast<int64_t>(trace.clock.monotonic_ns_at_start));
  out += fmt::format("  realtime_ns_at_start = {};\n", static_cast<int64_t>(trace.clock.realtime_ns_at_start));
  for (const auto& [key, count] : {std::pair{kEventsNoChannel, trace.losses.events_no_channel},
                                   std::pair{kDefinitionsDropped, trace.losses.definitions_dropped},
                                   std::pair{kPacketsUndecodable, trace.losses.packets_undecodable},
                                   std::pair{kPacketsUnwritten, trace.losses.packets_unwritten},
                                   std::pair{kEventsUnwritten, trace.losses.events_unwritten},
                                   std::pair{kBytesUnwritten, trace.losses.bytes_unwritten}})
    out += fmt::format("  {} = {};\n", key, static_cast<int64_t>(count));
  if (!trace.host_id.empty()) out += fmt::format("  {} = \"{}\";\n", kHostId, quoted(trace.host_id));
  if (!trace.source.empty()) out += fmt::format("  {} = \"{}\";\n", kSource, quoted(trace.source));
  if (trace.time_resolution_ns != 0)
    out += fmt::format("  {} = {};\n", kTimeResolution, static_cast<int64_t>(trace.time_resolution_ns));
  if (trace.correction)
    for (const auto& [key, value] : correction_fields(*trace.correction))
      out += fmt::format("  {} = {};\n", key, value);
  add("};");
  add("");
  add("clock {");
  add("  name = \"ticks\";");
  out += fmt::format("  uuid = \"{}\";\n", uuid_to_string(trace.uuid));
  out += fmt::format("  description = \"{}\";\n",
                     trace.clock.is_tsc ? "invariant TSC, calibrated against CLOCK_REALTIME" : "CLOCK_MONOTONIC");
  out += fmt::format("  freq = {};\n", trace.clock.frequency_hz);
  add("  precision = 1;");
  out += fmt::format("  offset_s = {};\n", offset.seconds);
  out += fmt::format("  offset = {};\n", offset.ticks);
  add("  absolute = TRUE;");
  add("};");
  add("");
  add("struct event_header_compact {");
  add("  enum : uint5_t { compact = 0 ... 30, extended = 31 } id;");
  add("  variant <id> {");
  add("    struct { uint27_clock_t timestamp; } compact;");
  add("    struct { uint32_t id; uint64_clock_t timestamp; } extended;");
  add("  } v;");
  add("} align(8);");
  add("");
  add("struct packet_context {");
  add("  uint64_clock_t timestamp_begin;");
  add("  uint64_clock_t timestamp_end;");
  add("  uint64_t content_size;");
  add("  uint64_t packet_size;");
  add("  uint64_t packet_seq_num;");
  add("  uint64_t events_discarded;");
  add("  uint32_t thread_id;");
  add("  uint32_t pid;");
  add("} align(8);");
  for (uint32_t stream : {kStreamThread, kStreamStrings}) {
    add("");
    add("stream {");
    out += fmt::format("  id = {};\n", stream);
    add("  event.header := struct event_header_compact;");
    add("  packet.context := struct packet_context;");
    add("};");
  }
  for (const EventSpec& event : catalogue()) {
    add("");
    add("event {");
    out += fmt::format("  name = \"{}\";\n", event.name);
    out += fmt::format("  id = {};\n", event.id);
    out += fmt::format("  stream_id = {};\n", event.stream_id);
    add("  fields := struct {");
    for (size_t index = 0; index < event.fields.size(); ++index) {
      const FieldSpec& field = event.fields[index];
      if (field.type == FieldType::u64_sequence) {  // its length is the field before it (the catalogue's rule)
        out += fmt::format("    {} _{}[_{}];\n", field_type_name(field.type), field.name, event.fields[index - 1].name);
        continue;
      }
      if (field.enumerators.empty()) {
        out += fmt::format("    {} _{};\n", field_type_name(field.type), field.name);
        continue;
      }
      out += fmt::format("    enum : {} {{", field_type_name(field.type));
      for (size_t value = 0; value < field.enumerators.size(); ++value)
        out += fmt::format("{} {} = {}", value == 0 ? "" : ",", field.enumerators[value], value);
      out += fmt::format(" }} _{};\n", field.name);
    }
    add("  };");
    add("};");
  }
  return out;
}

TraceDescription parse_metadata(std::string_view text) {
  if (!text.starts_with("/* CTF 1.8"))
    throw std::runtime_error("metadata does not begin with '/* CTF 1.8' (not a CTF 1.8 text metadata file)");
  if (string_value(text, "tracer_name") != kTracerName)
    throw std::runtime_error("metadata is not from chronicle (env.tracer_name is not \"chronicle\")");
  const int64_t version = integer_value(text, "chronicle_format");
  if (version < kOldestReadableFormatVersion || version > kFormatVersion)
    throw std::runtime_error(fmt::format("trace format version {} is not one this build reads ({} to {})", version,
                                         kOldestReadableFormatVersion, kFormatVersion));
  TraceDescription trace;
  trace.hostname = string_value(text, "hostname");
  trace.process_name = string_value(text, "procname");
  trace.pid = static_cast<int32_t>(integer_value(text, "vpid"));
  trace.policy = string_value(text, "buffer_policy") == "flight" ? BufferPolicy::flight : BufferPolicy::stream;
  trace.clock.is_tsc = static_cast<uint32_t>(integer_value(text, "clock_is_tsc"));
  trace.clock.ticks_at_start = static_cast<uint64_t>(integer_value(text, "ticks_at_start"));
  trace.clock.monotonic_ns_at_start = static_cast<uint64_t>(integer_value(text, "monotonic_ns_at_start"));
  trace.clock.realtime_ns_at_start = static_cast<uint64_t>(integer_value(text, "realtime_ns_at_start"));
  trace.losses.events_no_channel = optional_count(text, kEventsNoChannel);
  trace.losses.definitions_dropped = optional_count(text, kDefinitionsDropped);
  trace.losses.packets_undecodable = optional_count(text, kPacketsUndecodable);
  trace.losses.packets_unwritten = optional_count(text, kPacketsUnwritten);
  trace.losses.events_unwritten = optional_count(text, kEventsUnwritten);
  trace.losses.bytes_unwritten = optional_count(text, kBytesUnwritten);
  trace.correction = parse_correction(text);
  trace.time_resolution_ns = optional_count(text, kTimeResolution);
  trace.host_id = string_value(text, kHostId);
  trace.source = string_value(text, kSource);
  const int64_t frequency = integer_value(text, "freq");
  if (frequency <= 0) throw std::runtime_error(fmt::format("metadata clock frequency {} is not positive", frequency));
  trace.clock.frequency_hz = static_cast<uint64_t>(frequency);
  // The uuid: the first "uuid = " is the trace's.
  std::string uuid = string_value(text, "uuid");
  std::string hex;
  for (char c : uuid)
    if (c != '-') hex += c;
  if (hex.size() != 32) throw std::runtime_error("metadata uuid is malformed");
  for (size_t i = 0; i < 16; ++i) trace.uuid[i] = static_cast<uint8_t>(std::stoul(hex.substr(i * 2, 2), nullptr, 16));
  return trace;
}

}  // namespace chronicle::format
