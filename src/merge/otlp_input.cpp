#include "merge/otlp_input.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <tuple>

#include "format/attribute_text.hpp"
#include "format/input_error.hpp"
#include "format/trace_writer.hpp"
#include "merge/otlp_input_spans.hpp"
#include "merge/trace_merge.hpp"
#include "reader/trace_directory.hpp"

namespace chronicle::merge {
namespace {

using nlohmann::json;

struct Resource {
  std::string service;
  std::string host;
  std::string host_id;  // OpenTelemetry's host.id (a machine id): tells hosts of one name apart
  int32_t pid = 0;
  std::vector<InputSpan> spans;
};

using ResourceKey = std::tuple<std::string, std::string, std::string, int32_t>;

[[noreturn]] void refuse(const std::string& file, size_t line, const std::string& what) {
  throw format::InputError(line == 0 ? fmt::format("{}: {}", file, what)
                                     : fmt::format("{}: line {}: {}", file, line, what));
}

// The requests of the file, each with its line (0 when the file is one document).
void refuse_past_size_cap(const std::string& file, uint64_t size) {
  static_assert(kMaxOtlpInputBytes == 256 << 20, "the text says the cap");
  if (size > kMaxOtlpInputBytes)
    refuse(file, 0, fmt::format("{} bytes, more than the 256 MiB an OTLP/JSON input may hold", size));
}

// The whole of `file`, a regular file (a FIFO would wait for a writer, a device never end) within
// the size cap.
std::string read_text(const std::string& file) {
  const reader::ReadableFile in = reader::open_readable_file(file);
  if (!in) refuse(file, 0, in.problem());
  refuse_past_size_cap(file, in.size());
  std::string text;
  std::array<char, 1 << 16> buffer;
  while (true) {
    const ssize_t got = ::read(in.fd(), buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) refuse(file, 0, fmt::format("cannot be read: {}", std::strerror(errno)));
    if (got == 0) return text;
    text.append(buffer.data(), static_cast<size_t>(got));
    refuse_past_size_cap(file, text.size());  // a file that grows while it is read
  }
}

struct NestedTooDeep {};

// `text` parsed, refusing nesting past the cap as soon as the parser reaches it (the parser's own
// stack grows with each level); with `exceptions` false, a text that is not JSON is discarded.
json parse_nested_within_cap(const std::string& file, size_t line, const std::string& text, bool exceptions) {
  const json::parser_callback_t within_cap = [](int depth, json::parse_event_t, json&) {
    if (depth > kMaxOtlpNesting) throw NestedTooDeep{};
    return true;
  };
  try {
    return json::parse(text, within_cap, exceptions);
  } catch (const NestedTooDeep&) {
    refuse(file, line, fmt::format("nested deeper than {} levels, the cap of an OTLP/JSON input", kMaxOtlpNesting));
  }
}

std::vector<std::pair<size_t, json>> read_requests(const std::string& file) {
  const std::string text = read_text(file);
  std::vector<std::pair<size_t, json>> requests;
  json whole = parse_nested_within_cap(file, 0, text, false);
  if (!whole.is_discarded()) {
    requests.emplace_back(0, std::move(whole));
    return requests;
  }
  // One request per line, as the OpenTelemetry Collector's file exporter writes them.
  std::istringstream lines(text);
  std::string line;
  size_t number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      requests.emplace_back(number, parse_nested_within_cap(file, number, line, true));
    } catch (const json::exception& error) {
      refuse(file, number,
             fmt::format("not JSON ({}): an OTLP/JSON input is an ExportTraceServiceRequest, or one "
                         "per line",
                         error.what()));
    }
  }
  if (requests.empty()) refuse(file, 0, "empty: no OTLP/JSON request in it");
  return requests;
}

