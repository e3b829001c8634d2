// What the viewer shows, indexed once so that any window of the trace is answered at the
// detail its width in pixels can show: spans per thread and depth, task lines packed into rows,
// wait and resolve arrows, counter series with min/max pyramids, idle intervals and markers.
// The browser asks for windows and never holds the whole trace.
//
// Times are nanoseconds since the trace's first event (the "origin"), in every structure and
// answer here: the browser does arithmetic on doubles, which are exact to 2^53 ns (104 days).
//
// Several traces (the processes of one `record` run, or what `chronicle merge` wrote) go on one
// timeline by their Unix times (merge has aligned their clocks): their lanes one after another,
// each with its process's group, their tasks one process after another (each on its own clock),
// and an arrow from each message sent in one process to the receive that continues it in another.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "analysis/counter_series.hpp"
#include "analysis/critical_path.hpp"
#include "model/task_graph.hpp"
#include "reader/trace_reader.hpp"
#include "viewer/arrow_levels.hpp"
#include "viewer/column.hpp"
#include "viewer/rounded_ns.hpp"
#include "viewer/task_time_rows.hpp"
#include "viewer/task_tree.hpp"

namespace chronicle::viewer {

// Intervals that never overlap, sorted by begin (hence also by end): one depth of one thread's
// spans, one row of task lines, one thread's idle periods. `item` says what each one is.
struct IntervalRow {
  Column<uint64_t> begins;
  Column<uint64_t> ends;
  Column<uint32_t> items;
  size_t size() const { return begins.size(); }
  void add(uint64_t begin, uint64_t end, uint32_t item);
  void reserve(size_t count);
  void shrink_to_fit();
};

// An interval wide enough to draw on its own, by its index in its row.
struct VisibleInterval {
  uint32_t row = 0;
  uint32_t index = 0;
};

// Intervals too narrow to draw one by one, merged into one busy stretch.
struct BusyBlock {
  uint32_t row = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint32_t first = 0;  // index of the first merged interval in its row
  uint32_t count = 0;
};

// Strings one after another: string k is chars [first[k], first[k + 1]).
struct StringColumn {
  Column<uint64_t> first;
  Column<char> chars;
  size_t size() const { return first.empty() ? 0 : first.size() - 1; }
  std::string_view operator[](size_t k) const { return {chars.data() + first[k], first[k + 1] - first[k]}; }
  void add(std::string_view text);
  void reserve(size_t strings, size_t total_chars);
};

// The call stacks of the samples (analysis::SampleStacks), each once: stack k is the function ids
// frames[first[k], first[k + 1]), outermost first; function k is functions[k].
struct SampleStackTable {
  Column<uint64_t> first;
  Column<uint32_t> frames;
  StringColumn functions;
  size_t size() const { return first.empty() ? 0 : first.size() - 1; }
  std::span<const uint32_t> operator[](size_t k) const { return {frames.data() + first[k], first[k + 1] - first[k]}; }
};

// `text` in lower case, as search compares it.
std::string fold_case(std::string_view text);

struct Marker {  // an instant or a note
  uint64_t time = 0;
  uint32_t site = 0;
  format::EventId type = format::EventId::instant;
  std::string text;
};

// A lane's instants and notes by time, as columns.
struct Markers {
  Column<uint64_t> times;
  Column<uint32_t> sites;
  Column<format::EventId> types;
  StringColumn texts;  // a note's text; empty for an instant
  size_t size() const { return times.size(); }
  Marker operator[](size_t k) const { return {times[k], sites[k], types[k], std::string(texts[k])}; }
  void add(uint64_t time, uint32_t site, format::EventId type, std::string_view text);
  void shrink_to_fit();
};

struct Lane {  // one thread stream
  uint32_t thread_id = 0;
  std::string name;
  std::string group;  // its process: "host · process (pid N)"
  // Spans as they ran on this thread: a task's span has a piece in each of its task's runs
  // (analysis/span_time.hpp: the pieces add up to its running time); items are site ids.
  std::vector<IntervalRow> depths;
  std::vector<Column<uint32_t>> depth_spans;  // per depth, each piece's span in TimelineIndex::whole_spans()
  // The task runs on this thread, by nesting (a handler may run inside another's run); items
  // are task indexes. Drawn above the spans, which nest under them.
  std::vector<IntervalRow> runs;
  IntervalRow idle;     // loop suspended; items index TaskGraph::idle()
  IntervalRow off_cpu;  // the thread off its CPU (record --sched); items are format::CpuState
  IntervalRow samples;  // record --sample: each an instant; items index TimelineIndex::sample_stacks()
  // Where the thread lost events (counted as discarded: its ring had no room; what a flight ring
  // writes over is not a loss but the window's start): from the
  // end of the packet before to the beginning of the one whose count of discarded events grew;
  // items are how many (a count past 2^32 - 1 takes several entries). They add up to the stream's
  // events_discarded.
  IntervalRow lost;
  // When the thread was busy, as `stats` counts it: inside an outermost span of its own or a task
  // run (depths[0] and runs, merged). It has no items (an empty column). Read it as busy_row():
  // where it is depths[0] itself (runs inside the spans: the common case, and 16 bytes an
  // outermost span), `busy` is left empty and busy_is_outermost set. Its intervals may touch,
  // never overlap.
  IntervalRow busy;
  bool busy_is_outermost = false;
  const IntervalRow& busy_row() const { return busy_is_outermost ? depths.front() : busy; }
  Markers markers;
  uint64_t span_count = 0;
};

// A span whole, from its begin to its end (the trace's end when it never ended).
struct WholeSpan {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint32_t site = 0;
};

// Every span whole, from its begin to its end whatever its task did in between (its wall time:
// analysis/span_time.hpp), by begin: the flame graph's wall mode and range stats' wall times.
// Span k is at(k, lanes).
struct WholeSpans {
  static constexpr uint32_t kNoParent = UINT32_MAX;
  // While the index is built, every span's begin, end and site. Once it is finished
  // (keep_apart_only), only the spans' apart: most spans run in one piece (Lane::depths) from their
  // begin to their end, on the lane they began on, and are read from that piece; the others (a
  // task's span across its task's waits) are apart. Spans read apart (spans_apart.hpp) are kept
  // apart only from the start, never whole.
  Column<uint64_t> begins;
  Column<uint64_t> ends;
  Column<uint32_t> sites;
  // Once finished, where span k is: pieces[k] indexes the row of depth piece_depths[k] on lanes[k],
  // or, for a span apart (kApart), `begins`, `ends` and `sites`. Five bytes a span where the three
  // columns took twenty, a sixth of the index.
  static constexpr uint8_t kApart = UINT8_MAX;
  Column<uint8_t> piece_depths;
  Column<uint32_t> pieces;
  Column<uint32_t> lanes;  // where it began
  // The span around it (an index here, before it), or kNoParent: its owner's span around it, else
  // (a task's outermost span) the span its thread was in when it began; none when it does not lie
  // within that span.
  Column<uint32_t> parents;
  // Its running time: its pieces' (Lane::depths) time. While the index is built, `running` holds
  // every span's; once finished it is empty, and only the spans whose running time is not their
  // wall time (a task's span across its task's waits) keep theirs: `paused` (ascending) and
  // `paused_running`. Most spans run from begin to end, and a word each was a tenth of the index.
  Column<uint64_t> running;
  Column<uint32_t> paused;
  Column<uint64_t> paused_running;
  // reach[b]: the latest end of the spans before (b + 1) * kReachBlock, so that the spans that
  // overlap a range are among [kReachBlock * lower_bound(reach, begin), upper_bound(begins, end));
  // block_reach[b]: the latest end of the spans in block b alone, so that of those blocks only the
  // ones that reach the range are read (one span as long as the trace makes `reach` useless), up to
  // the last whose first span (block_begins[b]) begins by the range's end. Words per block, not per
  // span, of what an index of many spans holds.
  static constexpr size_t kReachBlock = 64;
  Column<uint64_t> reach;
  Column<uint64_t> block_reach;
  Column<uint64_t> block_begins;
  // What the spans say of themselves (their attributes, then an error status), as "key = value"
  // texts: text a is of span attribute_spans[a]; in order of span once the index is built.
  Column<uint32_t> attribute_spans;
  StringColumn attribute_texts;
  size_t size() const { return lanes.size(); }
  // `lane_rows` are the index's lanes (TimelineIndex::lanes()), whose pieces these spans are.
  WholeSpan at(size_t k, std::span<const Lane> lane_rows) const;
  uint64_t running_ns(size_t k, std::span<const Lane> lane_rows) const;
  // Keeps only the paused spans' running times (`running` emptied), and back (every span's in
  // `running`, for spans to be added: indexes put together, before keep_apart_only).
  void keep_paused_only();
  void keep_every_running();
  // Keeps the begins, ends and sites of the spans apart only (see `begins`); the lanes' rows are
  // final by then.
  void keep_apart_only(std::span<const Lane> lane_rows);
  // And back: every span's begin, end and site, from its piece if it has one (spans to be added
  // to, or put in order).
  void keep_whole(std::span<const Lane> lane_rows);
  // The rule of the links: a span is linked to a piece of its lane (at a depth under kApart) that
  // is the whole of it, its begin, end and site.
  static bool is_whole_piece(const IntervalRow& row, size_t piece, const WholeSpan& span) {
    return row.begins[piece] == span.begin && row.ends[piece] == span.end && row.items[piece] == span.site;
  }
  // Takes `depths` and `places` as the links (kApart: none; then `places` is rewritten), and keeps
  // the begins, ends and sites of the spans apart only, each as apart_span(k) says, k ascending.
  void keep_links(Column<uint8_t>::Built depths, Column<uint32_t>::Built places,
                  const std::function<WholeSpan(uint32_t)>& apart_span);
  bool kept_apart_only() const { return !piece_depths.empty(); }
  // The texts [first, last) of span k.
  std::pair<size_t, size_t> attributes_of(uint32_t k) const;
  // Calls visit(k, span) for each span that overlaps [begin, end], in order, while it returns true.
  template <class Visit>
  void for_each_overlapping(uint64_t begin, uint64_t end, std::span<const Lane> lane_rows, Visit&& visit) const;
};

inline WholeSpan WholeSpans::at(size_t k, std::span<const Lane> lane_rows) const {
  if (!kept_apart_only()) return {begins[k], ends[k], sites[k]};
  // Checked here rather than when a kept index is reopened: that would read every span's link.
  const uint32_t place = pieces[k];
  const uint8_t depth = piece_depths[k];
  if (depth == kApart) {
    if (place >= begins.size()) throw std::out_of_range("a span apart past the spans apart");
    return {begins[place], ends[place], sites[place]};
  }
  const uint32_t lane = lanes[k];
  if (lane >= lane_rows.size() || depth >= lane_rows[lane].depths.size() ||
      place >= lane_rows[lane].depths[depth].size())
    throw std::out_of_range("a span's piece past its lane's pieces");
  const IntervalRow& row = lane_rows[lane].depths[depth];
  return {row.begins[place], row.ends[place], row.items[place]};
}

template <class Visit>
void WholeSpans::for_each_overlapping(uint64_t begin, uint64_t end, std::span<const Lane> lane_rows,
                                      Visit&& visit) const {
  const auto begun =
      static_cast<size_t>(std::upper_bound(block_begins.begin(), block_begins.end(), end) - block_begins.begin());
  const size_t blocks = std::min({block_reach.size(), begun, (size() + kReachBlock - 1) / kReachBlock});
  for (auto block = static_cast<size_t>(std::lower_bound(reach.begin(), reach.end(), begin) - reach.begin());
       block < blocks; ++block) {
    if (block_reach[block] < begin) continue;
    const size_t first = block * kReachBlock;
    for (size_t k = first; k < std::min(size(), first + kReachBlock); ++k) {
      const WholeSpan span = at(k, lane_rows);
      if (span.begin > end) return;
      if (span.end >= begin && !visit(k, span)) return;
    }
  }
}

// A task as windows, search and range stats see it, without the task graph (which the index
// cache reads only when details or a critical path need it).
struct TaskLine {
  uint64_t begin = 0;  // creation, or the first sign of the task when its creation is not in the trace
  uint64_t end = 0;    // resolution, or the trace's end when never resolved (drawn: line_end)
  model::TaskId id = 0;
  uint32_t row = 0;  // in tree order (task_tree.hpp)
  bool resolved = false;
  bool created = false;  // its creation is in the trace
  format::TaskKind kind = format::TaskKind::unknown;
  format::TaskOutcome outcome = format::TaskOutcome::ok;  // meaningful when resolved
};

// Min/max of a series over any index range in O(levels x fan-out): level k summarises blocks of
// kFanOut^k samples. Level 0 is the series itself, which the pyramid does not copy.
class MinMaxPyramid {
 public:
  static constexpr size_t kFanOut = 16;
  void build(std::span<const double> values);
  // Over samples [first, last) of `values`, the series it was built from; `last` > `first`.
  std::pair<double, double> range(std::span<const double> values, size_t first, size_t last) const;

