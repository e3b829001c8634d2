// Reference costs measured in the same process as the trace points they are compared with:
// one and two TSC reads, one clock_gettime(CLOCK_MONOTONIC), and the empty loop every other
// benchmark's loop is built on. Included by exactly one source file of each benchmark binary.
#pragma once

#include <benchmark/benchmark.h>
#include <x86intrin.h>

#include <cstdint>
#include <ctime>

// extern "C" so that bench/run.sh can find them by name in objdump's output.
extern "C" {

// The loop that the compiled-out trace point must match instruction for instruction
// (bm_span_compiled_out in compiled_out.cpp has the same body plus a compiled-out span).
void bm_empty_loop(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::ClobberMemory();
  }
}

void bm_rdtsc(benchmark::State& state) {
  for (auto _ : state) {
    uint64_t ticks = __rdtsc();
    benchmark::DoNotOptimize(ticks);
  }
}

// What a span must do at the least: one time stamp when it begins, one when it ends.
void bm_rdtsc_pair(benchmark::State& state) {
  for (auto _ : state) {
    uint64_t begin = __rdtsc();
    benchmark::DoNotOptimize(begin);
    benchmark::ClobberMemory();
    uint64_t end = __rdtsc();
    benchmark::DoNotOptimize(end);
  }
}

void bm_clock_gettime_monotonic(benchmark::State& state) {
  for (auto _ : state) {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    benchmark::DoNotOptimize(now);
  }
}

}  // extern "C"

BENCHMARK(bm_empty_loop);
BENCHMARK(bm_rdtsc);
BENCHMARK(bm_rdtsc_pair);
BENCHMARK(bm_clock_gettime_monotonic);