// A hex id of `digits` digits that is not all zeros, as two 64-bit halves (high first).
std::optional<std::array<uint64_t, 2>> hex_id(const json& value, size_t digits) {
  if (!value.is_string()) return std::nullopt;
  const std::string& text = value.get_ref<const std::string&>();
  if (text.size() != digits) return std::nullopt;
  std::array<uint64_t, 2> halves{};
  for (size_t i = 0; i < digits; ++i) {
    const char c = text[i];
    const int nibble = c >= '0' && c <= '9'   ? c - '0'
                       : c >= 'a' && c <= 'f' ? c - 'a' + 10
                       : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                              : -1;
    if (nibble < 0) return std::nullopt;
    uint64_t& half = halves[digits == 32 && i < 16 ? 0 : 1];
    half = half << 4 | static_cast<uint64_t>(nibble);
  }
  if (halves[0] == 0 && halves[1] == 0) return std::nullopt;
  return halves;
}

// A fixed64 of the JSON encoding: a string of digits, or a number. Past int64 (the year 2262)
// it is no time a trace can hold.
std::optional<uint64_t> unix_nanos(const json& span, const char* key) {
  const auto found = span.find(key);
  if (found == span.end()) return std::nullopt;
  uint64_t value = 0;
  if (found->is_number_unsigned()) {
    value = found->get<uint64_t>();
  } else {
    if (!found->is_string()) return std::nullopt;
    const std::string& text = found->get_ref<const std::string&>();
    if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    value = std::stoull(text);
  }
  if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return value;
}

int span_kind(const json& span) {
  const auto found = span.find("kind");
  if (found == span.end()) return 0;
  if (found->is_number_integer()) return found->get<int>();
  if (!found->is_string()) return 0;
  static const std::array<std::string_view, 6> kNames = {"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL",
                                                         "SPAN_KIND_SERVER",      "SPAN_KIND_CLIENT",
                                                         "SPAN_KIND_PRODUCER",    "SPAN_KIND_CONSUMER"};
  const auto named = std::find(kNames.begin(), kNames.end(), found->get_ref<const std::string&>());
  return named == kNames.end() ? 0 : static_cast<int>(named - kNames.begin());
}

// A string field, "" when it is absent or not a string (value() would throw on another type).
std::string text_at(const json& object, const char* key) {
  const auto found = object.find(key);
  return found != object.end() && found->is_string() ? found->get<std::string>() : std::string();
}

const json* array_at(const json& object, const char* key, const char* older_key = nullptr) {
  auto found = object.find(key);
  if (found == object.end() && older_key) found = object.find(older_key);
  return found == object.end() ? nullptr : &*found;
}

// A resource's attribute as text (string or int value); "" when absent.
std::string attribute(const json& resource, std::string_view key) {
  const json* attributes = array_at(resource, "attributes");
  if (!attributes || !attributes->is_array()) return "";
  for (const json& pair : *attributes) {
    if (!pair.is_object() || text_at(pair, "key") != key) continue;
    const auto value = pair.find("value");
    if (value == pair.end() || !value->is_object()) return "";
    for (const char* kind : {"stringValue", "intValue"}) {
      const auto held = value->find(kind);
      if (held == value->end()) continue;
      if (held->is_string()) return held->get<std::string>();
      if (held->is_number_integer()) return std::to_string(held->get<int64_t>());
    }
  }
  return "";
}

// An attribute's value as its event stores it; an array, a list of key/values or bytes as their
// JSON text. Strings are cut as the recorder cuts them (format::stored_attribute_text).
InputAttribute attribute_value(std::string key, const json& value) {
  InputAttribute out;
  out.key = std::move(key);
  auto set_text = [&](const std::string& text) {
    std::string scratch;
    out.text.assign(format::stored_attribute_text(text, scratch));
  };
  if (const auto text = value.find("stringValue"); text != value.end() && text->is_string()) {
    set_text(text->get<std::string>());
  } else if (const auto boolean = value.find("boolValue"); boolean != value.end() && boolean->is_boolean()) {
    out.type = format::EventId::attribute_bool;
    out.bits = boolean->get<bool>() ? 1 : 0;
  } else if (const auto real = value.find("doubleValue"); real != value.end() && real->is_number()) {
    out.type = format::EventId::attribute_float;
    out.bits = std::bit_cast<uint64_t>(real->get<double>());
  } else if (const auto integer = value.find("intValue"); integer != value.end()) {
    // The JSON encoding's int64 is a string of digits, or a number.
    try {
      const int64_t number = integer->is_string() ? std::stoll(integer->get<std::string>()) : integer->get<int64_t>();
      out.type = format::EventId::attribute_int;
      out.bits = static_cast<uint64_t>(number);
    } catch (const std::exception&) {
      set_text(integer->dump());
    }
  } else {
    set_text(value.dump());
  }
  return out;
}