 private:
  std::vector<Column<double>> mins_;  // level k + 1
  std::vector<Column<double>> maxs_;
  friend class IndexCache;
};

// One track per series (analysis/counter_series.hpp): every call site and thread of a category
// and name; a metric counter's values are its running total.
struct CounterSeries {
  uint32_t site = 0;              // the first site seen
  uint32_t lane = 0;              // of the first sample
  std::vector<uint32_t> lanes;    // that wrote it, ascending
  Column<uint32_t> sample_lanes;  // each sample's lane when several wrote it; empty: all `lane`'s
  std::string name;               // the series' label: "category/name", a metric's name and labels
  analysis::SeriesKind kind = analysis::SeriesKind::level;
  Column<uint64_t> times;
  Column<double> values;
  MinMaxPyramid pyramid;
  double min = 0;
  double max = 0;
};

// One thread's part of a series over a range: its samples' shown values, and what its samples
// added (for a metric counter, whose shown value is the running total of every thread's).
struct CounterShare {
  uint32_t lane = 0;
  uint64_t samples = 0;
  double min = 0;
  double max = 0;
  double last = 0;
  double added = 0;
};

struct CounterPoint {  // one pixel column's samples, or one sample when they are few
  uint64_t time = 0;
  double min = 0;
  double max = 0;
  double last = 0;
};

// A message one process sent and another received: from the send's lane and time to the
// receive's (reader/message_key.hpp says which receive continues which send).
struct MessageArrow {
  uint32_t from_lane = 0;
  uint32_t to_lane = 0;
  uint64_t from_time = 0;
  uint64_t to_time = 0;
};

struct MessageInView {
  uint32_t message = 0;  // index into TimelineIndex::messages()
  uint32_t merged = 1;   // messages drawn at the same pixels and lanes
};

struct LaneWindow {
  uint32_t lane = 0;
  std::vector<VisibleInterval> spans;  // row is the depth
  std::vector<BusyBlock> blocks;
  std::vector<VisibleInterval> runs;  // row is the nesting depth, index into Lane::runs[row]
  std::vector<BusyBlock> run_blocks;
  std::vector<BusyBlock> idle;  // merged where narrow; count is how many
  std::vector<VisibleInterval> idle_wide;
  std::vector<BusyBlock> off_cpu;  // merged where narrow
  std::vector<VisibleInterval> off_cpu_wide;
  std::vector<BusyBlock> samples;  // ticks, merged where less than a pixel apart
};

struct ArrowInView {
  uint32_t arrow = 0;     // index into TimelineIndex::arrows()
  uint32_t merged = 1;    // arrows drawn at the same pixels, rows and kind
  uint32_t from_row = 0;  // rows as shown (a task in a collapsed subtree is on its ancestor's)
  uint32_t to_row = 0;
};

// A task line in view: its runs (the thick parts) merged where less than a pixel apart.
struct TaskInView {
  uint32_t task = 0;
  uint32_t row = 0;  // as shown
  std::vector<std::pair<uint64_t, uint64_t>> runs;
};

// The level of detail's numbers; the --html page gets them from level_of_detail_json.
inline constexpr double kMinPixels = 1.0;            // an interval this many pixels wide is drawn alone
inline constexpr size_t kCounterPointsPerPixel = 2;  // past this, a counter's window is one point per column

// Which task rows a window answers for: the rows [first, last) as shown once the subtrees of
// `collapsed` (task indexes) are taken out. The row count can be large; the page asks for the
// rows on its screen.
// With `by_time` the rows are the tasks by time (task_time_rows.hpp) and nothing is collapsed.
struct TaskRowQuery {
  uint32_t first = 0;
  uint32_t last = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> collapsed;
  bool by_time = false;
};

// Tasks by time too narrow to draw one by one, merged on their row (a task alone in its pixels
// is drawn as a TaskInView).
struct TaskBlock {
  uint32_t row = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint32_t count = 0;
  uint32_t failed = 0;
  uint32_t cancelled = 0;
};

struct CounterWindow {
  uint32_t counter = 0;
  std::vector<CounterPoint> points;
  bool downsampled = false;
};

struct Window {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint32_t width = 0;
  std::vector<LaneWindow> lanes;
  std::vector<TaskInView> tasks;       // in row order
  std::vector<TaskBlock> task_blocks;  // tasks by time only
  uint32_t task_rows_shown = 0;        // rows once the collapsed subtrees are taken out (or by time)
  // Per process (TimelineIndex::task_processes), the shown row its tasks begin on: a process's
  // tasks are rows [its, the next one's).
  std::vector<uint32_t> process_first_rows;
  std::vector<ArrowInView> arrows;
  std::vector<MessageInView> messages;
  std::vector<CounterWindow> counters;
};

struct SearchHit {
  enum class Kind : uint8_t { task, span } kind = Kind::task;
  uint32_t task = 0;  // task index
  uint32_t lane = 0;  // span
  uint32_t depth = 0;
  uint32_t index = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  std::string text;
};

// A name's spans in a range, their times as analysis/span_time.hpp defines them, clipped to it.
struct NameTotal {
  uint32_t site = 0;
  uint64_t spans = 0;       // whole spans that overlap the range
  uint64_t wall_ns = 0;     // their wall time
  uint64_t pieces = 0;      // pieces (one per run of a task's span) that overlap the range
  uint64_t running_ns = 0;  // their running time
};

struct LaneStats {
  uint32_t lane = 0;
  uint64_t spans = 0;    // span pieces that overlap the range, at any depth
  uint64_t busy_ns = 0;  // inside an outermost span of its own or a task run (Lane::busy), clipped
  uint64_t idle_ns = 0;
  uint64_t blocked_ns = 0;   // off CPU, waiting for something (record --sched)
  uint64_t runnable_ns = 0;  // off CPU, waiting for a CPU
  uint64_t samples = 0;      // record --sample
};

struct RangeStats {
  uint64_t begin = 0;
  uint64_t end = 0;
  std::vector<LaneStats> lanes;
  std::vector<NameTotal> top_names;  // by wall time, when the range is small enough to break down
  bool names_complete = true;        // false: too many spans in the range to break down by name
  uint64_t tasks_overlapping = 0;
  uint64_t tasks_created = 0;
  uint64_t tasks_resolved = 0;
  uint64_t tasks_failed = 0;
  uint64_t tasks_cancelled = 0;
};

// A step of a task's critical path (analysis::critical_path), the task by index; it may be
// another process's task, reached by a message.
struct CriticalStep {
  uint32_t task = 0;
  analysis::StepState state = analysis::StepState::ran;
  std::string what;   // why: "ran", "queued after t1.5 finished", "resolved by t1.4", ...
  uint64_t from = 0;  // ns on the timeline
  uint64_t to = 0;
};

// The tasks of one process: task indexes [first_task, the next process's first_task), and the
// clock their ticks are in (where the process's first event lies on the timeline).
struct TaskProcess {
  std::string group;  // as its lanes': "host · process (pid N)"
  uint32_t first_task = 0;
  uint32_t first_lane = 0;
  uint64_t origin_ticks = 0;
  uint64_t origin_offset_ns = 0;
  double ns_per_tick = 1;
  uint64_t first_ticks = 0;  // its task graph's (model::TaskGraph::first_ticks)
  uint64_t edge_count = 0;   // its task graph's edges
};

// A task's wait: when, and for which task (by id, in the task's own process).
using TaskWait = analysis::TaskSource::Wait;

// What a critical path across processes needs beyond the task graphs (the traces, for the
// messages and the clocks), found when first asked for.
class CrossProcessPaths;
struct OpenedIndex;
struct OpenProgress;

class TimelineIndex {
 public:
  // Reads the whole trace once (thread streams indexed while another thread builds the task
  // graph).
  // Told, now and then while the events are read (every kProgressEvents and at the end), how
  // many have been read so far, for a progress line on long work.
  using Progress = std::function<void(uint64_t events_read)>;
  static constexpr uint64_t kProgressEvents = uint64_t{1} << 20;
  // Lane::busy's intervals per kept sum of busy time (busy_sums_).
  static constexpr size_t kBusyBlock = 64;
  // `detail`: what the task graphs keep; GraphDetail::no_notes leaves out the tasks' notes (what
  // was traced inside their runs), the most of a graph's memory, where memory is short.
  static TimelineIndex build(const reader::Trace& trace, const Progress& progress = {},
                             model::GraphDetail detail = model::GraphDetail::full);
  // Several processes on one timeline, lanes in the order of `traces`; so are their tasks: the
  // task indexes of one process follow the previous process's (task ids are unique only
  // within a process), and each process's tasks are a run of rows in tree order.
  static TimelineIndex build(const std::vector<reader::Trace>& traces, const Progress& progress = {},
                             model::GraphDetail detail = model::GraphDetail::full);

