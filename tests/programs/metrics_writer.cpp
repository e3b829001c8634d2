// Sets metrics to known values from several threads, prints "ready" and waits to be killed (or
// for its standard input to close), so tests can read its metrics from outside.
//   metrics_writer [THREADS] [--export PORT]
#include <unistd.h>
#include <chronicle/metrics.hpp>
#include <chronicle/metrics_exporter.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace {

struct Request {
  const char* pool;
  const char* customer;
  const char* vm;
  const char* stream;
  uint64_t count;
};

// pool -> customer -> vm -> stream, with counts per thread.
constexpr Request kRequests[] = {
    {"p1", "acme", "vm1", "s1", 10},  {"p1", "acme", "vm1", "s2", 20},     {"p1", "acme", "vm2", "s3", 5},
    {"p1", "globex", "vm3", "s4", 7}, {"p2", "initech", "vm4", "s5", 100},
};

void work() {
  for (const Request& request : kRequests) {
    chronicle::Counter requests{
        "requests",
        {{"pool", request.pool}, {"customer", request.customer}, {"vm", request.vm}, {"stream", request.stream}}};
    for (uint64_t i = 0; i < request.count; ++i) requests.inc();
  }
  chronicle::Counter bytes{"tcp.bytes_acked", {{"stream", "12"}}};
  bytes.add(4096);
  chronicle::Histogram latency{"rpc.latency_seconds", {{"customer", "acme"}}};
  for (double seconds : {0.002, 0.002, 0.002, 0.02, 0.3}) latency.observe(seconds);
  CHRONICLE_METRIC_ADD("logins.failed", 1);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  std::unique_ptr<chronicle::MetricsExporter> exporter;
  for (int i = 2; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--export") == 0)
      exporter = std::make_unique<chronicle::MetricsExporter>(static_cast<uint16_t>(std::atoi(argv[i + 1])));
  chronicle::Gauge free_bytes{"disk.free_bytes", {{"device", "sda"}}};
  free_bytes.set(1.5e9);
  chronicle::Gauge size_bytes{"disk.size_bytes", {{"device", "sda"}}};
  size_bytes.set(1e10);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) workers.emplace_back(work);
  for (auto& worker : workers) worker.join();
  std::printf("ready %d\n", exporter ? exporter->port() : 0);
  std::fflush(stdout);
  char byte;
  while (::read(STDIN_FILENO, &byte, 1) > 0) {
  }
  return 0;
}
