// Tasks in tree order, as the original Lwt viewer drew them: each task on a row of its own,
// right after the task that created it (its parent, or the earlier children's subtrees), so a
// subtree is a run of consecutive rows and hiding it is taking a range of rows out.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "viewer/column.hpp"

namespace chronicle::viewer {

inline constexpr uint32_t kNoTask = std::numeric_limits<uint32_t>::max();

struct TaskTree {
  Column<uint32_t> row_task;  // row -> task index, in pre-order
  Column<uint32_t> row;       // task index -> row
  Column<uint32_t> subtree;   // task index -> rows of its subtree, itself included
  Column<uint32_t> depth;     // task index -> depth in the tree (roots 0)
};

// `parents[k]`: the index of the task that created task k, or kNoTask. Children and roots keep
// the tasks' order (the task graph's: creation, normally). Parents that would make a cycle (a
// damaged trace) are treated as missing.
TaskTree layout_task_tree(const std::vector<uint32_t>& parents);

// The rows a view shows when the subtrees of some tasks are collapsed (the tasks themselves
// stay): rows are numbered as shown, a hidden row's task takes the row of its collapsed
// ancestor.
class ShownRows {
 public:
  ShownRows(const TaskTree& tree, const std::vector<uint32_t>& collapsed);
  uint32_t count() const { return count_; }
  uint32_t shown_row(uint32_t row) const;  // a tree row -> the row it is drawn on
  // The tree row shown as row `shown`: the first tree row drawn on `shown` or after (shown_row
  // never goes down); the tree's row count when `shown` is past the last row.
  uint32_t tree_row_of(uint32_t shown) const;
  // The tree rows shown as rows [first, last), in order.
  std::vector<uint32_t> tree_rows(uint32_t first, uint32_t last) const;

 private:
  struct Hidden {
    uint32_t first;  // tree rows [first, last) are hidden
    uint32_t last;
    uint32_t hidden_before;  // rows hidden by the ranges before this one
  };
  std::vector<Hidden> hidden_;  // by first, not overlapping
  uint32_t rows_ = 0;
  uint32_t count_ = 0;
};

}  // namespace chronicle::viewer