  // What the page calls the view: the process and its directory, or how many processes; set by
  // open_index (index_cache.hpp), empty otherwise.
  const std::string& title() const { return title_; }
  uint64_t origin_ticks() const { return origin_ticks_; }
  int64_t origin_unix_ns() const { return origin_unix_ns_; }
  uint64_t duration() const { return duration_; }
  uint64_t event_count() const { return event_count_; }
  // Whether this build read the streams apart (stream_pass.hpp) rather than in one merged pass:
  // for tests and benchmarks; an index from the cache says false.
  bool streams_read_apart() const { return streams_read_apart_; }
  const std::vector<Lane>& lanes() const { return lanes_; }
  const Column<TaskLine>& task_lines() const { return task_lines_; }  // by task index
  const TaskTree& task_tree() const { return task_tree_; }
  uint32_t task_row_count() const { return static_cast<uint32_t>(task_tree_.row_task.size()); }
  // The tasks by time (task_time_rows.hpp): the other layout of the task rows.
  const TaskTimeRows& task_time_rows() const { return task_time_rows_; }
  // A task's runs in ns, by beginning.
  std::span<const uint64_t> run_begins(uint32_t task) const;
  std::span<const uint64_t> run_ends(uint32_t task) const;
  // Where a task's line ends: its resolution (the trace's end when never resolved), or its last
  // run's end when later (a handler returns after setting its result). The extent drawn, packed by
  // time and found in a window; TaskLine::end stays the resolution the details tell.
  uint64_t line_end(uint32_t task) const;
  const Column<Arrow>& arrows() const { return arrows_; }
  const Column<MessageArrow>& messages() const { return messages_; }  // by send time
  const std::vector<CounterSeries>& counters() const { return counters_; }
  const SampleStackTable& sample_stacks() const { return sample_stacks_; }
  const WholeSpans& whole_spans() const { return whole_spans_; }
  // Samples of threads with no lane (they never traced), which flame graphs of samples count too.
  const IntervalRow& samples_without_lane() const { return samples_without_lane_; }
  // What was lost or skipped (reader::Trace::warnings): the page shows them above the timeline.
  const std::vector<std::string>& warnings() const { return warnings_; }
  // The task graphs, one per process: details and critical paths need them. An index read from
  // the cache reads them from it when first asked (thread-safe), not when it opens.
  const std::vector<model::TaskGraph>& graphs() const;
  const model::TaskGraph& graph() const { return graphs().front(); }  // the first process's
  const model::TaskGraph& graph(size_t process) const { return graphs().at(process); }
  // One per trace given to build, in that order.
  const std::vector<TaskProcess>& task_processes() const { return task_processes_; }
  size_t process_of_task(uint32_t task) const;
  std::pair<uint32_t, uint32_t> tasks_of_process(size_t process) const;  // its task indexes: [first, last)
  const model::Task& task(uint32_t index) const;                         // reads the task graph (see graph())
  // One task whole, without the graph: an index read from the cache reads only that task's
  // record from it (a billion-event trace's graph is gigabytes).
  model::Task task_record(uint32_t index) const;
  // Task `index`'s waits in time order (at equal times in the order traced).
  std::span<const TaskWait> task_waits(uint32_t index) const;
  // The arrows (arrows()) with task `index` at either end, in the order of arrows().
  std::span<const uint32_t> task_arrows(uint32_t index) const;
  // Its children (the tasks it created), in tree order; `limit` at most, `count` all of them.
  std::vector<uint32_t> task_children(uint32_t index, size_t limit, size_t& count) const;
  // Whether the graphs are held whole now (built here, or read by graphs()).
  bool graphs_held() const;
  // A task's name and label (task_lines() has the rest of what windows show), without the graph.
  std::string_view task_name(uint32_t index) const { return task_names_[index]; }
  std::string_view task_label(uint32_t index) const { return task_labels_[index]; }
  std::string_view task_display_name(uint32_t index) const;
  // The texts ("key = value") [first, last) of task `index`'s own attributes (task_attribute_text).
  std::pair<size_t, size_t> task_attributes_of(uint32_t index) const;
  std::string_view task_attribute_text(size_t a) const { return task_attribute_texts_[a]; }
  std::optional<uint32_t> task_index(size_t process, model::TaskId id) const;
  // A process's ticks as ns on the timeline.
  uint64_t to_ns(size_t process, uint64_t ticks) const;
  uint64_t duration_ns(size_t process, uint64_t ticks) const;
  // The name of the lane of `thread_id` among `process`'s lanes.
  std::string lane_of_thread(size_t process, uint32_t thread_id) const;
  const reader::Site* site(uint32_t id) const;
  std::string site_name(uint32_t id) const;  // "category/name", or "?"
  // Inline: the index's build converts every time it keeps.
  uint64_t to_ns(uint64_t ticks) const {
    if (ticks <= origin_ticks_) return origin_offset_ns_;
    return origin_offset_ns_ + rounded_ns(static_cast<double>(ticks - origin_ticks_) * ns_per_tick_);
  }
  uint64_t duration_ns(uint64_t ticks) const { return rounded_ns(static_cast<double>(ticks) * ns_per_tick_); }
  std::optional<uint32_t> task_index(model::TaskId id) const;  // in the first process
  std::string lane_of_thread(uint32_t thread_id) const;

