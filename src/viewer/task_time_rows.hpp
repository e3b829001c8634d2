// Tasks by time: each task on a row that no other task holds while it lives, rows reused once
// their task has ended, so that at any window the tasks alive in it are on the first rows and
// a chain of handlers (each creating the next) takes a few rows, not one per handler. The tree
// order (task_tree.hpp) is the other way to lay tasks out; the page switches between them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "viewer/column.hpp"

namespace chronicle::viewer {

// One task as the packing sees it: alive over [begin, end], created by `parent` (kNoTask: none),
// at `tree_row` in the tree order (the tie-break between tasks created at the same time).
struct TaskSpan {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint32_t parent = 0;
  uint32_t tree_row = 0;
};

// Rows from 0 for `tasks` (one process's), at most as many as tasks ever alive at once: tasks
// are placed by creation (tree row on a tie), each on the free row nearest the one right after
// its parent's (the later row on a tie), a task without a parent on the first free row, a new
// row only when none is free. A row is free once its task ended before the new one began.
std::vector<uint32_t> pack_tasks_by_time(std::span<const TaskSpan> tasks);

// The rows as windows read them: a row's tasks one after another by begin. They do not overlap,
// so their ends are in order too and a window finds its first task in a row by binary search.
struct TaskTimeRows {
  Column<uint32_t> row;     // task index -> its row
  Column<uint32_t> first;   // row -> its first position in `order`; one more at the end
  Column<uint32_t> order;   // task indexes, row by row, each row by begin
  Column<uint64_t> begins;  // of the tasks in `order`
  Column<uint64_t> ends;
  Column<uint32_t> failed_before;  // failed tasks in `order` before each position; one more at the end
  Column<uint32_t> cancelled_before;
  Column<uint32_t> process_first;  // per process, its first row; one more at the end (the row count)
  uint32_t count() const { return first.empty() ? 0 : static_cast<uint32_t>(first.size() - 1); }
};

// What each task needs beyond its span to be read by windows: failed, cancelled or neither.
enum class TaskEnding : uint8_t { other, failed, cancelled };

// `process_first_tasks`: each process's first task index (its tasks run to the next one's); each
// process's rows follow the previous process's.
TaskTimeRows build_task_time_rows(std::span<const TaskSpan> tasks, std::span<const TaskEnding> endings,
                                  std::span<const uint32_t> process_first_tasks);

}  // namespace chronicle::viewer
