// A window's answer, written as JSON text as it is made (viewer/json_out.hpp): the largest
// answer, a few hundred thousand small arrays at most, whose nlohmann::json took as long to build
// and dump as finding what the window shows.
#include "viewer/json_api.hpp"
#include "viewer/json_out.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>

namespace chronicle::viewer {
namespace {

// Numbers as one JSON array.
template <class... Numbers>
void write_numbers(JsonOut& out, Numbers... numbers) {
  out.begin_array();
  (out.value(numbers), ...);
  out.end_array();
}

// A window's answer as it is written: lane items counted against their cap, and the sites and
// tasks it names.
struct WindowWriter {
  const TimelineIndex& index;
  const Window& window;
  std::string needle;  // the search text, folded; empty: none
  JsonOut out{};
  size_t lane_items = 0;
  bool lane_items_cut = false;
  std::set<uint32_t> sites{};
  std::set<uint32_t> tasks{};

  // One more lane item, unless the answer holds its most already.
  bool room() {
    if (lane_items == kMaxWindowLaneItems) {
      lane_items_cut = true;
      return false;
    }
    ++lane_items;
    return true;
  }

  void blocks(std::string_view name, const std::vector<BusyBlock>& blocks) {
    out.key(name).begin_array();
    for (const BusyBlock& block : blocks)
      if (room()) write_numbers(out, block.begin, block.end, block.row, block.count);
    out.end_array();
  }

  void lane(const LaneWindow& view) {
    const Lane& lane = index.lanes()[view.lane];
    out.begin_object().field("lane", view.lane).key("spans").begin_array();
    for (const VisibleInterval& span : view.spans) {
      if (!room()) break;
      const IntervalRow& row = lane.depths[span.row];
      out.begin_array().value(row.begins[span.index]).value(row.ends[span.index]).value(span.row).value(span.index);
      out.value(row.items[span.index]);
      if (!needle.empty()) out.value(index.span_attribute_contains(view.lane, span.row, span.index, needle) ? 1 : 0);
      out.end_array();
      sites.insert(row.items[span.index]);
    }
    out.end_array();
    blocks("blocks", view.blocks);
    out.key("runs").begin_array();
    for (const VisibleInterval& run : view.runs) {
      if (!room()) break;
      const IntervalRow& row = lane.runs[run.row];
      const uint32_t task = row.items[run.index];
      write_numbers(out, row.begins[run.index], row.ends[run.index], run.row, task, task_kind_number(index, task));
      tasks.insert(task);
    }
    out.end_array();
    blocks("run_blocks", view.run_blocks);
    out.key("idle").begin_array();
    for (const VisibleInterval& wide : view.idle_wide)
      if (room()) write_numbers(out, lane.idle.begins[wide.index], lane.idle.ends[wide.index], 1);
    for (const BusyBlock& block : view.idle)
      if (room()) write_numbers(out, block.begin, block.end, block.count);
    // [begin, end, count, state]: state 1 preempted (runnable), 2 blocked, -1 a merge of both.
    out.end_array().key("off_cpu").begin_array();
    for (const VisibleInterval& wide : view.off_cpu_wide)
      if (room())
        write_numbers(out, lane.off_cpu.begins[wide.index], lane.off_cpu.ends[wide.index], 1,
                      lane.off_cpu.items[wide.index]);
    for (const BusyBlock& block : view.off_cpu)
      if (room()) write_numbers(out, block.begin, block.end, block.count, -1);
    out.end_array().key("samples").begin_array();  // [first, last, count]
    for (const BusyBlock& block : view.samples)
      if (room()) write_numbers(out, block.begin, block.end, block.count);
    out.end_array().end_object();
  }

  void site_names() {
    out.key("names").begin_object();
    for (const uint32_t site : sites) out.field(std::to_string(site), index.site_name(site));
    out.end_object();
  }

  // The end of the task rows kept whole while their lines and blocks fit (rows come in order);
  // the most there is when all fit.
  uint32_t task_rows_kept_end() const {
    std::map<uint32_t, size_t> items_of_row;
    for (const TaskInView& view : window.tasks) ++items_of_row[view.row];
    for (const TaskBlock& block : window.task_blocks) ++items_of_row[block.row];
    size_t task_items = 0;
    for (const auto& [row, items] : items_of_row) {
      if (task_items + items > kMaxWindowTaskItems) return row;
      task_items += items;
    }
    return std::numeric_limits<uint32_t>::max();
  }

