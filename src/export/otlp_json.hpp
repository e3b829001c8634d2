// OTLP/JSON: an ExportTraceServiceRequest (the OTLP JSON encoding: ids as hex, times as decimal
// strings of unix nanoseconds, enums as integers), as an OpenTelemetry collector or backend
// takes it. One resource per process; spans for thread spans and for tasks; notes and instants
// as span events; waits and resolutions as span links; failed tasks with an error status.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "export/export_common.hpp"
#include "export/otlp_spans.hpp"

namespace chronicle::exports {

// The ids OTLP gives a process's spans. The trace id is the trace's uuid (128 random bits the
// recorder chose). A span id is a bijective 64-bit mix of a key unique in the process (a task's
// id; a thread span's begin sequence with the top bit set) with the uuid's first 8 bytes: ids
// are unique within a process by construction and look random, as OTLP wants, and exporting
// the same trace again gives the same ids.
class OtlpIds {
 public:
  explicit OtlpIds(const std::array<uint8_t, 16>& trace_uuid);
  const std::string& trace_id() const { return trace_id_; }
  const OtlpTraceId& trace_id_bytes() const { return trace_id_bytes_; }
  uint64_t task_span(uint64_t task_id) const { return mix(task_id); }
  uint64_t thread_span(uint64_t sequence) const { return mix(sequence | (uint64_t{1} << 63)); }

 private:
  uint64_t mix(uint64_t key) const;
  std::string trace_id_;  // 32 lowercase hex digits
  OtlpTraceId trace_id_bytes_{};
  uint64_t salt_ = 0;
};

// The OTLP/JSON encoding of the producer's spans, in pieces a request is assembled from:
//   {"resourceSpans":[ RESOURCE SPAN, SPAN, ... RESOURCE-END RESOURCE ... ]}
// `first` leaves out the comma before the first resource of a request. `open_scope` is the scope
// whose ScopeSpans is open in the resource ("" when none yet): consecutive spans of one scope
// share a ScopeSpans, a change of scope starts another (OTLP allows a scope more than once), so
// nothing is held back.
void append_otlp_json_resource(std::string& out, const OtlpResource& resource, bool first);
void append_otlp_json_span(std::string& out, const OtlpSpan& span, std::string& open_scope);
void append_otlp_json_resource_end(std::string& out, std::string& open_scope);

// Writes the traces (one record run) as one request to `path`, spans as they are read. Throws
// reader::TraceError on malformed input, std::runtime_error when the file cannot be written.
void export_otlp_json(const std::vector<reader::Trace>& traces, const std::string& path,
                      const ExportOptions& options = {});

}  // namespace chronicle::exports
