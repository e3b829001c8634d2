// One file on purpose (~700 lines): every route of the viewer's JSON API, each a short function
// from a query to its document, so that the API reads as one list (docs/viewer.md). The window,
// the largest, is written as text by window_text.cpp.
#include "viewer/json_api.hpp"

#include "analysis/flame_graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>

namespace chronicle::viewer {
namespace {

using nlohmann::json;

// Past these, details list the first ones and say how many there are.
constexpr size_t kMaxListed = 50;

// A task is named by its index, unique across processes; its id is unique only within its
// process, which `process` (an index into the summary's processes) says.
json task_ref(const TimelineIndex& index, uint32_t task) {
  const TaskLine& line = index.task_lines()[task];
  return {{"index", task},
          {"process", index.process_of_task(task)},
          {"id", model::task_id_text(line.id)},
          {"display", index.task_display_name(task)},
          {"begin", line.begin},
          {"end", index.line_end(task)},
          {"row", line.row},
          {"time_row", task < index.task_time_rows().row.size() ? index.task_time_rows().row[task] : 0}};
}

json task_ref_by_id(const TimelineIndex& index, size_t process, model::TaskId id) {
  const auto task = index.task_index(process, id);
  return task ? task_ref(index, *task) : json(nullptr);
}

json span_ref(const TimelineIndex& index, uint32_t lane, uint32_t depth, uint32_t span) {
  const IntervalRow& row = index.lanes()[lane].depths[depth];
  return {{"lane", lane},
          {"depth", depth},
          {"index", span},
          {"name", index.site_name(row.items[span])},
          {"begin", row.begins[span]},
          {"end", row.ends[span]}};
}

std::string thread_text(const TimelineIndex& index, size_t process, uint32_t thread_id) {
  return fmt::format("{} ({})", index.lane_of_thread(process, thread_id), thread_id);
}

std::string_view marker_type(format::EventId type) {
  switch (type) {
    case format::EventId::note:
      return "note";
    case format::EventId::instant:
      return "instant";
    case format::EventId::span_begin:
      return "span";
    case format::EventId::span_end:
      return "span end";
    case format::EventId::counter:
    case format::EventId::counter_float:
      return "counter";
    default:
      return "event";
  }
}

json task_kind_names() {
  json names = json::array();
  for (uint8_t kind = 0; kind < format::kTaskKindCount; ++kind)
    names.push_back(format::task_kind_name(static_cast<format::TaskKind>(kind)));
  return names;
}

}  // namespace

int task_kind_number(const TimelineIndex& index, uint32_t task) {
  return static_cast<int>(index.task_lines()[task].kind);
}

LineState line_state(const TimelineIndex& index, uint32_t task) {
  if (!index.task_lines()[task].resolved) return LineState::unresolved;
  switch (index.task_lines()[task].outcome) {
    case format::TaskOutcome::ok:
      return LineState::ok;
    case format::TaskOutcome::failed:
      return LineState::failed;
    case format::TaskOutcome::cancelled:
      return LineState::cancelled;
  }
  return LineState::ok;
}

namespace {

// Where a lane lost events, [begin, end, count], at most kMaxLostMarks of them: past that,
// consecutive ones are merged (their counts summed), so the counts still add up to the lane's.
constexpr size_t kMaxLostMarks = 1000;
json lost_json(const IntervalRow& lost) {
  json marks = json::array();
  const size_t per_mark = (lost.size() + kMaxLostMarks - 1) / kMaxLostMarks;
  for (size_t first = 0; first < lost.size(); first += per_mark) {
    const size_t last = std::min(first + per_mark, lost.size());
    uint64_t count = 0;
    for (size_t k = first; k < last; ++k) count += lost.items[k];
    marks.push_back({lost.begins[first], lost.ends[last - 1], count});
  }
  return marks;
}

}  // namespace

json summary_json(const TimelineIndex& index, const std::string& title) {
  json lanes = json::array();
  for (const Lane& lane : index.lanes()) {
    uint64_t runs = 0;
    for (const IntervalRow& depth : lane.runs) runs += depth.size();
    lanes.push_back({{"thread_id", lane.thread_id},
                     {"name", lane.name},
                     {"group", lane.group},
                     {"depths", lane.depths.size()},
                     {"run_depths", lane.runs.size()},
                     {"runs", runs},
                     {"spans", lane.span_count},
                     {"idle", lane.idle.size()},
                     {"off_cpu", lane.off_cpu.size()},
                     {"samples", lane.samples.size()},
                     {"lost", lost_json(lane.lost)}});
  }
  json counters = json::array();
  for (const CounterSeries& series : index.counters())
    counters.push_back({{"name", series.name},
                        {"kind", analysis::kind_name(series.kind)},
                        {"lane", series.lane},
                        {"lanes", series.lanes},
                        {"min", series.min},
                        {"max", series.max},
                        {"samples", series.values.size()}});
  // Each process's tasks are the tree rows [first_task, first_task + tasks), and by time the rows
  // [first_time_row, first_time_row + time_rows).
  json processes = json::array();
  const TaskTimeRows& by_time = index.task_time_rows();
  for (size_t process = 0; process < index.task_processes().size(); ++process) {
    const TaskProcess& each = index.task_processes()[process];
    const uint32_t next = process + 1 < index.task_processes().size() ? index.task_processes()[process + 1].first_task
                                                                      : index.task_row_count();
    const uint32_t first_time_row = process < by_time.process_first.size() ? by_time.process_first[process] : 0;
    const uint32_t next_time_row =
        process + 1 < by_time.process_first.size() ? by_time.process_first[process + 1] : first_time_row;
    processes.push_back({{"group", each.group},
                         {"first_task", each.first_task},
                         {"tasks", next - each.first_task},
                         {"first_time_row", first_time_row},
                         {"time_rows", next_time_row - first_time_row},
                         {"first_lane", each.first_lane}});
  }
  // How many messages went from each lane to each other: the page orders the processes by them.
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> between_lanes;
  for (const MessageArrow& message : index.messages()) ++between_lanes[{message.from_lane, message.to_lane}];
  json message_lanes = json::array();
  for (const auto& [lanes, count] : between_lanes) message_lanes.push_back({lanes.first, lanes.second, count});
  size_t waits = 0;
  size_t created = 0;
  for (const Arrow& arrow : index.arrows()) {
    waits += arrow.kind == ArrowKind::wait;
    created += arrow.kind == ArrowKind::created;
  }
  return {{"title", title},
          {"duration", index.duration()},
          {"origin_unix_ns", index.origin_unix_ns()},
          {"events", index.event_count()},
          {"lanes", std::move(lanes)},
          {"tasks", index.task_lines().size()},
          {"task_rows", index.task_row_count()},
          {"time_rows", by_time.count()},
          {"processes", std::move(processes)},
          {"task_kinds", task_kind_names()},
          {"created_arrows", created},
          {"wait_arrows", waits},
          {"resolve_arrows", index.arrows().size() - waits - created},
          {"messages", index.messages().size()},
          {"message_lanes", std::move(message_lanes)},
          {"counters", std::move(counters)},
          {"warnings", index.warnings()}};
}

json level_of_detail_json() {
  return {{"min_pixels", kMinPixels},
          {"counter_points_per_pixel", kCounterPointsPerPixel},
          {"max_task_rows", kMaxWindowTaskRows},
          {"max_task_items", kMaxWindowTaskItems},
          {"max_arrows", kMaxWindowArrows},
          {"max_messages", kMaxWindowMessages},
          {"max_lane_items", kMaxWindowLaneItems}};
}

json window_json(const TimelineIndex& index, uint64_t begin, uint64_t end, uint32_t width) {
  return window_json(index, begin, end, width, TaskRowQuery{});
}

json window_json(const TimelineIndex& index, uint64_t begin, uint64_t end, uint32_t width, const TaskRowQuery& rows,
                 const std::string& match) {
  return json::parse(window_text(index, begin, end, width, rows, match));
}

json span_details_json(const TimelineIndex& index, uint32_t lane, uint32_t depth, uint32_t span) {
  const Lane& where = index.lanes().at(lane);
  const IntervalRow& row = where.depths.at(depth);
  if (span >= row.size()) throw std::out_of_range("no such span");
  const reader::Site* site = index.site(row.items[span]);
  const uint64_t begin = row.begins[span];
  const uint64_t end = row.ends[span];
  json out = span_ref(index, lane, depth, span);
  out["kind"] = "span";
  // What is drawn is a piece (a task's span has one per run of its task): its own time, and the
  // span's wall and running times (analysis/span_time.hpp).
  out["duration"] = end - begin;
  const WholeSpans& whole = index.whole_spans();
  if (depth < where.depth_spans.size() && span < where.depth_spans[depth].size() &&
      where.depth_spans[depth][span] < whole.size()) {
    const uint32_t k = where.depth_spans[depth][span];
    const WholeSpan wall = whole.at(k, index.lanes());
    out["span"] = {{"begin", wall.begin},
                   {"end", wall.end},
                   {"wall_ns", wall.end - wall.begin},
                   {"running_ns", whole.running_ns(k, index.lanes())},
                   {"began_on", fmt::format("{} ({})", index.lanes()[whole.lanes[k]].name,
                                            index.lanes()[whole.lanes[k]].thread_id)}};
    json attributes = json::array();
    const auto [first, last] = whole.attributes_of(k);
    for (size_t a = first; a < last && attributes.size() < kMaxListed; ++a)
      attributes.push_back(std::string(whole.attribute_texts[a]));
    out["attributes"] = std::move(attributes);
  }
  out["thread"] = fmt::format("{} ({})", where.name, where.thread_id);
  out["fields"] = {{"category", site ? site->category : ""},
                   {"name", site ? site->name : ""},
                   {"site", site ? fmt::format("{}:{}", site->file, site->line) : ""},
                   {"depth", depth}};
  const auto parent = index.span_parent(lane, depth, span);
  out["parent"] = parent ? span_ref(index, lane, depth - 1, *parent) : json(nullptr);
  const auto [first_child, last_child] = index.span_children(lane, depth, span);
  json children = json::array();
  for (uint32_t child = first_child; child < last_child && children.size() < kMaxListed; ++child)
    children.push_back(span_ref(index, lane, depth + 1, child));
  out["children"] = std::move(children);
  out["children_count"] = last_child - first_child;
  json notes = json::array();
  const Markers& markers = where.markers;
  for (auto at = static_cast<size_t>(std::lower_bound(markers.times.begin(), markers.times.end(), begin) -
                                     markers.times.begin());
       at < markers.size() && markers.times[at] <= end && notes.size() < kMaxListed; ++at) {
    const Marker marker = markers[at];
    notes.push_back({{"time", marker.time},
                     {"type", marker_type(marker.type)},
                     {"text", marker.type == format::EventId::note ? marker.text : index.site_name(marker.site)}});
  }
  out["notes"] = std::move(notes);
  return out;
}

// What arrows say of a task: the tasks it waits on and is waited by, resolves and is resolved by,
// each with the time of the wait or resolution.
void add_task_arrows(const TimelineIndex& index, uint32_t task_number, json& out) {
  json waits_on = json::array();
  json waited_by = json::array();
  json resolves = json::array();
  json resolved_by = nullptr;
  for (const uint32_t number : index.task_arrows(task_number)) {
    const Arrow& arrow = index.arrows()[number];
    auto with_time = [&](uint32_t other) {
      json ref = task_ref(index, other);
      ref["time"] = arrow.from_time;
      return ref;
    };
    if (arrow.kind == ArrowKind::wait) {
      if (arrow.from_task == task_number && waits_on.size() < kMaxListed) waits_on.push_back(with_time(arrow.to_task));
      if (arrow.to_task == task_number && waited_by.size() < kMaxListed)
        waited_by.push_back(with_time(arrow.from_task));
    } else if (arrow.kind == ArrowKind::resolve) {  // from the resolver to the resolved
      if (arrow.to_task == task_number) resolved_by = with_time(arrow.from_task);
      if (arrow.from_task == task_number && resolves.size() < kMaxListed) resolves.push_back(with_time(arrow.to_task));
    }
  }
  out["waits_on"] = std::move(waits_on);
  out["waited_by"] = std::move(waited_by);
  out["resolved_by"] = std::move(resolved_by);
  out["resolves"] = std::move(resolves);
}

json task_details_json(const TimelineIndex& index, uint32_t task_number) {
  const TaskLine& line = index.task_lines().at(task_number);
  const model::Task task = index.task_record(task_number);
  const size_t process = index.process_of_task(task_number);
  json out = task_ref(index, task_number);
  out["group"] = index.task_processes()[process].group;
  out["kind"] = "task";
  out["task_kind"] = format::task_kind_name(task.kind);
  out["name"] = task.name;
  out["label"] = task.label;
  out["created"] = task.created ? json(line.begin) : json(nullptr);
  out["resolved"] = task.resolved ? json(line.end) : json(nullptr);
  out["duration"] = line.end - line.begin;
  static constexpr std::string_view kStates[] = {"ok", "failed", "cancelled", "unresolved"};
  out["outcome"] = kStates[static_cast<int>(line_state(index, task_number))];
  out["outcome_text"] = task.outcome_text;
  json attributes = json::array();
  for (auto [a, last] = index.task_attributes_of(task_number); a < last && attributes.size() < kMaxListed; ++a)
    attributes.push_back(std::string(index.task_attribute_text(a)));
  out["attributes"] = std::move(attributes);
  out["thread"] = task.created ? json(thread_text(index, process, task.created_on_thread)) : json(nullptr);
  out["fields"] = {{"id", model::task_id_text(task.id)},
                   {"kind", format::task_kind_name(task.kind)},
                   {"busy_ns", index.duration_ns(process, task.busy_ticks())},
                   {"seen_created", task.seen_created}};
  json runs = json::array();
  for (const auto& run : task.runs)
    runs.push_back({{"thread", thread_text(index, process, run.thread_id)},
                    {"begin", index.to_ns(process, run.begin)},
                    {"end", index.to_ns(process, run.end)},
                    {"ended", run.ended}});
  out["runs"] = std::move(runs);
  json notes = json::array();
  for (const auto& note : task.notes) {
    if (notes.size() == kMaxListed) break;
    notes.push_back(
        {{"time", index.to_ns(process, note.ticks)}, {"type", marker_type(note.type)}, {"text", note.text}});
  }
  out["notes"] = std::move(notes);
  out["notes_count"] = task.notes.size();
  out["parent"] = task.parent ? task_ref_by_id(index, process, task.parent) : json(nullptr);
  size_t children_count = 0;
  json children = json::array();
  for (const uint32_t child : index.task_children(task_number, kMaxListed, children_count))
    children.push_back(task_ref(index, child));
  out["children"] = std::move(children);
  out["children_count"] = children_count;
  // What collapsing it takes out: a link that names it collapsed needs its subtree's rows.
  out["descendants"] = index.task_tree().subtree[task_number] - 1;
  add_task_arrows(index, task_number, out);
  json steps = json::array();
  for (const CriticalStep& step : index.critical_path(task_number)) {
    json ref = task_ref(index, step.task);
    ref["state"] = analysis::step_state_name(step.state);
    ref["what"] = step.what;
    ref["at"] = step.from;
    ref["contributed"] = step.to - step.from;
    steps.push_back(std::move(ref));
  }
  out["critical_path"] = {{"method", "the runs, waits and resolutions that decided when it finished"},
                          {"steps", std::move(steps)}};
  return out;
}

namespace {

// Distinct strings, each once, by the order they were first given.
class StringTable {
 public:
  uint32_t add(const std::string& text) {
    auto [found, inserted] = numbers_.try_emplace(text, static_cast<uint32_t>(strings_.size()));
    if (inserted) strings_.push_back(text);
    return found->second;
  }
  json take() { return std::move(strings_); }

