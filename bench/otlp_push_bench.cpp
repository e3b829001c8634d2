// OTLP push throughput on one trace (docs/performance-log.md): the span producer alone, with each
// encoder, and the whole push to a collector URL (bench/otlp_sink, or any collector).
//   otlp_push_bench TRACE_DIR [http://127.0.0.1:PORT]
// Run it pinned to one core (taskset -c 0) with the sink on another: the push's reading and
// encoding thread and its sender thread then share that core.
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <functional>

#include "export/otlp_push.hpp"

namespace {

using namespace chronicle::exports;

class CountingSink final : public OtlpSpanSink {
 public:
  explicit CountingSink(OtlpRequestEncoder* encoder) : encoder_(encoder) {}
  void begin_resource(const OtlpResource& resource) override {
    resource_ = resource;
    resource_needed_ = true;
  }
  void span(const OtlpSpan& span) override {
    ++spans;
    if (!encoder_) return;
    if (resource_needed_) encoder_->begin_resource(resource_);
    resource_needed_ = false;
    encoder_->add_span(span);
    if (++in_batch_ == 2048) {
      encoder_->end_resource();
      bytes += encoder_->finish().size();
      in_batch_ = 0;
      // The request goes on with the same resource, as the push's batching does.
      resource_needed_ = true;
    }
  }
  void end_resource() override {
    if (encoder_ && !resource_needed_) encoder_->end_resource();
    resource_needed_ = true;
  }
  uint64_t spans = 0;
  uint64_t bytes = 0;

 private:
  OtlpRequestEncoder* encoder_;
  OtlpResource resource_;
  uint64_t in_batch_ = 0;
  bool resource_needed_ = false;
};

// Best of three runs of `body`, which returns the spans it handled: per second of wall time,
// and per second of this process's CPU time (every thread's: the figure for one core when
// the machine is shared and the wall clock counts other programs' time too).
void measure(const std::string& what, const std::function<uint64_t()>& body) {
  double best_wall = 0, best_cpu = 0;
  uint64_t spans = 0;
  for (int run = 0; run < 3; ++run) {
    const auto start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    spans = body();
    const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best_wall = std::max(best_wall, spans / wall);
    best_cpu = std::max(best_cpu, spans / cpu);
  }
  fmt::print("{:<40} {:>9} spans {:>10.0f} spans/s wall {:>10.0f} spans/cpu-s\n", what, spans, best_wall, best_cpu);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: otlp_push_bench TRACE_DIR [URL]\n");
    return 2;
  }
  const std::vector<chronicle::reader::Trace> traces = open_traces(argv[1]);
  const auto produce = [&](OtlpRequestEncoder* encoder) {
    CountingSink sink(encoder);
    ExportOptions options;
    ProgressCounter progress(options);
    produce_otlp_spans(traces, sink, progress);
    return sink.spans;
  };
  measure("producer (read, task graph, spans)", [&] { return produce(nullptr); });
  for (const OtlpProtocol protocol : {OtlpProtocol::http_protobuf, OtlpProtocol::http_json}) {
    measure(fmt::format("producer + {} encoder", otlp_protocol_name(protocol)), [&] {
      const auto encoder = make_otlp_request_encoder(protocol);
      return produce(encoder.get());
    });
  }
  if (argc < 3) return 0;
  for (const OtlpProtocol protocol : {OtlpProtocol::http_protobuf, OtlpProtocol::http_json}) {
    measure(fmt::format("push {}", otlp_protocol_name(protocol)), [&] {
      OtlpPushOptions options;
      options.endpoint = argv[2];
      options.protocol = protocol;
      options.spool_directory = "/tmp/otlp_push_bench-spool";
      const OtlpPushResult result = push_otlp(traces, options);
      if (!result.delivered()) fmt::print(stderr, "not delivered: {}\n", result.last_error);
      return result.spans_sent;
    });
  }
}