  // Everything in [begin, end] as `width` pixels show it: intervals at least `min_pixels` wide
  // one by one, narrower ones merged into busy blocks; a counter with more than
  // kCounterPointsPerPixel samples a pixel, one min-max point per pixel column.
  Window window(uint64_t begin, uint64_t end, uint32_t width, double min_pixels = kMinPixels) const;
  // The same, with only the task rows `rows` asks for (and the arrows that reach them).
  Window window(uint64_t begin, uint64_t end, uint32_t width, const TaskRowQuery& rows,
                double min_pixels = kMinPixels) const;

  // Tasks whose label or name, and spans whose name or one of whose attributes, contain `text`
  // (case-insensitive): the first `limit`. With `total`, every match is counted into it, those
  // past the limit included.
  std::vector<SearchHit> search(const std::string& text, size_t limit, uint64_t* total = nullptr) const;
  // Whether one of the attributes of the span drawn at (lane, depth, index) contains `needle`,
  // which is in lower case (fold_case).
  bool span_attribute_contains(uint32_t lane, uint32_t depth, uint32_t index, const std::string& needle) const;
  RangeStats range_stats(uint64_t begin, uint64_t end) const;
  // A series broken down by the threads that wrote it, over the samples in [begin, end].
  std::vector<CounterShare> counter_breakdown(uint32_t counter, uint64_t begin, uint64_t end) const;

