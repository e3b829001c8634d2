// How long the viewer's server takes to answer a window (TimelineIndex::window, then the answer
// as JSON text: window_text, what /api/window sends), on an index opened as
// `chronicle view` opens it (from the index file beside the trace, built and kept first when there
// is none). Each window is asked for ROUNDS times; prints min/median/max. The windows: the whole
// trace and a thousandth of it in the middle, with a screen's task rows (0-112, as the page asks
// for them), as a tree and by time.
//   window_query TRACE_DIR [ROUNDS=20] [WIDTH=1600]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "viewer/index_cache.hpp"
#include "viewer/json_api.hpp"
#include "viewer/timeline_index.hpp"

namespace {

using chronicle::viewer::TaskRowQuery;
using chronicle::viewer::TimelineIndex;

void time_window(const TimelineIndex& index, const char* label, uint64_t begin, uint64_t end, uint32_t width,
                 bool by_time, int rounds) {
  TaskRowQuery rows;
  rows.first = 0;
  rows.last = 112;
  rows.by_time = by_time;
  std::vector<double> ms;
  size_t arrows = 0;
  size_t tasks = 0;
  size_t lane_items = 0;
  for (int round = 0; round < rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    const auto window = index.window(begin, end, width, rows);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    arrows = window.arrows.size();
    tasks = window.tasks.size() + window.task_blocks.size();
    lane_items = 0;
    for (const auto& lane : window.lanes)
      lane_items += lane.spans.size() + lane.blocks.size() + lane.runs.size() + lane.run_blocks.size() +
                    lane.idle.size() + lane.idle_wide.size() + lane.off_cpu.size() + lane.off_cpu_wide.size() +
                    lane.samples.size();
  }
  std::sort(ms.begin(), ms.end());
  const char* searches[] = {"by length", "by rows", "by levels"};
  std::printf(
      "%-28s %-7s min %8.2f  median %8.2f  max %8.2f ms  (%zu lane items, %zu task items, %zu arrows found %s)\n",
      label, by_time ? "by time" : "tree", ms.front(), ms[ms.size() / 2], ms.back(), lane_items, tasks, arrows,
      searches[static_cast<int>(index.arrow_search(begin, end, rows))]);
  std::vector<double> text_ms;
  size_t bytes = 0;
  for (int round = 0; round < rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    bytes = chronicle::viewer::window_text(index, begin, end, width, rows).size();
    text_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(text_ms.begin(), text_ms.end());
  std::printf("%-28s %-7s window and its JSON text median %8.2f ms  (%zu bytes)\n", "", "", text_ms[text_ms.size() / 2],
              bytes);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: window_query TRACE_DIR [ROUNDS=20] [WIDTH=1600]\n");
    return 2;
  }
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 20;
  const auto width = static_cast<uint32_t>(argc > 3 ? std::max(1, std::atoi(argv[3])) : 1600);
  const auto opened = chronicle::viewer::open_index(argv[1]);
  const TimelineIndex& index = opened.index;
  std::printf("%llu events, %s\n", static_cast<unsigned long long>(index.event_count()),
              opened.from_cache ? "index read from its file" : "index built and kept");
  const uint64_t duration = index.duration();
  const uint64_t middle = duration / 2;
  for (const bool by_time : {false, true}) {
    time_window(index, "whole trace", 0, duration, width, by_time, rounds);
    time_window(index, "a thousandth, in the middle", middle, middle + std::max<uint64_t>(duration / 1000, 1), width,
                by_time, rounds);
  }
  return 0;
}