  void task_rows(const TaskRowQuery& rows, uint32_t rows_kept_end) {
    const TaskTree& tree = index.task_tree();
    out.key("tasks").begin_object().key("lines").begin_array();
    for (const TaskInView& view : window.tasks) {
      if (view.row >= rows_kept_end) continue;
      const uint32_t task = view.task;
      const TaskLine& where = index.task_lines()[task];
      out.begin_array().value(where.begin).value(index.line_end(task)).value(view.row).value(task);
      out.value(static_cast<int>(line_state(index, task))).value(task_kind_number(index, task));
      out.value(tree.depth[task]).value(tree.subtree[task] - 1).begin_array();
      for (const auto& [run_begin, run_end] : view.runs) out.value(run_begin).value(run_end);
      out.end_array().value(where.row).end_array();
      tasks.insert(task);
    }
    // [begin, end, row, count, failed, cancelled]
    out.end_array().key("blocks").begin_array();
    for (const TaskBlock& block : window.task_blocks)
      if (block.row < rows_kept_end)
        write_numbers(out, block.begin, block.end, block.row, block.count, block.failed, block.cancelled);
    out.end_array().key("names").begin_object();
    for (const uint32_t task : tasks) out.field(std::to_string(task), index.task_display_name(task));
    out.end_object()
        .field("rows", window.task_rows_shown)
        .field("first_row", std::min(window.task_rows_shown, rows.first));
    out.key("process_rows").begin_array();
    for (const uint32_t row : window.process_first_rows) out.value(row);
    out.end_array().end_object();
  }

  void arrows_and_messages() {
    out.key("arrows").begin_array();
    for (size_t k = 0; k < std::min(window.arrows.size(), kMaxWindowArrows); ++k) {
      const ArrowInView& view = window.arrows[k];
      const Arrow& arrow = index.arrows()[view.arrow];
      write_numbers(out, static_cast<int>(arrow.kind), arrow.from_task, arrow.to_task, arrow.from_time, arrow.to_time,
                    view.from_row, view.to_row, view.merged);
    }
    out.end_array().key("messages").begin_array();
    for (size_t k = 0; k < std::min(window.messages.size(), kMaxWindowMessages); ++k) {
      const MessageInView& view = window.messages[k];
      const MessageArrow& message = index.messages()[view.message];
      write_numbers(out, message.from_lane, message.to_lane, message.from_time, message.to_time, view.merged);
    }
    out.end_array();
  }

  void counters() {
    out.key("counters").begin_array();
    for (const CounterWindow& view : window.counters) {
      out.begin_object().field("counter", view.counter).field("downsampled", view.downsampled);
      out.key("points").begin_array();
      for (const CounterPoint& point : view.points) write_numbers(out, point.time, point.min, point.max, point.last);
      out.end_array().end_object();
    }
    out.end_array();
  }
};

}  // namespace

std::string window_text(const TimelineIndex& index, uint64_t begin, uint64_t end, uint32_t width,
                        const TaskRowQuery& asked, const std::string& match) {
  TaskRowQuery rows = asked;
  rows.last = static_cast<uint32_t>(std::min<uint64_t>(rows.last, uint64_t{rows.first} + kMaxWindowTaskRows));
  const Window window = index.window(begin, end, width, rows);
  WindowWriter writer{index, window, fold_case(match)};
  JsonOut& out = writer.out;
  out.begin_object().field("begin", window.begin).field("end", window.end).field("width", window.width);
  out.key("lanes").begin_array();
  for (const LaneWindow& view : window.lanes) writer.lane(view);
  out.end_array();
  writer.site_names();
  const uint32_t rows_kept_end = writer.task_rows_kept_end();
  writer.task_rows(rows, rows_kept_end);
  writer.arrows_and_messages();
  writer.counters();
  out.key("more").begin_object();
  out.field("rows", asked.last > rows.last && window.task_rows_shown > rows.last);
  out.field("task_items", rows_kept_end != std::numeric_limits<uint32_t>::max());
  out.field("arrows", window.arrows.size() > kMaxWindowArrows)
      .field("messages", window.messages.size() > kMaxWindowMessages);
  out.field("lane_items", writer.lane_items_cut).end_object().end_object();
  return out.take();
}

}  // namespace chronicle::viewer
