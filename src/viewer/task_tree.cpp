#include "viewer/task_tree.hpp"

#include <algorithm>
#include <numeric>

namespace chronicle::viewer {

namespace {

// A parent link that leads back to the task itself is dropped (the trace is damaged).
std::vector<uint32_t> acyclic_parents(const std::vector<uint32_t>& parents) {
  std::vector<uint32_t> out = parents;
  std::vector<uint8_t> state(parents.size(), 0);  // 0 unseen, 1 on the current walk, 2 done
  std::vector<uint32_t> walk;
  for (uint32_t start = 0; start < out.size(); ++start) {
    walk.clear();
    uint32_t task = start;
    while (task != kNoTask && task < out.size() && state[task] == 0) {
      state[task] = 1;
      walk.push_back(task);
      task = out[task];
    }
    if (task != kNoTask && task < out.size() && state[task] == 1) out[walk.back()] = kNoTask;
    for (uint32_t seen : walk) state[seen] = 2;
  }
  for (uint32_t& parent : out)
    if (parent >= out.size()) parent = kNoTask;
  return out;
}

}  // namespace

TaskTree layout_task_tree(const std::vector<uint32_t>& parents_given) {
  const auto count = static_cast<uint32_t>(parents_given.size());
  const std::vector<uint32_t> parents = acyclic_parents(parents_given);
  // Children lists, each in the tasks' order, as offsets into one array.
  std::vector<uint32_t> first_child(count + 1, 0);
  for (uint32_t k = 0; k < count; ++k)
    if (parents[k] != kNoTask) ++first_child[parents[k] + 1];
  std::partial_sum(first_child.begin(), first_child.end(), first_child.begin());
  std::vector<uint32_t> children(first_child.back());
  std::vector<uint32_t> filled(first_child.begin(), first_child.end() - 1);
  std::vector<uint32_t> roots;
  for (uint32_t task = 0; task < count; ++task) {
    if (parents[task] == kNoTask)
      roots.push_back(task);
    else
      children[filled[parents[task]]++] = task;
  }
  TaskTree tree;
  tree.row.assign(count, 0);
  tree.subtree.assign(count, 1);
  tree.depth.assign(count, 0);
  tree.row_task.reserve(count);
  std::vector<uint32_t> stack;
  for (uint32_t root : roots) {
    stack.push_back(root);
    while (!stack.empty()) {
      const uint32_t task = stack.back();
      stack.pop_back();
      tree.row[task] = static_cast<uint32_t>(tree.row_task.size());
      tree.row_task.push_back(task);
      for (uint32_t k = first_child[task + 1]; k-- > first_child[task];) {
        tree.depth[children[k]] = tree.depth[task] + 1;
        stack.push_back(children[k]);
      }
    }
  }
  // Pre-order: a subtree's size is what its rows add up to, children after parents.
  for (uint32_t row = count; row-- > 0;) {
    const uint32_t task = tree.row_task[row];
    if (parents[task] != kNoTask) tree.subtree[parents[task]] += tree.subtree[task];
  }
  return tree;
}

ShownRows::ShownRows(const TaskTree& tree, const std::vector<uint32_t>& collapsed)
    : rows_(static_cast<uint32_t>(tree.row_task.size())) {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  for (uint32_t task : collapsed)
    if (task < tree.row.size() && tree.subtree[task] > 1)
      ranges.emplace_back(tree.row[task] + 1, tree.row[task] + tree.subtree[task]);
  std::sort(ranges.begin(), ranges.end());
  uint32_t hidden = 0;
  for (const auto& [first, last] : ranges) {
    if (!hidden_.empty() && first < hidden_.back().last) continue;  // inside a collapsed ancestor
    hidden_.push_back({first, last, hidden});
    hidden += last - first;
  }
  count_ = rows_ - hidden;
}

uint32_t ShownRows::shown_row(uint32_t row) const {
  auto after = std::upper_bound(hidden_.begin(), hidden_.end(), row,
                                [](uint32_t value, const Hidden& range) { return value < range.first; });
  if (after == hidden_.begin()) return row;
  const Hidden& range = *(after - 1);
  if (row < range.last) return range.first - 1 - range.hidden_before;  // the collapsed task's row
  return row - range.hidden_before - (range.last - range.first);
}

uint32_t ShownRows::tree_row_of(uint32_t shown) const {
  if (shown >= count_) return rows_;
  // Past every hidden range that begins at or before the row reached so far.
  uint32_t row = shown;
  for (size_t next = 0; next < hidden_.size() && hidden_[next].first <= row; ++next)
    row += hidden_[next].last - hidden_[next].first;
  return row;
}

std::vector<uint32_t> ShownRows::tree_rows(uint32_t first, uint32_t last) const {
  std::vector<uint32_t> out;
  last = std::min(last, count_);
  if (first >= last) return out;
  uint32_t row = tree_row_of(first);
  size_t next =
      static_cast<size_t>(std::upper_bound(hidden_.begin(), hidden_.end(), row,
                                           [](uint32_t value, const Hidden& range) { return value < range.first; }) -
                          hidden_.begin());
  out.reserve(last - first);
  for (uint32_t shown = first; shown < last && row < rows_; ++shown) {
    out.push_back(row);
    ++row;
    if (next < hidden_.size() && hidden_[next].first == row) row = hidden_[next++].last;
  }
  return out;
}

}  // namespace chronicle::viewer