std::vector<InputAttribute> attributes_of(const json& owner) {
  std::vector<InputAttribute> out;
  const json* attributes = array_at(owner, "attributes");
  if (!attributes || !attributes->is_array()) return out;
  for (const json& pair : *attributes) {
    if (!pair.is_object() || text_at(pair, "key").empty()) continue;
    const auto value = pair.find("value");
    if (value == pair.end() || !value->is_object()) continue;
    out.push_back(attribute_value(text_at(pair, "key"), *value));
  }
  return out;
}

// A span's events, by time, each within its span (a time outside it is moved to its nearer end).
std::vector<InputEvent> events_of(const json& span, uint64_t start, uint64_t end) {
  std::vector<InputEvent> out;
  const json* events = array_at(span, "events");
  if (!events || !events->is_array()) return out;
  for (const json& event : *events) {
    if (!event.is_object()) continue;
    InputEvent& added = out.emplace_back();
    added.time = std::clamp(unix_nanos(event, "timeUnixNano").value_or(start), start, end);
    added.name = text_at(event, "name");
    if (added.name.empty()) added.name = "(unnamed)";
    added.attributes = attributes_of(event);
  }
  std::stable_sort(out.begin(), out.end(), [](const InputEvent& a, const InputEvent& b) { return a.time < b.time; });
  return out;
}

// OTLP's status: code 2 (STATUS_CODE_ERROR) is a failure, with its message.
void read_status(const json& span, InputSpan& out) {
  const auto status = span.find("status");
  if (status == span.end() || !status->is_object()) return;
  const auto code = status->find("code");
  if (code == status->end()) return;
  out.failed = (code->is_number_integer() && code->get<int>() == 2) ||
               (code->is_string() && code->get<std::string>() == "STATUS_CODE_ERROR");
  if (out.failed) out.status_message = text_at(*status, "message");
}

class SpanReader {
 public:
  SpanReader(std::string file, OtlpConversion& conversion) : file_(std::move(file)), conversion_(conversion) {}

  void read_request(size_t line, const json& request) {
    const json* resource_spans = request.is_object() ? array_at(request, "resourceSpans") : nullptr;
    if (!resource_spans || !resource_spans->is_array())
      refuse(file_, line, "not an OTLP/JSON trace request: no \"resourceSpans\" array (an ExportTraceServiceRequest)");
    for (const json& entry : *resource_spans) {
      if (!entry.is_object()) refuse(file_, line, "a resourceSpans entry is not an object");
      static const json kNoResource = json::object();
      const auto resource_field = entry.find("resource");
      const json& resource =
          resource_field != entry.end() && resource_field->is_object() ? *resource_field : kNoResource;
      Resource& into = resource_of(resource, line);
      const json* scopes = array_at(entry, "scopeSpans", "instrumentationLibrarySpans");
      if (!scopes) continue;
      if (!scopes->is_array()) refuse(file_, line, "\"scopeSpans\" is not an array");
      for (const json& scope : *scopes) read_scope(scope, line, into);
    }
  }

  std::map<ResourceKey, Resource>& resources() { return resources_; }
  uint64_t seen() const { return seen_; }

