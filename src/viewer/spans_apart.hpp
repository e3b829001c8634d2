// The second half of indexing spans with the streams read apart (stream_pass.hpp).
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/task_graph_feed.hpp"
#include "viewer/index_steps.hpp"
#include "viewer/stream_pass.hpp"
#include "viewer/timeline_index_internal.hpp"

namespace chronicle::viewer::index_internal {

struct ApartResult {
  uint64_t last = 0;                  // the latest event's time
  std::vector<std::string> problems;  // the pairing's, as SpanPairing::describe_problems says them
};

// What the merge of the tying events leaves the tasks: all they need of it, before the spans are
// put together.
struct TyingEventsMerged {
  uint64_t last = 0;  // the latest event's time
  TaskAttributeTexts task_attribute_texts;
};

// From every stream's part (each stream's pass done, and `apart` still true): merges the events
// the parts marked, handing the task graph's to `feed` (closed once they are all handed), gives
// `merged` what the tasks need of the merge, then fills `whole` and the lanes' span rows as
// IndexBuilder's merged pass would have, in its order. `merged` may start work on another thread
// that reads neither `whole` nor the lanes' span rows. The parts' spans, rows and marks are used
// up. Its steps are told to `steps`.
ApartResult index_spans_apart(const reader::Trace& trace, const TimelineIndex& clock, std::vector<StreamPart>& parts,
                              std::vector<Lane>& lanes, WholeSpans& whole, model::TaskGraphFeed& feed,
                              IndexSteps& steps, const std::function<void(TyingEventsMerged)>& merged);

}  // namespace chronicle::viewer::index_internal