  // The span at `index` of `depth` on `lane`: its parent and children by index.
  std::optional<uint32_t> span_parent(uint32_t lane, uint32_t depth, uint32_t index) const;
  std::pair<uint32_t, uint32_t> span_children(uint32_t lane, uint32_t depth, uint32_t index) const;  // [first, last)

  // The chain of runs, waits and resolutions that decided when the task finished, in time order
  // (analysis::critical_path over the index's tasks: it reads only the tasks on the way, and
  // across processes the traces again for their messages).
  std::vector<CriticalStep> critical_path(uint32_t task) const;
  // `steps` with each `ran` step split by its thread's CPU state (record --sched), as stats splits
  // them.
  std::vector<CriticalStep> split_by_cpu_state(std::vector<CriticalStep> steps) const;

  // How window() finds a window's arrows: by length class and time, by the rows they join, or
  // from the arrows merged ahead of time (arrow_levels.hpp). The same arrows each way, drawn and
  // counted alike; the one with the fewest to look at is taken.
  enum class ArrowSearch { by_length, by_rows, by_levels };
  ArrowSearch arrow_search(uint64_t begin, uint64_t end, const TaskRowQuery& rows) const;

 private:
  // How task rows are numbered: the tree's, before any collapsing, or by time.
  enum ArrowRowsKind : size_t { kTreeRows, kTimeRows };

