// How fast the viewer indexes a trace on first open (TimelineIndex::build, as `chronicle view`
// runs it before it serves, without writing the index file): each round builds the index from the trace and drops it.
// Prints each round's events per second, their median and spread, and the process's peak RSS.
// With FILE, the last round's index is written there as the index cache keeps it (to compare
// builds: CHRONICLE_VIEW_ONE_PASS=1 merges all events in one pass).
//   index_build TRACE_DIR [ROUNDS=3] [FILE]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "reader/trace_reader.hpp"
#include "viewer/index_cache.hpp"
#include "viewer/spill.hpp"
#include "viewer/timeline_index.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: index_build TRACE_DIR [ROUNDS=3] [FILE]\n");
    return 2;
  }
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  chronicle::reader::Trace trace(argv[1]);
  std::vector<double> rates;
  for (int round = 0; round < rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    const chronicle::viewer::IndexingMemory indexing;  // as `chronicle view` builds
    const auto index = chronicle::viewer::TimelineIndex::build(trace);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double events = static_cast<double>(index.event_count());
    rates.push_back(events / seconds / 1e6);
    std::printf("round %d: %.0f events in %.3f s: %.2f M events/s%s\n", round + 1, events, seconds, rates.back(),
                index.streams_read_apart() ? "" : " (one merged pass)");
    if (argc > 3 && round + 1 == rounds) chronicle::viewer::IndexCache::save(index, argv[3], "index_build");
  }
  std::sort(rates.begin(), rates.end());
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("median %.2f M events/s (min %.2f, max %.2f over %d rounds), peak RSS %.0f MiB\n",
              rates[rates.size() / 2], rates.front(), rates.back(), rounds,
              static_cast<double>(usage.ru_maxrss) / 1024);
  return 0;
}
