// `chronicle stats`: what a trace says in numbers. One pass over the events; memory grows with
// the number of distinct names, threads and tasks (and the waits between tasks), not with the
// number of events, unless a task graph is asked for (its detail says what it keeps).
//
// The pass reads the threads apart, on several cores, when nothing in the trace ties them: no
// task or event-loop events (a task's spans move between threads with it, and the task graph
// follows the tasks in time order), and each stream in time order. Each thread's spans are then
// paired on their own, and the partial sums, extremes and histograms merged; what depends on
// the order across threads (a counter's first and last samples, the first unpaired end) is
// taken by time, then stream, as the time-ordered merge orders them. The result is the same as
// the merge's, to the bit; any other trace is read in the one merge.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/counter_series.hpp"
#include "analysis/log_histogram.hpp"
#include "model/task_graph.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::analysis {

// Durations are in nanoseconds.
struct Distribution {
  uint64_t count = 0;
  uint64_t total = 0;
  uint64_t p50 = 0, p90 = 0, p99 = 0, max = 0;
  double mean() const { return count ? static_cast<double>(total) / static_cast<double>(count) : 0.0; }
};

// A name's spans, their times as analysis/span_time.hpp defines them.
struct SpanProfile {
  std::string category;
  std::string name;
  Distribution duration;  // wall time (begin to end, suspension included), children included
  uint64_t self = 0;      // wall time less the children's
  uint64_t running = 0;   // running time (the pieces on threads), children included
};

struct ThreadProfile {
  uint32_t thread_id = 0;
  std::string name;
  uint64_t events = 0;
  uint64_t busy = 0;  // inside an outermost span of its own or a task run (range stats' busy too)
  uint64_t idle = 0;  // event loop suspended for lack of work
  uint64_t span = 0;  // from its first event to its last
  uint64_t discarded = 0;
};

struct TaskKindProfile {
  std::string kind;
  uint64_t count = 0;
  uint64_t failed = 0;
  uint64_t cancelled = 0;
  uint64_t unresolved = 0;     // OPEN: unresolved, and a resolution would be in the trace
  uint64_t cut_by_window = 0;  // a flight recording's: unresolved, but its end may be in a window no longer held
  Distribution lifetime;       // creation to resolution
  Distribution run_time;       // time running, over all threads
};

// One counter series (counter_series.hpp: all call sites and threads of a category and name).
// Values are as readers show them: levels, a metric counter's running total, or observations.
struct CounterProfile {
  std::string category;
  std::string name;
  SeriesKind kind = SeriesKind::level;
  uint64_t samples = 0;
  double min = 0, max = 0, first = 0, last = 0;
  // Levels and running totals: (last - first) over the time between them (never negative for a
  // metric counter); observations: observations per second over that time.
  double rate_per_second = 0;
};

// A flight recording's snapshot: each thread's ring holds its own window of time, all ending at
// the snapshot, so what began before a thread's window is not in it. Summarised instead of a
// warning per task or span.
struct FlightWindows {
  uint64_t tasks_before_window = 0;  // known from later events only: their creation is before it
  uint64_t spans_before_window = 0;  // span ends whose begin is before their thread's window
  uint64_t runs_before_window = 0;   // task run ends whose begin is before their thread's window
  // Tasks unresolved in the windows whose end may be in a window no longer held: begun before
  // their thread's window, or last seen before the latest window (of a thread that runs tasks)
  // began. Not counted OPEN.
  uint64_t tasks_cut = 0;
  uint64_t latest_window_start = 0;  // ticks
  struct Window {
    uint32_t thread_id = 0;
    std::string name;
    uint64_t seconds_ns = 0;  // from the thread's first event to the snapshot's last
  };
  std::vector<Window> windows;       // by length, shortest first
  std::vector<std::string> details;  // one line per task: `stats --verbose`
};

struct Profile {
  std::string directory;
  std::string hostname;
  std::string process_name;
  int32_t pid = 0;
  uint64_t events = 0;
  uint64_t bytes = 0;  // of the stream files
  uint64_t discarded = 0;
  uint64_t duration = 0;  // first to last event, ns
  int64_t first_unix_ns = 0;
  double events_per_second() const;
  double bytes_per_event() const;
  std::vector<SpanProfile> spans;  // by self time, largest first
  std::vector<ThreadProfile> threads;
  std::vector<TaskKindProfile> task_kinds;
  std::vector<CounterProfile> counters;
  std::vector<std::string> problems;    // from the task graph
  std::optional<FlightWindows> flight;  // a flight recording's snapshot
  // How the events were read (not shown): true when by thread, on several threads (ProfileOptions).
  bool read_in_parallel = false;
  // True when a thread's stream was read in pieces (ProfileOptions::pieces).
  bool read_in_pieces = false;
};

// How profile_trace reads the events.
struct ProfileOptions {
  // Read the threads' streams apart when the trace allows it; false: always in one time-ordered
  // merge (what the parallel reading must equal, for the tests).
  bool parallel = true;
  // Threads that read streams at once, the caller's included; 0: as many as the machine has cores.
  unsigned threads = 0;
  // Whether a thread's stream is read in pieces, on several of those threads at once. automatic:
  // the stream of a thread that holds more than half of the trace's bytes, in as many pieces as
  // `threads`; always (for the tests): every thread of one stream, in at least two; never.
  enum class Pieces : uint8_t { automatic, always, never };
  Pieces pieces = Pieces::automatic;
};

// Progress: events seen so far, of about `expected` (estimated from the file sizes).
using ProgressCallback = std::function<void(uint64_t seen, uint64_t expected)>;

// Reads the trace once, building the profile and (when given) the task graph too, in full.
Profile profile_trace(const reader::Trace& trace, model::TaskGraph* graph_out = nullptr,
                      const ProgressCallback& progress = {});
// The same, with the task graph in the detail given (model::GraphDetail).
Profile profile_trace(const reader::Trace& trace, model::TaskGraph* graph_out, const ProgressCallback& progress,
                      model::GraphDetail graph_detail);
// Without a task graph (the streams can then be read in parallel), as `options` say.
Profile profile_trace(const reader::Trace& trace, const ProgressCallback& progress, const ProfileOptions& options);

}  // namespace chronicle::analysis