 private:
  Resource& resource_of(const json& resource, size_t line) {
    std::string service = attribute(resource, "service.name");
    std::string host = attribute(resource, "host.name");
    const std::string pid_text = attribute(resource, "process.pid");
    int32_t pid = 0;
    if (!pid_text.empty()) {
      try {
        pid = static_cast<int32_t>(std::stol(pid_text));
      } catch (const std::exception&) {
        refuse(file_, line, fmt::format("process.pid \"{}\" is not a number", pid_text));
      }
    }
    if (service.empty()) service = "unknown_service";  // OpenTelemetry's name for a service without one
    if (host.empty()) host = "otlp";
    const std::string host_id = attribute(resource, "host.id");
    Resource& found = resources_[{service, host, host_id, pid}];
    found.service = service;
    found.host = host;
    found.host_id = host_id;
    found.pid = pid;
    return found;
  }

  void read_scope(const json& scope_spans, size_t line, Resource& into) {
    if (!scope_spans.is_object()) refuse(file_, line, "a scopeSpans entry is not an object");
    std::string scope = "otlp";
    const auto scope_field = scope_spans.find(scope_spans.contains("scope") ? "scope" : "instrumentationLibrary");
    if (scope_field != scope_spans.end() && scope_field->is_object() && !text_at(*scope_field, "name").empty())
      scope = text_at(*scope_field, "name");
    const json* spans = array_at(scope_spans, "spans");
    if (!spans) return;
    if (!spans->is_array()) refuse(file_, line, "\"spans\" is not an array");
    for (const json& span : *spans) {
      if (!span.is_object()) refuse(file_, line, "a span is not an object");
      ++seen_;
      read_span(span, line, scope, into);
    }
  }

  void leave_out(size_t line, const json& span, const std::string& reason) {
    if (conversion_.left_out_count() == 0)
      conversion_.first_left_out = fmt::format("{}span \"{}\": {}", line == 0 ? "" : fmt::format("line {}: ", line),
                                               text_at(span, "name"), reason);
    ++conversion_.left_out[reason];
  }

  void read_span(const json& span, size_t line, const std::string& scope, Resource& into) {
    InputSpan out;
    const auto trace = hex_id(span.value("traceId", json()), 32);
    if (!trace) return leave_out(line, span, "traceId is not 32 hex digits (not all zero)");
    const auto id = hex_id(span.value("spanId", json()), 16);
    if (!id) return leave_out(line, span, "spanId is not 16 hex digits (not all zero)");
    const json parent = span.value("parentSpanId", json(""));
    if (!(parent.is_string() &&
          (parent.get<std::string>().empty() || parent.get<std::string>() == "0000000000000000"))) {
      const auto parent_id = hex_id(parent, 16);
      if (!parent_id) return leave_out(line, span, "parentSpanId is not empty or 16 hex digits");
      out.parent = (*parent_id)[1];
    }
    const auto start = unix_nanos(span, "startTimeUnixNano");
    const auto end = unix_nanos(span, "endTimeUnixNano");
    if (!start || *start == 0) return leave_out(line, span, "startTimeUnixNano missing or not a number");
    if (!end || *end == 0) return leave_out(line, span, "endTimeUnixNano missing or not a number");
    if (*end < *start) return leave_out(line, span, "endTimeUnixNano before startTimeUnixNano");
    out.trace_high = (*trace)[0];
    out.trace_low = (*trace)[1];
    out.id = (*id)[1];
    out.kind = span_kind(span);
    out.name = text_at(span, "name");
    if (out.name.empty()) out.name = "(unnamed)";
    out.scope = scope;
    out.start = *start;
    out.end = *end;
    out.attributes = attributes_of(span);
    out.events = events_of(span, out.start, out.end);
    read_status(span, out);
    out.trace_state = text_at(span, "traceState");
    into.spans.push_back(std::move(out));
  }

  std::string file_;
  OtlpConversion& conversion_;
  std::map<ResourceKey, Resource> resources_;
  uint64_t seen_ = 0;
};

