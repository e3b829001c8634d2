#include "viewer/task_time_rows.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>
#include <set>
#include <utility>

#include "viewer/task_tree.hpp"

namespace chronicle::viewer {

namespace {

constexpr uint32_t kUnplaced = kNoTask;

// The free row nearest `near` (the one after it on a tie); none when no row is free.
std::set<uint32_t>::iterator nearest_free(std::set<uint32_t>& free, uint32_t near) {
  auto after = free.lower_bound(near);
  if (after == free.begin()) return after;
  auto before = std::prev(after);
  if (after == free.end()) return before;
  return *after - near <= near - *before ? after : before;
}

}  // namespace

std::vector<uint32_t> pack_tasks_by_time(std::span<const TaskSpan> tasks) {
  const auto count = static_cast<uint32_t>(tasks.size());
  std::vector<uint32_t> by_creation(count);
  std::iota(by_creation.begin(), by_creation.end(), 0);
  std::sort(by_creation.begin(), by_creation.end(), [&](uint32_t a, uint32_t b) {
    return std::pair(tasks[a].begin, tasks[a].tree_row) < std::pair(tasks[b].begin, tasks[b].tree_row);
  });
  std::vector<uint32_t> rows(count, kUnplaced);
  using Ending = std::pair<uint64_t, uint32_t>;  // when a row's task ends, the row
  std::priority_queue<Ending, std::vector<Ending>, std::greater<>> ending;
  std::set<uint32_t> free;
  uint32_t used = 0;
  for (uint32_t task : by_creation) {
    const TaskSpan& span = tasks[task];
    while (!ending.empty() && ending.top().first < span.begin) {
      free.insert(ending.top().second);
      ending.pop();
    }
    // A parent not placed yet (its creation is after its child's: a damaged trace) is no guide.
    const uint32_t parent_row = span.parent < count ? rows[span.parent] : kUnplaced;
    uint32_t row = used;
    if (!free.empty()) {
      auto chosen = parent_row == kUnplaced ? free.begin() : nearest_free(free, parent_row + 1);
      row = *chosen;
      free.erase(chosen);
    } else {
      ++used;
    }
    rows[task] = row;
    ending.emplace(std::max(span.end, span.begin), row);
  }
  return rows;
}

TaskTimeRows build_task_time_rows(std::span<const TaskSpan> tasks, std::span<const TaskEnding> endings,
                                  std::span<const uint32_t> process_first_tasks) {
  const auto count = static_cast<uint32_t>(tasks.size());
  std::vector<uint32_t> rows(count, 0);
  std::vector<uint32_t> process_first;
  uint32_t rows_before = 0;
  for (size_t p = 0; p < process_first_tasks.size(); ++p) {
    const uint32_t first = std::min(process_first_tasks[p], count);
    const uint32_t last = p + 1 < process_first_tasks.size() ? std::min(process_first_tasks[p + 1], count) : count;
    process_first.push_back(rows_before);
    if (first >= last) continue;
    // The process's tasks with their parents as indexes among them.
    std::vector<TaskSpan> own(tasks.begin() + first, tasks.begin() + last);
    for (TaskSpan& span : own) span.parent = span.parent >= first && span.parent < last ? span.parent - first : kNoTask;
    const std::vector<uint32_t> packed = pack_tasks_by_time(own);
    uint32_t used = 0;
    for (uint32_t k = 0; k < packed.size(); ++k) {
      rows[first + k] = rows_before + packed[k];
      used = std::max(used, packed[k] + 1);
    }
    rows_before += used;
  }
  process_first.push_back(rows_before);

  TaskTimeRows out;
  std::vector<uint32_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return std::pair(rows[a], tasks[a].begin) < std::pair(rows[b], tasks[b].begin);
  });
  std::vector<uint32_t> first(rows_before + 1, count);
  std::vector<uint64_t> begins(count);
  std::vector<uint64_t> ends(count);
  std::vector<uint32_t> failed(count + 1, 0);
  std::vector<uint32_t> cancelled(count + 1, 0);
  for (uint32_t k = count; k-- > 0;) first[rows[order[k]]] = k;
  for (uint32_t row = rows_before; row-- > 0;) first[row] = std::min(first[row], first[row + 1]);
  for (uint32_t k = 0; k < count; ++k) {
    const uint32_t task = order[k];
    begins[k] = tasks[task].begin;
    ends[k] = std::max(tasks[task].end, tasks[task].begin);
    const TaskEnding ending = task < endings.size() ? endings[task] : TaskEnding::other;
    failed[k + 1] = failed[k] + (ending == TaskEnding::failed ? 1 : 0);
    cancelled[k + 1] = cancelled[k] + (ending == TaskEnding::cancelled ? 1 : 0);
  }
  out.row = rows;
  out.first = first;
  out.order = order;
  out.begins = begins;
  out.ends = ends;
  out.failed_before = failed;
  out.cancelled_before = cancelled;
  out.process_first = process_first;
  return out;
}

}  // namespace chronicle::viewer