 private:
  std::unordered_map<std::string, uint32_t> numbers_;
  json strings_ = json::array();
};

// The waits of each task, [time, awaited task] flattened, in time order (as the critical path
// walks them).
std::vector<json> waits_by_task(const TimelineIndex& index) {
  std::vector<json> out;
  out.reserve(index.task_lines().size());
  for (uint32_t task = 0; task < index.task_lines().size(); ++task) {
    const size_t process = index.process_of_task(task);
    json flat = json::array();
    for (const TaskWait& wait : index.task_waits(task))
      if (const auto awaited = index.task_index(process, wait.awaited)) {
        flat.push_back(index.to_ns(process, wait.ticks));
        flat.push_back(*awaited);
      }
    out.push_back(std::move(flat));
  }
  return out;
}

}  // namespace

json embedded_tasks_json(const TimelineIndex& index) {
  StringTable strings;
  auto index_of = [&index](size_t process, model::TaskId id) -> int64_t {
    const auto found = index.task_index(process, id);
    return found ? static_cast<int64_t>(*found) : -1;
  };
  std::vector<json> waits = waits_by_task(index);
  uint64_t first_ns = index.duration();
  size_t edges = 0;
  for (size_t process = 0; process < index.task_processes().size(); ++process) {
    first_ns = std::min(first_ns, index.to_ns(process, index.task_processes()[process].first_ticks));
    edges += index.task_processes()[process].edge_count;
  }
  json lines = json::array();
  json facts = json::array();
  for (uint32_t k = 0; k < index.task_lines().size(); ++k) {
    const model::Task& task = index.task(k);
    const size_t process = index.process_of_task(k);
    const TaskLine& line = index.task_lines()[k];
    lines.push_back({line.begin, index.line_end(k), line.row, static_cast<int>(line_state(index, k)),
                     strings.add(task.label), strings.add(task.name), task_kind_number(index, k),
                     index.task_tree().depth[k], index.task_tree().subtree[k] - 1, index.task_time_rows().row[k]});
    json runs = json::array();
    for (const auto& run : task.runs)
      runs.push_back({strings.add(thread_text(index, process, run.thread_id)), index.to_ns(process, run.begin),
                      index.to_ns(process, run.end), run.ended ? 1 : 0});
    json notes = json::array();
    for (const auto& note : task.notes) {
      if (notes.size() == kMaxListed) break;
      notes.push_back(
          {index.to_ns(process, note.ticks), strings.add(std::string(marker_type(note.type))), strings.add(note.text)});
    }
    json attributes = json::array();
    for (auto [a, last] = index.task_attributes_of(k); a < last && attributes.size() < kMaxListed; ++a)
      attributes.push_back(strings.add(std::string(index.task_attribute_text(a))));
    const bool resolved_by_other = task.resolver != 0 && task.resolver != task.id;
    facts.push_back(
        {model::task_id_text(task.id), strings.add(std::string(format::task_kind_name(task.kind))),
         task.created ? json(index.to_ns(process, *task.created)) : json(nullptr),
         task.resolved ? json(index.to_ns(process, *task.resolved)) : json(nullptr),
         task.parent ? index_of(process, task.parent) : -1, resolved_by_other ? index_of(process, task.resolver) : -1,
         strings.add(task.outcome_text),
         task.created ? json(strings.add(thread_text(index, process, task.created_on_thread))) : json(nullptr),
         task.seen_created ? 1 : 0, index.duration_ns(process, task.busy_ticks()), std::move(runs), std::move(waits[k]),
         std::move(notes), task.notes.size(), std::move(attributes)});
  }
  return {{"lines", std::move(lines)},
          {"facts", std::move(facts)},
          {"strings", strings.take()},
          {"first", first_ns},
          {"edges", edges}};
}

json search_json(const TimelineIndex& index, const std::string& text, size_t limit) {
  json hits = json::array();
  uint64_t total = 0;
  for (const SearchHit& hit : index.search(text, limit, &total)) {
    if (hit.kind == SearchHit::Kind::task) {
      json ref = task_ref(index, hit.task);
      ref["kind"] = "task";
      ref["text"] = hit.text;
      hits.push_back(std::move(ref));
    } else {
      json ref = span_ref(index, hit.lane, hit.depth, hit.index);
      ref["kind"] = "span";
      ref["text"] = hit.text;
      hits.push_back(std::move(ref));
    }
  }
  return {{"query", text}, {"hits", std::move(hits)}, {"total", total}};
}

json counter_json(const TimelineIndex& index, uint32_t counter, uint64_t begin, uint64_t end) {
  const CounterSeries& series = index.counters().at(counter);
  json threads = json::array();
  for (const CounterShare& share : index.counter_breakdown(counter, begin, end))
    threads.push_back({{"lane", share.lane},
                       {"name", index.lanes()[share.lane].name},
                       {"thread_id", index.lanes()[share.lane].thread_id},
                       {"samples", share.samples},
                       {"min", share.min},
                       {"max", share.max},
                       {"last", share.last},
                       {"added", share.added}});
  return {{"index", counter}, {"name", series.name}, {"kind", analysis::kind_name(series.kind)},
          {"begin", begin},   {"end", end},          {"threads", std::move(threads)}};
}

json stats_json(const TimelineIndex& index, uint64_t begin, uint64_t end) {
  const RangeStats stats = index.range_stats(begin, end);
  json lanes = json::array();
  for (const LaneStats& lane : stats.lanes)
    lanes.push_back({{"lane", lane.lane},
                     {"name", index.lanes()[lane.lane].name},
                     {"spans", lane.spans},
                     {"busy_ns", lane.busy_ns},
                     {"idle_ns", lane.idle_ns},
                     {"blocked_ns", lane.blocked_ns},
                     {"runnable_ns", lane.runnable_ns},
                     {"samples", lane.samples}});
  json names = json::array();
  for (const NameTotal& total : stats.top_names)
    names.push_back({{"name", index.site_name(total.site)},
                     {"spans", total.spans},
                     {"wall_ns", total.wall_ns},
                     {"pieces", total.pieces},
                     {"running_ns", total.running_ns}});
  return {{"begin", stats.begin},
          {"end", stats.end},
          {"lanes", std::move(lanes)},
          {"top_names", std::move(names)},
          {"names_complete", stats.names_complete},
          {"tasks",
           {{"overlapping", stats.tasks_overlapping},
            {"created", stats.tasks_created},
            {"resolved", stats.tasks_resolved},
            {"failed", stats.tasks_failed},
            {"cancelled", stats.tasks_cancelled}}}};
}

namespace {

// The frames depth-first; `lane_of_name` (split by thread): which lane each thread frame is.
json flame_answer(analysis::FlameGraph& graph, const char* source, const char* mode, json names,
                  const std::unordered_map<uint32_t, uint32_t>* lane_of_name) {
  graph.finish();
  json frames = json::array();
  json threads = json::array();
  for (size_t k = 0; k < graph.frames().size(); ++k) {
    const analysis::FlameFrame& frame = graph.frames()[k];
    const bool root = frame.parent == analysis::FlameFrame::kNoParent;
    frames.push_back({root ? -1 : static_cast<int64_t>(frame.parent), root ? -1 : static_cast<int64_t>(frame.name),
                      frame.total_ns, frame.self_ns, frame.count});
    if (lane_of_name && frame.parent == 0) {
      const auto lane = lane_of_name->find(frame.name);
      if (lane != lane_of_name->end()) threads.push_back({k, lane->second});
    }
  }
  json answer = {{"begin", graph.begin()},
                 {"end", graph.end()},
                 {"source", source},
                 {"names", std::move(names)},
                 {"frames", std::move(frames)}};
  if (mode) answer["mode"] = mode;
  if (lane_of_name) {
    answer["by"] = "thread";
    answer["threads"] = std::move(threads);
  }
  return answer;
}

// The samples in [begin, end], a sample weighing 1 (their period is not in the trace): the
// frames' totals are sample counts. Function names are the names; split by thread, the samples
// of threads with no lane go under a frame of their own, which is not a thread's.
json sample_flame_json(const TimelineIndex& index, uint64_t begin, uint64_t end, FlameRoots roots) {
  const SampleStackTable& stacks = index.sample_stacks();
  json names = json::array();
  for (size_t k = 0; k < stacks.functions.size(); ++k) names.push_back(std::string(stacks.functions[k]));
  analysis::FlameGraph graph(begin, end);
  std::unordered_map<uint32_t, uint32_t> lane_of_name;
  std::vector<uint32_t> path;
  auto add_row = [&](const IntervalRow& row, std::optional<uint32_t> thread_name) {
    const auto first = std::lower_bound(row.begins.begin(), row.begins.end(), begin) - row.begins.begin();
    const auto last = std::upper_bound(row.begins.begin(), row.begins.end(), end) - row.begins.begin();
    for (auto k = first; k < last; ++k) {
      path.clear();
      if (thread_name) path.push_back(*thread_name);
      const std::span<const uint32_t> stack = stacks[row.items[k]];
      path.insert(path.end(), stack.begin(), stack.end());
      graph.add_stack(path, 1);
    }
  };
  auto thread_name_for = [&](std::string name) -> std::optional<uint32_t> {
    if (roots == FlameRoots::merged) return std::nullopt;
    names.push_back(std::move(name));
    return static_cast<uint32_t>(names.size() - 1);
  };
  for (uint32_t lane = 0; lane < index.lanes().size(); ++lane) {
    const Lane& each = index.lanes()[lane];
    if (each.samples.size() == 0) continue;
    const std::optional<uint32_t> thread_name =
        thread_name_for(each.name + " (" + std::to_string(each.thread_id) + ")");
    if (thread_name) lane_of_name[*thread_name] = lane;
    add_row(each.samples, thread_name);
  }
  if (index.samples_without_lane().size() > 0)
    add_row(index.samples_without_lane(), thread_name_for("(threads that never traced)"));
  return flame_answer(graph, "samples", nullptr, std::move(names),
                      roots == FlameRoots::per_thread ? &lane_of_name : nullptr);
}

// The wall mode's frames: the spans that overlap [begin, end] whole, each under its owner's span
// around it; split by thread, an owner's outermost spans under the thread they began on.
void add_whole_spans(const TimelineIndex& index, analysis::FlameGraph& graph,
                     const analysis::FlameGraph::NameOf& name_of,
                     const std::function<uint32_t(uint32_t)>& thread_name) {
  const WholeSpans& spans = index.whole_spans();
  analysis::FlameGraph::ThreadOf thread_of;
  if (thread_name) {
    std::unordered_map<uint32_t, uint32_t> name_of_lane;
    thread_of = [&spans, &thread_name, name_of_lane](uint32_t span) mutable {
      const auto [found, added] = name_of_lane.try_emplace(spans.lanes[span], 0);
      if (added) found->second = thread_name(spans.lanes[span]);
      return found->second;
    };
  }
  analysis::FlameGraph::WholeSpanAdder adder(graph, name_of, thread_of);
  spans.for_each_overlapping(graph.begin(), graph.end(), index.lanes(), [&](size_t k, const WholeSpan& span) {
    adder.add(static_cast<uint32_t>(k), {span.begin, span.end, span.site, spans.parents[k]});
    return true;
  });
}

}  // namespace

json flame_json(const TimelineIndex& index, uint64_t begin, uint64_t end) {
  return flame_json(index, begin, end, FlameRoots::merged);
}

json flame_json(const TimelineIndex& index, uint64_t begin, uint64_t end, FlameRoots roots) {
  return flame_json(index, begin, end, roots, FlameSource::spans);
}

json flame_json(const TimelineIndex& index, uint64_t begin, uint64_t end, FlameRoots roots, FlameSource source) {
  return flame_json(index, begin, end, roots, source, FlameMode::wall);
}

json flame_json(const TimelineIndex& index, uint64_t begin, uint64_t end, FlameRoots roots, FlameSource source,
                FlameMode mode) {
  if (source == FlameSource::samples) return sample_flame_json(index, begin, end, roots);
  // Call sites of one name are one frame: each site is named once, the first time it is met.
  constexpr uint32_t kUnnamed = UINT32_MAX;
  std::vector<uint32_t> name_of_site;
  std::unordered_map<std::string, uint32_t> name_ids;
  json names = json::array();
  const analysis::FlameGraph::NameOf name_of = [&](uint32_t site) {
    if (site >= name_of_site.size()) name_of_site.resize(site + 1, kUnnamed);
    if (name_of_site[site] == kUnnamed) {
      std::string name = index.site_name(site);
      const auto [found, inserted] = name_ids.try_emplace(name, static_cast<uint32_t>(names.size()));
      if (inserted) names.push_back(std::move(name));
      name_of_site[site] = found->second;
    }
    return name_of_site[site];
  };
  analysis::FlameGraph graph(begin, end);
  // A thread's name gets an id of its own (never shared with a span's name), which says its lane.
  std::unordered_map<uint32_t, uint32_t> lane_of_name;
  auto thread_name_of_lane = [&](uint32_t lane) {
    const Lane& each = index.lanes()[lane];
    const auto thread_name = static_cast<uint32_t>(names.size());
    names.push_back(each.name + " (" + std::to_string(each.thread_id) + ")");
    lane_of_name[thread_name] = lane;
    return thread_name;
  };
  const char* mode_name = mode == FlameMode::wall ? "wall" : "running";
  if (mode == FlameMode::wall) {
    std::function<uint32_t(uint32_t)> per_thread;
    if (roots == FlameRoots::per_thread) per_thread = thread_name_of_lane;
    add_whole_spans(index, graph, name_of, per_thread);
    return flame_answer(graph, "spans", mode_name, std::move(names),
                        roots == FlameRoots::per_thread ? &lane_of_name : nullptr);
  }
  std::vector<analysis::SpanLevel> levels;
  for (uint32_t lane = 0; lane < index.lanes().size(); ++lane) {
    const Lane& each = index.lanes()[lane];
    levels.clear();
    for (const IntervalRow& row : each.depths) levels.push_back({row.begins, row.ends, row.items});
    if (roots == FlameRoots::merged) {
      graph.add_thread(levels, name_of);
      continue;
    }
    graph.add_thread_apart(thread_name_of_lane(lane), levels, name_of);
  }
  return flame_answer(graph, "spans", mode_name, std::move(names),
                      roots == FlameRoots::per_thread ? &lane_of_name : nullptr);
}

}  // namespace chronicle::viewer
