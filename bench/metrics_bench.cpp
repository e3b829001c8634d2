// Cost of metric updates (uncontended, and two threads on one counter) and of reading them.
//   metrics_bench --benchmark_min_time=0.5
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <chronicle/chronicle.hpp>
#include <chronicle/metrics.hpp>
#include <string>
#include <vector>

#include "metrics/snapshot.hpp"

namespace {

chronicle::Counter g_requests{"bench.requests", {{"pool", "p1"}, {"customer", "acme"}}};
chronicle::Histogram g_latency{"bench.latency_seconds"};
chronicle::Gauge g_depth{"bench.depth"};
// What a single shared atomic costs, for comparison with per-thread shards.
alignas(64) std::atomic<uint64_t> g_shared_count{0};

void counter_add(benchmark::State& state) {
  for (auto _ : state) g_requests.add(1);
}
BENCHMARK(counter_add)->Threads(1)->Threads(2);

void shared_atomic_fetch_add(benchmark::State& state) {
  for (auto _ : state) g_shared_count.fetch_add(1, std::memory_order_relaxed);
}
BENCHMARK(shared_atomic_fetch_add)->Threads(1)->Threads(2);

void histogram_observe(benchmark::State& state) {
  double value = 0.0001;
  for (auto _ : state) {
    g_latency.observe(value);
    value = value < 5 ? value * 1.7 : 0.0001;
  }
}
BENCHMARK(histogram_observe)->Threads(1)->Threads(2);

void gauge_set(benchmark::State& state) {
  double value = 0;
  for (auto _ : state) g_depth.set(value += 1);
}
BENCHMARK(gauge_set);

void counter_add_while_tracing(benchmark::State& state) {
  chronicle::Config config;
  config.mode = chronicle::Mode::flight;  // no collector: the rings wrap, nothing is dropped
  if (!chronicle::start(config)) {
    state.SkipWithError(chronicle::last_error().c_str());
    return;
  }
  const std::string path = chronicle::shm_path();
  for (auto _ : state) g_requests.add(1);
  chronicle::stop();
  ::unlink(path.c_str());
}
BENCHMARK(counter_add_while_tracing);

// A reader summing every metric over every shard: `top`, `serve` pay this per refresh or scrape.
void read_snapshot(benchmark::State& state) {
  static std::vector<chronicle::Counter> counters;
  while (counters.size() < static_cast<size_t>(state.range(0)))
    counters.emplace_back("bench.many", chronicle::Labels{{"stream", std::to_string(counters.size())}});
  for (auto& counter : counters) counter.inc();
  for (auto _ : state) benchmark::DoNotOptimize(chronicle::metrics::read_own_metrics());
  state.counters["metrics"] = static_cast<double>(chronicle::metrics::read_own_metrics().metrics.size());
  state.counters["shards"] = static_cast<double>(chronicle::metrics::read_own_metrics().threads + 1);
}
BENCHMARK(read_snapshot)->Arg(10)->Arg(1000);

}  // namespace

BENCHMARK_MAIN();
