// The viewer's answers as JSON, one function per request: the server and the HTML export both
// use them, so the browser sees the same shapes from either.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "viewer/timeline_index.hpp"

namespace chronicle::viewer {

// What the page needs before its first window: lanes, rows, counters, the trace's extent.
nlohmann::json summary_json(const TimelineIndex& index, const std::string& title);
// What one window answer holds at most, whatever it asks (a screen shows far less): task rows
// (from the first one asked for), task items (lines and blocks: by time a row holds many; whole
// rows are kept while they fit), arrows, messages, and lane items (spans, blocks, runs, idle,
// off-CPU and sample marks over all lanes). Its "more" says which of them were cut.
inline constexpr uint32_t kMaxWindowTaskRows = 2000;
inline constexpr size_t kMaxWindowTaskItems = 100'000;
inline constexpr size_t kMaxWindowArrows = 20'000;
inline constexpr size_t kMaxWindowMessages = 20'000;
inline constexpr size_t kMaxWindowLaneItems = 400'000;
// The numbers of the level of detail (kMinPixels, kCounterPointsPerPixel and the caps above),
// for the --html page, which computes its windows by the same rules (viewer/src/level_of_detail.ts).
nlohmann::json level_of_detail_json();
// Times are ns since the origin; `width` in pixels.
nlohmann::json window_json(const TimelineIndex& index, uint64_t begin, uint64_t end, uint32_t width);
// Only the task rows `rows` asks for: `tasks.rows` says how many rows there are once its
// collapsed subtrees are taken out.
// With a search text (`match`, not empty), each span says in a sixth field (1 or 0) whether one
// of its attributes contains it (case-insensitive): the page outlines what search finds by
// attribute as it does by name, and can dim the rest.
nlohmann::json window_json(const TimelineIndex& index, uint64_t begin, uint64_t end, uint32_t width,
                           const TaskRowQuery& rows, const std::string& match = {});
// The same answer as JSON text, written as it is made (what the server sends: a window is the
// largest answer, and building its nlohmann::json first took as long as finding what it shows).
std::string window_text(const TimelineIndex& index, uint64_t begin, uint64_t end, uint32_t width,
                        const TaskRowQuery& rows, const std::string& match = {});
// Throws std::out_of_range for indexes that name nothing.
nlohmann::json span_details_json(const TimelineIndex& index, uint32_t lane, uint32_t depth, uint32_t span);
nlohmann::json task_details_json(const TimelineIndex& index, uint32_t task);
nlohmann::json search_json(const TimelineIndex& index, const std::string& text, size_t limit);
// A counter series broken down by thread over [begin, end] (the threads of a track).
nlohmann::json counter_json(const TimelineIndex& index, uint32_t counter, uint64_t begin, uint64_t end);
nlohmann::json stats_json(const TimelineIndex& index, uint64_t begin, uint64_t end);
// The flame graph of the spans in [begin, end] (analysis/flame_graph.hpp), merged by name path
// over every thread: `frames` depth-first, each [parent (-1 for the root), name (index into
// `names`; -1 for the root), total ns, self ns, count], a frame's children largest first.
// `source` says what was aggregated: "spans" (sampled stacks, when traces carry them, are
// another source for the same frames).
nlohmann::json flame_json(const TimelineIndex& index, uint64_t begin, uint64_t end);
// What the flame graph's root holds: every thread's spans merged by call path, or a frame per
// thread (lane) with spans in the range, named as the page names lanes ("name (thread id)"),
// holding that thread's flame graph; `threads` then lists [frame, lane] for each.
enum class FlameRoots { merged, per_thread };
nlohmann::json flame_json(const TimelineIndex& index, uint64_t begin, uint64_t end, FlameRoots roots);
// What the frames are made of: the spans, or the call stacks of the samples in the range
// (record --sample), named by function, each sample weighing 1 ("total ns" and "self ns" are then
// sample counts) and `source` "samples".
enum class FlameSource { spans, samples };
nlohmann::json flame_json(const TimelineIndex& index, uint64_t begin, uint64_t end, FlameRoots roots,
                          FlameSource source);
// Which time of a span a frame holds (analysis/span_time.hpp), said by `mode` in the answer:
// wall (the default: whole spans, begin to end, suspension included, each under its owner's
// span around it; `count` is spans) or running (the pieces on threads, nested by each thread's
// stack; `count` is pieces). Samples have no mode.
enum class FlameMode { wall, running };
nlohmann::json flame_json(const TimelineIndex& index, uint64_t begin, uint64_t end, FlameRoots roots,
                          FlameSource source, FlameMode mode);

// The tasks as a self-contained page carries them, so that it can answer what task_details_json
// answers (critical path included) by itself, lazily: per task a line [begin, end, row, state,
// label, name], and its facts with other tasks by index and texts by index into a table of
// distinct strings (names repeat across tasks; the page holds each once). Everything in it is
// proportional to the task events of the trace, whatever the chains between tasks.
nlohmann::json embedded_tasks_json(const TimelineIndex& index);

// Codes the page colours task lines by.
enum class LineState : uint8_t { ok = 0, failed = 1, cancelled = 2, unresolved = 3 };
LineState line_state(const TimelineIndex& index, uint32_t task);
// A task's kind as the page numbers it (summary's task_kinds).
int task_kind_number(const TimelineIndex& index, uint32_t task);

}  // namespace chronicle::viewer