// 64 bits of FNV-1a over `text`, from `basis`.
uint64_t fnv1a(std::string_view text, uint64_t basis) {
  for (char c : text) basis = (basis ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  return basis;
}

// The same file's same resource gets the same uuid, so that merge refuses it given twice.
std::array<uint8_t, 16> resource_uuid(const std::string& content_digest, const Resource& resource) {
  std::string key = fmt::format("{}\n{}\n{}\n{}", content_digest, resource.service, resource.host, resource.pid);
  if (!resource.host_id.empty()) key += "\n" + resource.host_id;
  std::array<uint8_t, 16> uuid{};
  const uint64_t halves[2] = {fnv1a(key, 0xcbf29ce484222325ULL), fnv1a(key, 0x84222325cbf29ce4ULL)};
  for (int i = 0; i < 16; ++i) uuid[i] = static_cast<uint8_t>(halves[i / 8] >> (56 - 8 * (i % 8)));
  uuid[6] = static_cast<uint8_t>((uuid[6] & 0x0f) | 0x80);  // a name-based uuid (version 8: custom)
  uuid[8] = static_cast<uint8_t>((uuid[8] & 0x3f) | 0x80);
  return uuid;
}

// The resolution of the service's clock: whole milliseconds or microseconds when every start of
// at least 8 spans is one (a chance of 1e-24 for times of nanoseconds), else 0: nanoseconds. The
// starts decide: the OpenTelemetry JS SDK takes a span's start from Date.now() (whole ms) and its
// end from a finer clock counted from that start, so every time of the span shares the start's
// error.
uint64_t detected_resolution(const std::vector<InputSpan>& spans) {
  if (spans.size() < 8) return 0;
  const auto all_starts = [&](uint64_t unit) {
    return std::all_of(spans.begin(), spans.end(), [unit](const InputSpan& span) { return span.start % unit == 0; });
  };
  return all_starts(1'000'000) ? 1'000'000 : all_starts(1'000) ? 1'000 : 0;
}

OtlpProcess write_resource(Resource& resource, const std::string& digest, const std::string& directory) {
  uint64_t base = ~uint64_t{0};
  for (const InputSpan& span : resource.spans) base = std::min(base, span.start);
  format::TraceDescription description;
  description.uuid = resource_uuid(digest, resource);
  // Ticks are nanoseconds since the first span began; the wall-clock reference places them, as a
  // recorded trace's is placed.
  description.clock = {1'000'000'000, 0, 0, base, 0, 0};
  description.pid = resource.pid;
  description.process_name = resource.service;
  description.hostname = resource.host;
  description.time_resolution_ns = detected_resolution(resource.spans);
  description.host_id = resource.host_id;
  description.source = std::string(format::kSourceOtlp);
  format::TraceWriter writer(description);
  write_span_lanes(resource.spans, writer, base);
  writer.write(directory);
  return {directory, resource.service, resource.host, resource.pid, resource.spans.size()};
}

}  // namespace

uint64_t OtlpConversion::left_out_count() const {
  uint64_t count = 0;
  for (const auto& [reason, spans] : left_out) count += spans;
  return count;
}

bool is_otlp_input(const std::string& input) {
  std::error_code error;
  const auto status = std::filesystem::status(input, error);
  return !error && std::filesystem::exists(status) && !std::filesystem::is_directory(status);
}

OtlpConversion convert_otlp_file(const std::string& file, const std::string& staging) {
  OtlpConversion conversion;
  SpanReader reader(file, conversion);
  std::string digest;
  for (const auto& [line, request] : read_requests(file)) {
    reader.read_request(line, request);
    digest = fmt::format("{:016x}", fnv1a(request.dump(), fnv1a(digest, 0xcbf29ce484222325ULL)));
  }
  if (reader.seen() == 0) refuse(file, 0, "no spans in it");
  size_t index = 0;
  for (auto& [key, resource] : reader.resources()) {
    if (resource.spans.empty()) continue;
    const std::string directory = fmt::format("{}/{}-{}", staging, ++index, path_part(resource.service));
    conversion.processes.push_back(write_resource(resource, digest, directory));
  }
  if (conversion.processes.empty())
    refuse(file, 0,
           fmt::format("none of its {} spans could be read (the first: {})", reader.seen(), conversion.first_left_out));
  return conversion;
}

}  // namespace chronicle::merge