  std::vector<LaneWindow> window_lanes(uint64_t begin, uint64_t end, double ns_per_pixel, double min_pixels) const;
  void window_beside_lanes(uint64_t begin, uint64_t end, double ns_per_pixel, const TaskRowQuery& rows,
                           double min_pixels, Window& out) const;
  void window_tasks(uint64_t begin, uint64_t end, double ns_per_pixel, const ShownRows& shown, const TaskRowQuery& rows,
                    Window& out) const;
  void window_tasks_by_time(uint64_t begin, uint64_t end, double ns_per_pixel, double min_pixels,
                            const TaskRowQuery& rows, Window& out) const;
  // A task's runs in [begin, end], merged where less than `gap` apart.
  std::vector<std::pair<uint64_t, uint64_t>> runs_in_view(uint32_t task, uint64_t begin, uint64_t end,
                                                          double gap) const;
  // Runs of arrow indexes in a bucket of arrows_by_length_ or arrows_by_rows_, one per class.
  using ArrowRanges = std::vector<std::pair<const uint32_t*, const uint32_t*>>;
  struct ArrowSearchCost {
    ArrowRanges by_length;  // arrows_by_time_range
    ArrowRanges by_rows;    // arrows_by_row_range
    size_t top_groups = 0;  // arrow_levels_'s coarsest groups, when they serve the rows asked for
    ArrowSearch cheapest() const;
  };
  ArrowSearchCost arrow_search_cost(uint64_t begin, uint64_t end, ArrowRowsKind row_kind,
                                    std::pair<uint32_t, uint32_t> row_range) const;
  // The rows asked for, as arrows_by_rows_ numbers them.
  std::pair<uint32_t, uint32_t> arrow_row_range(const ShownRows& shown, const TaskRowQuery& rows) const;
  // `row_range`: the rows asked for, as arrows_by_rows_ of `row_kind` numbers them.
  // `rows_of`: an arrow's rows as shown, none when it has nowhere to go.
  void window_arrows(uint64_t begin, uint64_t end, const PixelColumns& column, const ArrowRowsOf& rows_of,
                     const TaskRowQuery& rows, ArrowRowsKind row_kind, std::pair<uint32_t, uint32_t> row_range,
                     Window& out) const;
  // Per length class, the arrows that begin in time to reach [begin, end] and begin before its end.
  ArrowRanges arrows_by_time_range(uint64_t begin, uint64_t end) const;
  // Per row span class, the arrows whose lower row is near enough to reach rows [row_range) and
  // below its end.
  ArrowRanges arrows_by_row_range(ArrowRowsKind row_kind, std::pair<uint32_t, uint32_t> row_range) const;
  // Of `near` (arrows_by_row_range's), the arrows in [begin, end] that join rows [row_range) or
  // cross them, in arrows_by_length_'s order (class, then time, then index).
  std::vector<uint32_t> arrows_across_rows(const ArrowRanges& near, uint64_t begin, uint64_t end,
                                           ArrowRowsKind row_kind, std::pair<uint32_t, uint32_t> row_range) const;
  // An arrow's two rows as arrows_by_rows_ of `row_kind` numbers them, the lower first; none when
  // a task of it has no row by time.
  std::optional<std::pair<uint32_t, uint32_t>> arrow_row_span(const Arrow& arrow, ArrowRowsKind row_kind) const;
  void window_messages(uint64_t begin, uint64_t end, const PixelColumns& column, Window& out) const;

