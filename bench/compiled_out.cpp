// The same loop as bm_span_disabled, in a translation unit built with CHRONICLE_DISABLE
// (bench/CMakeLists.txt): the span must vanish and leave exactly bm_empty_loop's code, which
// bench/run.sh checks by comparing the two functions' disassembly.
#ifndef CHRONICLE_DISABLE
#error "compiled_out.cpp must be built with CHRONICLE_DISABLE defined"
#endif

#include <chronicle/chronicle.hpp>

#include <benchmark/benchmark.h>

extern "C" void bm_span_compiled_out(benchmark::State& state) {
  for (auto _ : state) {
    CHRONICLE_SPAN("bench", "span");
    benchmark::ClobberMemory();
  }
}
