// How fast the reader decodes a trace: every event of every stream, per stream (what stats and
// the viewer's index use) and merged in time order with the spans paired (what dump and the
// viewer's first indexing use). Prints events per second.
//   reader_throughput TRACE_DIR
#include <chrono>
#include <cstdio>

#include "reader/trace_reader.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: reader_throughput TRACE_DIR\n");
    return 2;
  }
  chronicle::reader::Trace trace(argv[1]);
  for (const bool merged : {false, true}) {
    double best = 1e30;
    uint64_t events = 0, checksum = 0;
    for (int round = 0; round < 5; ++round) {
      events = 0;
      const auto start = std::chrono::steady_clock::now();
      auto visit = [&](const chronicle::reader::Event& event) {
        ++events;
        checksum += event.ticks ^ event.name_id;
        return true;
      };
      if (merged) {
        trace.for_each_event(visit);
      } else {
        for (size_t stream = 0; stream < trace.streams().size(); ++stream) trace.for_each_in_stream(stream, visit);
      }
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::printf("%-10s %llu events in %.3f s: %.1f M events/s (checksum %llu)\n", merged ? "merged" : "per-stream",
                static_cast<unsigned long long>(events), best, static_cast<double>(events) / best / 1e6,
                static_cast<unsigned long long>(checksum % 1000));
  }
  return 0;
}
