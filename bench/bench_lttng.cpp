// LTTng-UST side by side with chronicle: the event of lttng_tp.h (one u32 field, like a span
// begin) hit twice per iteration, as a span's begin and end are. bench/run.sh runs this binary
// twice: with no LTTng session (the tracepoint is off) and inside a session that records
// chronicle_bench:span with the default UST channel. The baselines are measured again here so
// the two binaries' runs can be checked against each other.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "baselines.hpp"
#include "lttng_tp.h"

extern "C" {

void bm_lttng_event(benchmark::State& state) {
  for (auto _ : state) {
    tracepoint(chronicle_bench, span, 1);
    benchmark::ClobberMemory();
  }
}

// Two events per iteration: what a begin+end span costs with LTTng-UST.
void bm_lttng_event_pair(benchmark::State& state) {
  for (auto _ : state) {
    tracepoint(chronicle_bench, span, 1);
    benchmark::ClobberMemory();
    tracepoint(chronicle_bench, span, 1);
  }
}

}  // extern "C"

BENCHMARK(bm_lttng_event);
BENCHMARK(bm_lttng_event_pair);

BENCHMARK_MAIN();
