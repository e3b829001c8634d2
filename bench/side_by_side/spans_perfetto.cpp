// bench/side_by_side.sh's loop with Perfetto's tracing SDK: TRACE_EVENT per span, the in-process
// tracing service writing the trace into a file while it runs. Built by the script against the
// SDK's amalgamated perfetto.h and perfetto.cc. Not part of the build.
//
//   spans_perfetto SPANS OUTPUT
#include <fcntl.h>
#include <perfetto.h>
#include <unistd.h>

#include "loop.hpp"

PERFETTO_DEFINE_CATEGORIES(perfetto::Category("bench").SetDescription("bench/side_by_side.sh"));
PERFETTO_TRACK_EVENT_STATIC_STORAGE();

namespace {

std::unique_ptr<perfetto::TracingSession> start_tracing(int file) {
  perfetto::TraceConfig config;
  // Written into the file every 100 ms; the buffer holds far more than 100 ms of spans.
  config.add_buffers()->set_size_kb(256 * 1024);
  config.set_write_into_file(true);
  config.set_file_write_period_ms(100);
  config.add_data_sources()->mutable_config()->set_name("track_event");
  std::unique_ptr<perfetto::TracingSession> session = perfetto::Tracing::NewTrace();
  session->Setup(config, file);
  session->StartBlocking();
  return session;
}

// Chunks of events the service overwrote, discarded or could not patch: each a loss.
uint64_t chunks_lost(perfetto::TracingSession& session) {
  const perfetto::TracingSession::GetTraceStatsCallbackArgs reply = session.GetTraceStatsBlocking();
  perfetto::protos::gen::TraceStats stats;
  if (!reply.success || !stats.ParseFromArray(reply.trace_stats_data.data(), reply.trace_stats_data.size()))
    return UINT64_MAX;
  uint64_t lost = stats.chunks_discarded();
  for (const auto& buffer : stats.buffer_stats())
    lost += buffer.chunks_overwritten() + buffer.chunks_discarded() + buffer.patches_failed() + buffer.abi_violations();
  return lost;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: spans_perfetto SPANS OUTPUT\n");
    return 2;
  }
  const uint64_t spans = std::strtoull(argv[1], nullptr, 10);
  const int file = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (spans == 0 || file < 0) {
    std::fprintf(stderr, "spans_perfetto: bad SPANS or cannot create %s\n", argv[2]);
    return 2;
  }
  perfetto::TracingInitArgs init;
  init.backends = perfetto::kInProcessBackend;
  perfetto::Tracing::Initialize(init);
  perfetto::TrackEvent::Register();
  std::unique_ptr<perfetto::TracingSession> session = start_tracing(file);
  const double seconds = side_by_side::timed_loop(spans, [] {
    TRACE_EVENT("bench", "span");
    side_by_side::empty_statement();
  });
  perfetto::TrackEvent::Flush();
  const uint64_t lost = chunks_lost(*session);
  session->StopBlocking();
  close(file);
  side_by_side::report("perfetto", spans, seconds);
  std::printf("side_by_side: perfetto_chunks_lost=%llu\n", static_cast<unsigned long long>(lost));
  return 0;
}
