// What a W3C traceparent costs (chronicle/context.hpp): parsing a valid header and an invalid
// one, formatting a context's header, and send_traceparent() with a session recording (a
// send's event and a new span id). Figures: docs/performance-log.md, "Context propagation's cost".
#include <benchmark/benchmark.h>

#include <chronicle/chronicle.hpp>
#include <chronicle/context.hpp>
#include <stdexcept>
#include <string>

#include "scratch_shm.hpp"

namespace {

constexpr const char* kValid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
// Well formed but for its last character: the parser reads the whole header before refusing it.
constexpr const char* kInvalid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g";

void BM_ParseValid(benchmark::State& state) {
  const std::string header = kValid;
  for (auto _ : state) {
    auto context = chronicle::TraceContext::parse(header);
    benchmark::DoNotOptimize(context);
  }
  if (!chronicle::TraceContext::parse(header)) state.SkipWithError("the valid header did not parse");
}
BENCHMARK(BM_ParseValid);

void BM_ParseInvalid(benchmark::State& state) {
  const std::string header = kInvalid;
  for (auto _ : state) {
    auto context = chronicle::TraceContext::parse(header);
    benchmark::DoNotOptimize(context);
  }
  if (chronicle::TraceContext::parse(header)) state.SkipWithError("the invalid header parsed");
}
BENCHMARK(BM_ParseInvalid);

void BM_Format(benchmark::State& state) {
  const chronicle::TraceContext context = *chronicle::TraceContext::parse(kValid);
  for (auto _ : state) {
    std::string header = context.traceparent();
    benchmark::DoNotOptimize(header);
  }
}
BENCHMARK(BM_Format);

// Into the flight recorder's rings in /dev/shm: the writer does all its work, and no collector
// thread competes for the cores.
void BM_SendTraceparentTracing(benchmark::State& state) {
  chronicle::Config config;
  config.mode = chronicle::Mode::flight;
  config.buffer_size = size_t{64} << 20;
  if (!chronicle_bench::scratch_shm().path().empty()) config.shm_dir = chronicle_bench::scratch_shm().path();
  if (!chronicle::start(config)) throw std::runtime_error(chronicle::last_error());
  for (auto _ : state) {
    std::string header = chronicle::send_traceparent();
    benchmark::DoNotOptimize(header);
  }
  chronicle::stop();
  chronicle_bench::scratch_shm().empty();
}
BENCHMARK(BM_SendTraceparentTracing);

}  // namespace

BENCHMARK_MAIN();
