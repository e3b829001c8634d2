// OTLP/HTTP push: a trace's spans (thread spans and task lifecycles) sent to a collector as
// ExportTraceServiceRequest batches, POSTed to ENDPOINT/v1/traces in protobuf or JSON.
//
// The trace is read once; batches are encoded as it is read and handed to a sender thread
// through a bounded queue, so memory holds a few batches, never the whole trace. A batch that
// fails on a connection error or on HTTP 429, 502, 503 or 504 is retried with exponential
// backoff (Retry-After honoured) within a time budget. When the budget runs out the collector is
// taken as down: that batch and every later one are written to a spool directory, one file per
// batch, which resend_otlp_spool() sends later (deleting each file once the collector took it).
// A batch the collector refuses outright (another 4xx or 5xx) is spooled too and reported.
// Delivery is at least once: a batch whose answer was lost (a timeout) is sent again.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "export/otlp_requests.hpp"
#include "export/otlp_spans.hpp"

namespace chronicle::exports {

struct OtlpPushProgress {
  uint64_t events_read = 0;
  uint64_t spans_produced = 0;
  uint64_t spans_sent = 0;
  uint64_t spans_spooled = 0;
};

struct OtlpPushOptions {
  std::string endpoint;                 // http://HOST:PORT[/PATH]; /v1/traces is added unless PATH ends with it
  bool endpoint_is_traces_url = false;  // the endpoint is the whole URL (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
  std::vector<std::pair<std::string, std::string>> headers;  // sent with every request
  bool gzip = false;                                         // request bodies gzip-compressed
  OtlpProtocol protocol = OtlpProtocol::http_protobuf;
  size_t spans_per_batch = 2048;
  size_t queued_batches = 4;  // encoded batches waiting for the sender, at most
  // Per attempt, whole: connect, send and the answer (a collector trickling its answer a byte at
  // a time is cut off at it).
  std::chrono::milliseconds request_timeout{10'000};
  std::chrono::milliseconds retry_budget{30'000};  // per batch, from its first attempt
  std::chrono::milliseconds first_backoff{100};
  std::chrono::milliseconds max_backoff{5'000};
  std::string spool_directory;  // where batches go when the collector is down
  // When set (a signal handler may set it: it is lock-free), the attempt in flight ends within
  // ~50 ms and every batch not sent goes to the spool, with no further attempt.
  const std::atomic<bool>* cancel = nullptr;
  // Called on the reading thread about every million events and once a second while a resend
  // or the last batches are waiting.
  std::function<void(const OtlpPushProgress&)> on_progress;
};

struct OtlpPushResult {
  std::string url;  // where the requests went
  uint64_t spans_produced = 0;
  uint64_t spans_sent = 0;  // accepted by the collector (rejected_spans included: it answered)
  uint64_t batches_sent = 0;
  uint64_t spans_spooled = 0;  // in spool files, to be resent
  uint64_t batches_spooled = 0;
  uint64_t spans_rejected = 0;  // the collector's partial-success count: it will not take them
  uint64_t spans_lost = 0;      // neither sent nor spooled (the spool could not be written)
  uint64_t retries = 0;
  std::string last_error;  // the reason of the last failure ("HTTP 503", "Connection refused"...)
  // Why the trace could not be read to its end (reader::TraceError...); what was read before
  // is counted above, sent or spooled.
  std::exception_ptr read_failure;
  bool delivered() const { return spans_spooled == 0 && spans_rejected == 0 && spans_lost == 0 && !read_failure; }
};

// The URL requests go to, or std::invalid_argument naming what is wrong with `endpoint`.
std::string otlp_traces_url(const std::string& endpoint, bool whole_url = false);

// Pushes every span of the traces. Malformed input ends the reading: the batches already made
// are sent or spooled, and the error is in read_failure. Throws std::invalid_argument on a bad
// endpoint.
OtlpPushResult push_otlp(const std::vector<reader::Trace>& traces, const OtlpPushOptions& options);

// A push fed in rounds (`record --otlp-endpoint` while the program runs): one sender thread,
// one spool for the whole run. The spans handed to sink() go out in batches as they fill, and
// at each flush(). The collector taken as down is tried again at each retry_spool(): once it
// answers, the batches this push spooled go first (and leave the spool), then the new ones.
class OtlpPushSession {
 public:
  // Throws std::invalid_argument on a bad endpoint.
  explicit OtlpPushSession(const OtlpPushOptions& options);
  ~OtlpPushSession();
  OtlpPushSession(const OtlpPushSession&) = delete;
  OtlpPushSession& operator=(const OtlpPushSession&) = delete;

  // Spans given here may wait for the sender while it retries (the queue holds a few batches).
  OtlpSpanSink& sink();
  void flush();
  void retry_spool();
  // Waits for the sender. spans_produced counts every span given to sink().
  OtlpPushResult finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Sends the batches spooled in options.spool_directory, oldest first, each in the encoding it
// was spooled in, and deletes each one the collector took. What stays is counted as spooled.
OtlpPushResult resend_otlp_spool(const OtlpPushOptions& options);

}  // namespace chronicle::exports
