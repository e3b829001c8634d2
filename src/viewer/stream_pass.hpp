// The index's pass over one stream on its own. IndexBuilder runs one per stream, on every core,
// and then merges in time order only the events that tie the streams together.
//
// What a lane needs from its own stream alone: its markers, its counter samples, and the spans
// its thread owns (begun outside any task run), paired and cut into rows by depth. What the task
// graph and the tasks' spans need in time order with the other streams: the task events, and
// every event while a task runs on the thread. Those the pass only marks (`merged`), for
// Trace::for_each_event_in.
//
// Why the two together are the one merged pass's index, exactly:
// - The pairing's state is per owner (span_pairing.hpp). A thread's own spans are begun and
//   ended outside task runs, so only this stream's events outside runs touch them, in the order
//   the merge would give them (the stream goes forward in time; else `apart` is false).
// - A task's spans live in its runs. While a run lasts, the thread's own spans are still; the
//   merged pass needs of them only how many are open and the innermost (`run_bases`).
// - Two things would tie the two halves, and the pass gives up (`apart` false) when it sees a
//   chance of either: an end or an attribute inside a run whose name is that of a thread's span
//   open around the run (the pairing may close or mark that span), and an instant whose
//   attributes fall on the other side of a run's edge.
// - Everything on a lane is closed by an event of its own stream, so a row's pieces from either
//   half go in the order of their closing events' places in the stream (`closed_at`).
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <vector>

#include "reader/span_pairing.hpp"
#include "reader/trace_reader.hpp"
#include "viewer/begin_keys.hpp"
#include "viewer/timeline_index.hpp"

namespace chronicle::viewer::index_internal {

// A piece of a span still open on a lane: from `begin`, of span `span` (local to its half).
struct OpenPiece {
  uint64_t begin = 0;
  uint32_t site = 0;
  uint32_t span = 0;
  uint64_t sequence = 0;  // the pairing's, to find it at its end
  uint64_t task = 0;      // 0: the thread's own
};

// A counter sample as traced, in stream order (IndexBuilder numbers the series in that order).
struct StreamCounterSample {
  uint64_t time = 0;
  double value = 0;
  uint32_t site = 0;
};

// The thread's own spans open when a task run began on it.
struct RunBase {
  uint32_t depth = 0;                          // how many
  uint32_t innermost = WholeSpans::kNoParent;  // its span (local), or none
};

// What one stream's pass gives the merge (its large arrays, like the index's, may be held in files
// by spill.hpp).
struct StreamPart {
  // The thread's own spans, in order of begin; parents are local. `begins`: each begin's time
  // and place in the stream (the merge order), 8 bytes a span, let go once read. Only parents
  // (and attribute texts) are kept: each of these spans is on this stream's lane and runs in one
  // piece, from its begin to its end (or the trace's end), which the lane's rows hold with its
  // site; so neither its lane, its running time, its begin, its end nor its site needs a column,
  // and the finished index links it to that piece (WholeSpans::pieces).
  WholeSpans spans;
  BeginKeys begins;
  size_t own_spans() const { return spans.parents.size(); }
  // Per depth of the lane's rows (Lane::depths, whose depth_spans are local here): the place of
  // the event that closed each piece.
  std::vector<Column<uint64_t>::Built> closed_at;
  // Per depth, the pieces of the tasks' spans the merge will add to the lane's row, as counted (a
  // span's first piece, at the depth it begins at; what a resumed run reopens is not counted):
  // the pass makes its rows with room for them. Their sum is the spans begun inside task runs,
  // which the merge of the tying events begins.
  std::vector<uint64_t> merged_pieces_by_depth;
  uint64_t merged_pieces_at(size_t depth) const {
    return depth < merged_pieces_by_depth.size() ? merged_pieces_by_depth[depth] : 0;
  }
  std::vector<OpenPiece> open;     // the thread's own pieces open at the stream's end, outermost first
  std::vector<RunBase> run_bases;  // one per task_run_begin, in order
  reader::Trace::EventRanges merged;
  std::vector<StreamCounterSample, SpillAllocator<StreamCounterSample>> counter_samples;
  std::vector<uint64_t> counter_samples_by_site;  // of the trace's sites (by id); empty: none
  reader::PairingProblems problems;
  uint64_t first_unmatched_place = 0;
  uint64_t events = 0;
  uint64_t task_creations = 0;
  uint64_t task_waits_and_resolutions = 0;  // with the creations, a bound on the graph's edges
  uint64_t first_ticks = std::numeric_limits<uint64_t>::max();
  uint64_t last_ticks = 0;
};

// Indexes stream `stream` of `trace` into `lane` (markers, own span rows) and `part`.
// `counter_kinds`: each site's counter kind (by site id), for the samples' values. `apart` is
// shared by all the streams' passes: set false by the first that sees its stream cannot be read
// apart; from then on every pass indexes only markers and counters. `progress(events)` is told
// of events read, a batch at a time.
void index_stream_alone(const reader::Trace& trace, const TimelineIndex& index, size_t stream,
                        const std::vector<analysis::SeriesKind>& counter_kinds, Lane& lane, StreamPart& part,
                        std::atomic<bool>& apart, const std::function<void(uint64_t)>& progress);

}  // namespace chronicle::viewer::index_internal
