// OTLP/JSON files of spans (from services instrumented with OpenTelemetry in other languages) as
// inputs of `chronicle merge`: each resource becomes a trace of its own, on the same timeline.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace chronicle::merge {

// One trace made of an OTLP/JSON file: the spans of one resource (a process of a service).
struct OtlpProcess {
  std::string directory;  // the trace written
  std::string service;
  std::string host;
  int32_t pid = 0;
  uint64_t spans = 0;
};

struct OtlpConversion {
  std::vector<OtlpProcess> processes;
  // Spans left out, by reason ("endTimeUnixNano before startTimeUnixNano", ...), and the first one.
  std::map<std::string, uint64_t> left_out;
  std::string first_left_out;
  uint64_t left_out_count() const;
};

// What an OTLP/JSON input may cost (docs/guarantees.md): its size, and how deep its arrays and
// objects may nest.
inline constexpr uint64_t kMaxOtlpInputBytes = uint64_t{256} << 20;
inline constexpr int kMaxOtlpNesting = 64;

// Whether `input` is to be read as OTLP/JSON: a file rather than a directory.
bool is_otlp_input(const std::string& input);

// Reads `file`, an OTLP/JSON ExportTraceServiceRequest (resourceSpans -> scopeSpans -> spans, as
// the OTLP/HTTP JSON encoding writes it) or one such request per line (the Collector's file
// exporter), and writes a chronicle trace per resource (service.name, host.name, process.pid)
// into a new subdirectory of `staging`. A span of kind SERVER or CONSUMER becomes a receive with
// its trace id, span id and parent; one of kind CLIENT or PRODUCER carries a send with its span
// id: a message pair with the chronicle trace at the other end. Times are Unix nanoseconds: each
// trace's clock reference is the wall clock. Spans with bad ids or times are left out and counted.
// Throws format::InputError, naming the file and what is wrong, when it is not such a file.
OtlpConversion convert_otlp_file(const std::string& file, const std::string& staging);

}  // namespace chronicle::merge
