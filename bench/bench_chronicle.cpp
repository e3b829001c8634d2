// Cost of a chronicle span (begin + end): recorded, runtime-disabled, category off and compiled out
// (compiled_out.cpp), next to the baselines of baselines.hpp, all in one run.
//
// The recorded case runs a real session: chronicle::start() with an output directory under
// $CHRONICLE_BENCH_TMP (default /tmp), stream mode and default buffers, so the in-process
// collector drains the rings to disk while the threads write. After each run the trace is
// read back with the reader library and its size is reported per event (counter "B/event").
#include <chronicle/chronicle.hpp>

#include <benchmark/benchmark.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include "baselines.hpp"
#include "format/packet_decoder.hpp"
#include "reader/trace_reader.hpp"

namespace {

namespace fs = std::filesystem;

std::string bench_tmp_root() {
  const char* root = std::getenv("CHRONICLE_BENCH_TMP");
  return root && *root ? root : "/tmp";
}

// A fresh trace directory per run: <root>/chronicle-bench-<pid>/span-<n>.
std::string next_trace_dir() {
  static std::atomic<unsigned> serial{0};
  const fs::path dir = fs::path(bench_tmp_root()) / ("chronicle-bench-" + std::to_string(getpid())) /
                       ("span-" + std::to_string(serial++));
  fs::remove_all(dir);
  return dir.string();
}

struct TraceFigures {
  uint64_t events = 0;        // events read back from the thread streams
  uint64_t thread_bytes = 0;  // sizes of the thread-* files
  uint64_t discarded = 0;     // as recorded in the packets (events the writer could not store)
  bool ok = false;
  std::string error;
};

TraceFigures measure_trace(const std::string& dir) {
  TraceFigures figures;
  try {
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_regular_file() && entry.path().filename().string().rfind("thread-", 0) == 0)
        figures.thread_bytes += entry.file_size();
    chronicle::reader::Trace trace(dir);
    for (size_t stream = 0; stream < trace.streams().size(); ++stream)
      trace.for_each_in_stream(stream, [&figures](const chronicle::reader::Event&) {
        ++figures.events;
        return true;
      });
    figures.discarded = trace.events_discarded();
    figures.ok = true;
  } catch (const std::exception& error) {
    figures.error = error.what();
  }
  return figures;
}

// Diagnostic knob: CHRONICLE_BENCH_DRAIN_MS overrides Config::drain_interval (default 10 ms).
std::chrono::milliseconds drain_interval() {
  const char* text = std::getenv("CHRONICLE_BENCH_DRAIN_MS");
  return text && *text ? std::chrono::milliseconds(std::atoi(text)) : chronicle::Config{}.drain_interval;
}

// CPU time of the whole process, every thread's (the writers', the collector's), in seconds.
double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

// Recorded: a session runs with an output directory, the category is on. Stream mode: the
// in-process collector drains the rings while the threads write, and drops what does not fit.
// Flight mode: nothing is drained during the run and the oldest packets are overwritten, so
// the loop measures the writer alone, with no drop path (the trace holds the last 4 MiB).
//
// Google Benchmark's CPU time is the writing thread's own. The counter "process CPU ns/span" is
// what the process spent per span from start() to stop() on all its threads, the collector's
// draining and writing included: what a user pays for a span.
template <typename Body>
void run_recorded(benchmark::State& state, chronicle::Mode mode, int events_per_span, Body body) {
  std::string dir;
  double cpu_before = 0;
  if (state.thread_index() == 0) {
    cpu_before = process_cpu_seconds();
    dir = next_trace_dir();
    chronicle::Config config;  // default buffers: 4 MiB per thread in 64 KiB packets
    config.output = dir;
    config.mode = mode;
    config.drain_interval = drain_interval();
    if (!chronicle::start(config)) state.SkipWithError(("chronicle::start: " + chronicle::last_error()).c_str());
  }
  // Every thread passes a barrier before its first iteration and after its last, so the
  // session is running for the whole timed loop of every thread.
  for (auto _ : state) {
    body();
    benchmark::ClobberMemory();
  }
  if (state.thread_index() != 0) return;
  chronicle::stop();  // joins the collector, which writes the rest of the trace
  const double process_cpu = process_cpu_seconds() - cpu_before;
  const TraceFigures figures = measure_trace(dir);
  if (!figures.ok) {
    state.SkipWithError(("reading the trace: " + figures.error).c_str());
    return;
  }
  const double attempted = events_per_span * static_cast<double>(state.iterations()) * state.threads();
  state.counters["process CPU ns/span"] = 1e9 * process_cpu / (attempted / events_per_span);
  state.counters["B/event"] =
      figures.events ? static_cast<double>(figures.thread_bytes) / static_cast<double>(figures.events) : 0.0;
  state.counters["events"] = static_cast<double>(figures.events);
  state.counters["discarded"] = static_cast<double>(figures.discarded);
  // Events that are not in the trace, against 2 per span: a dropped begin makes its span skip
  // the end too, so in stream mode this can exceed `discarded`; in flight mode it is what
  // was overwritten.
  state.counters["lost%"] = 100.0 * (attempted - static_cast<double>(figures.events)) / attempted;
  std::error_code ignored;
  fs::remove_all(dir, ignored);  // a run writes hundreds of MB
}

void run_recorded_spans(benchmark::State& state, chronicle::Mode mode) {
  run_recorded(state, mode, 2, [] { CHRONICLE_SPAN("bench", "span"); });
}

namespace format = chronicle::format;