  // One trace's index; with the task lookup when `lookup` says so (a combined index makes it once
  // for all, after its parts are in).
  enum class TaskLookup : uint8_t { made_here, made_later };
  static TimelineIndex build_one(const reader::Trace& trace, const Progress& progress, model::GraphDetail detail,
                                 TaskLookup lookup);
  // The task lookups of an index built here, once every process is in (task_lookup.cpp).
  void index_task_lookup();
  // Its two halves: the tasks by id and their waits, which read neither the arrows nor
  // wait_first_ (returned, to be set last: task_index reads the graphs until it is), so they can
  // be made while the arrows are; then each task's arrows.
  Column<uint32_t> index_task_ids_and_waits();
  void index_task_arrow_lists();
  std::optional<uint32_t> task_index_by_id(size_t process, model::TaskId id) const;
  analysis::CriticalPath critical_path_in_process(size_t process, model::TaskId target) const;
  // Each process's tasks as a critical path's walk reads them (task_lookup.cpp).
  std::vector<std::unique_ptr<analysis::TaskSource>> task_sources() const;

  // The index cache's part: the directories critical paths across processes read again.
  std::vector<std::string> cross_process_directories() const;
  static std::shared_ptr<CrossProcessPaths> paths_between(std::vector<std::string> directories);

  std::string title_;
  uint64_t origin_ticks_ = 0;
  int64_t origin_unix_ns_ = 0;
  // Where origin_ticks_ (the first trace's) lies on the timeline of several traces.
  uint64_t origin_offset_ns_ = 0;
  uint64_t duration_ = 0;
  uint64_t event_count_ = 0;
  bool streams_read_apart_ = false;
  double ns_per_tick_ = 1;
  std::vector<reader::Site> sites_;
  std::vector<Lane> lanes_;
  mutable std::vector<model::TaskGraph> graphs_ = std::vector<model::TaskGraph>(1);
  struct GraphLoader;  // reads graphs_ from the cache on first use
  std::shared_ptr<GraphLoader> graph_loader_;
  std::vector<TaskProcess> task_processes_ = std::vector<TaskProcess>(1);
  std::shared_ptr<CrossProcessPaths> cross_process_;
  Column<TaskLine> task_lines_;
  StringColumn task_names_;
  StringColumn task_labels_;
  // Text a of the tasks' own attributes is task task_attribute_tasks_[a]'s; in order of task.
  Column<uint32_t> task_attribute_tasks_;
  StringColumn task_attribute_texts_;
  TaskTree task_tree_;
  TaskTimeRows task_time_rows_;
  // Every task's runs in ns, task after task: task k's are [run_first_[k], run_first_[k + 1]).
  Column<uint32_t> run_first_;
  Column<uint64_t> run_begins_;
  Column<uint64_t> run_ends_;
  Column<Arrow> arrows_;
  // Arrows by length class (the bit width of their length in ns): within a class, sorted by the
  // earlier end, so a window finds its arrows with a binary search per class.
  std::vector<Column<uint32_t>> arrows_by_length_;
  // The same arrows by the task rows they join, for a window that asks for a few rows of many
  // (the whole trace, a screen of rows: by time, every arrow would be looked at). Per way of
  // showing tasks (ArrowRowsKind), by row span class (the bit width of the higher row less the
  // lower): within a class, sorted by the lower row. Rows are the tree's, before any collapsing
  // (which never changes their order), or the rows by time; an arrow with no row by time is left
  // out of those.
  static constexpr size_t kRowClasses = 33;  // bit widths 0 to 32 of a span of 32-bit rows
  std::array<std::vector<Column<uint32_t>>, 2> arrows_by_rows_;
  // The arrows merged ahead of time by their rows by time, for windows over many of them.
  ArrowLevels arrow_levels_;
  Column<MessageArrow> messages_;
  // Each process's tasks by id (its run of task indexes, sorted by id), for task_index.
  Column<model::TaskId> task_ids_sorted_;
  Column<uint32_t> task_by_sorted_id_;
  // Task k's waits are waits_[wait_first_[k], wait_first_[k + 1]); its arrows
  // task_arrow_list_[task_arrow_first_[k], task_arrow_first_[k + 1]).
  Column<uint32_t> wait_first_;
  Column<TaskWait> waits_;
  Column<uint32_t> task_arrow_first_;
  Column<uint32_t> task_arrow_list_;
  // Read from the cache: where each task's record lies in its graphs' part (empty when built).
  Column<uint64_t> task_records_;
  std::vector<CounterSeries> counters_;
  SampleStackTable sample_stacks_;
  IntervalRow samples_without_lane_;
  std::vector<std::string> warnings_;
  // Each lane's busy time (Lane::busy) before every kBusyBlock-th interval: [b] is the sum of
  // intervals [0, b * kBusyBlock), and the last entry the lane's whole. A range's busy time adds
  // up fewer than kBusyBlock intervals at either end; a word a block, not an interval.
  std::vector<Column<uint64_t>> busy_sums_;
  // Busy time of lane `lane`'s busy intervals [0, k).
  uint64_t busy_before(uint32_t lane, size_t k) const;
  WholeSpans whole_spans_;

  friend class IndexBuilder;
  friend class IndexCombiner;
  friend class IndexCache;
  friend OpenedIndex open_index(const std::string& directory, bool use_cache, const OpenProgress& progress,
                                bool keep_later);
};

struct TimelineIndex::GraphLoader {
  std::mutex mutex;
  std::atomic<bool> loaded{false};
  std::function<std::vector<model::TaskGraph>()> load;
  std::function<model::Task(uint64_t record)> read_task;  // one task, by its task_records_ entry
};

// For tests and the HTML export: which merged blocks and single intervals a row shows.
void visible_in_row(const IntervalRow& row, uint32_t row_number, uint64_t begin, uint64_t end, double ns_per_pixel,
                    double min_pixels, std::vector<VisibleInterval>& wide, std::vector<BusyBlock>& blocks);
// The same over a row given as its intervals' begins and ends (in order, not overlapping).
void visible_in_row(std::span<const uint64_t> begins, std::span<const uint64_t> ends, uint32_t row_number,
                    uint64_t begin, uint64_t end, double ns_per_pixel, double min_pixels,
                    std::vector<VisibleInterval>& wide, std::vector<BusyBlock>& blocks);

}  // namespace chronicle::viewer