// One closed packet of alternating span_begin / span_end events, 20 ticks apart.
std::vector<uint8_t> make_span_packet(size_t packet_size) {
  std::vector<uint8_t> packet(packet_size);
  auto* header = new (packet.data()) format::PacketHeader{};
  header->magic = format::kPacketMagic;
  header->stream_id = format::kStreamThread;
  header->timestamp_begin = 0;
  size_t pos = format::kPacketHeaderSize;
  uint64_t ticks = 0;
  auto compact = [&](format::EventId id) {
    ticks += 20;
    const uint32_t word = static_cast<uint32_t>(id) | static_cast<uint32_t>(ticks & format::kCompactTimestampMask)
                                                          << format::kCompactIdBits;
    std::memcpy(packet.data() + pos, &word, 4);
    pos += 4;
  };
  while (pos + 12 <= packet_size) {
    compact(format::EventId::span_begin);
    const uint32_t site = 1;
    std::memcpy(packet.data() + pos, &site, 4);
    pos += 4;
    compact(format::EventId::span_end);
  }
  header->timestamp_end.store(ticks);
  header->content_size_bits.store(pos * 8);
  header->packet_size_bits = packet_size * 8;
  return packet;
}

}  // namespace

extern "C" {

void bm_span_enabled(benchmark::State& state) {
  run_recorded_spans(state, chronicle::Mode::stream);
}

void bm_span_enabled_flight(benchmark::State& state) {
  run_recorded_spans(state, chronicle::Mode::flight);
}

// Runtime-disabled: compiled in, but no session runs.
void bm_span_disabled(benchmark::State& state) {
  if (chronicle::active()) state.SkipWithError("a session is running");
  for (auto _ : state) {
    CHRONICLE_SPAN("bench", "span");
    benchmark::ClobberMemory();
  }
}

// Category off at run time: a session runs (armed, as CHRONICLE_ARMED=1 starts one: every
// category off until `chronicle ctl` switches some on), and the span's category is off.
void bm_span_category_off(benchmark::State& state) {
  chronicle::Config config;
  config.armed = true;
  config.mode = chronicle::Mode::flight;
  if (!chronicle::start(config)) {
    state.SkipWithError(("chronicle::start: " + chronicle::last_error()).c_str());
    return;
  }
  for (auto _ : state) {
    CHRONICLE_SPAN("bench", "span");
    benchmark::ClobberMemory();
  }
  chronicle::stop();
}

void bm_span_compiled_out(benchmark::State& state);  // compiled_out.cpp

// Spans with attributes and named at run time (issue 43's benchmark), beside the plain span in
// flight mode (the writer alone). Each attribute is an event of its own after the begin.
void bm_span_two_int_attributes_flight(benchmark::State& state) {
  int64_t user = 0;
  run_recorded(state, chronicle::Mode::flight, 4, [&user] {
    ++user;
    CHRONICLE_SPAN_ARGS("bench", "span", "user.id", user, "shard", user & 15);
  });
}

void bm_span_string_attribute_flight(benchmark::State& state) {
  const std::string route = "/api/v2/customers/{id}/quotes/x";  // 32 bytes
  run_recorded(state, chronicle::Mode::flight, 3,
               [&route] { CHRONICLE_SPAN_ARGS("bench", "span", "http.route", route); });
}

void bm_span_dynamic_name_flight(benchmark::State& state) {
  const std::string name = "customer acme-corporation";  // cached after its first use
  run_recorded(state, chronicle::Mode::flight, 2, [&name] { CHRONICLE_SPAN_DYNAMIC("bench", name); });
}

// What the collector does to every event it copies: Collector::count_events decodes each
// packet with format::PacketDecoder to count its events. Measured on a 64 KiB packet of spans
// laid out as the writer lays them out (compact headers; begin = 8 bytes, end = 4 bytes).
void bm_collector_decode(benchmark::State& state) {
  const std::vector<uint8_t> packet = make_span_packet(chronicle::Config{}.packet_size);
  const auto& header = *reinterpret_cast<const format::PacketHeader*>(packet.data());
  const uint64_t content = header.content_size_bits.load() / 8;
  uint64_t per_packet = 0;
  for (auto _ : state) {
    format::PacketDecoder decoder(packet.data(), content);
    format::RawEvent event;
    uint64_t events = 0;
    while (decoder.next(event)) ++events;
    benchmark::DoNotOptimize(events);
    per_packet = events;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * per_packet));
  state.counters["ns/event"] = benchmark::Counter(static_cast<double>(state.iterations() * per_packet),
                                                  benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["events/packet"] = static_cast<double>(per_packet);
}

}  // extern "C"

// With N threads Google Benchmark reports as Time the threads' mean wall time divided by the
// spans of all threads (so N x Time is one thread's wall time per span) and as CPU each
// thread's own CPU time per span (the collector's thread is not in it: the counter "process CPU
// ns/span" has it).
BENCHMARK(bm_span_enabled)->Threads(1)->Threads(2);
BENCHMARK(bm_span_enabled_flight)->Threads(1)->Threads(2);
BENCHMARK(bm_span_two_int_attributes_flight);
BENCHMARK(bm_span_string_attribute_flight);
BENCHMARK(bm_span_dynamic_name_flight);
BENCHMARK(bm_span_disabled);
BENCHMARK(bm_span_category_off);
BENCHMARK(bm_span_compiled_out);
BENCHMARK(bm_collector_decode);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ignored;
  fs::remove_all(fs::path(bench_tmp_root()) / ("chronicle-bench-" + std::to_string(getpid())), ignored);
  return 0;
}
