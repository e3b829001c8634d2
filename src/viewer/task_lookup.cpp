// What a task's details and its critical path need, found without the task graphs: tasks by id,
// each task's waits and arrows, its children, and its record. An index read from the cache keeps
// the graphs on disk (a billion-event trace's are some 13 GiB once read), so that answering for
// one task reads that task and the few the walk reaches, not every task of the trace.
#include <algorithm>
#include <memory>
#include <unordered_map>

#include "viewer/timeline_index.hpp"

namespace chronicle::viewer {
namespace {

// Items grouped by a key in [0, keys): first[k]..first[k + 1] are key k's, in the order given.
// `each(visit)` calls visit(key, item) for every item, the same way twice (count, then place).
template <class Item, class Each>
void group_by_key(size_t keys, Each each, Column<uint32_t>& first, Column<Item>& items) {
  Column<uint32_t>::Built starts(keys + 1, 0);
  each([&](uint32_t key, const Item&) { ++starts[key + 1]; });
  for (size_t k = 0; k < keys; ++k) starts[k + 1] += starts[k];
  typename Column<Item>::Built placed(starts[keys]);
  Column<uint32_t>::Built next(starts.begin(), starts.end() - 1);
  each([&](uint32_t key, const Item& item) { placed[next[key]++] = item; });
  first = std::move(starts);
  items = std::move(placed);
}

}  // namespace

void TimelineIndex::index_task_lookup() {
  Column<uint32_t> wait_first = index_task_ids_and_waits();
  index_task_arrow_lists();
  wait_first_ = std::move(wait_first);
}

Column<uint32_t> TimelineIndex::index_task_ids_and_waits() {
  const auto tasks = static_cast<uint32_t>(task_lines_.size());
  Column<model::TaskId>::Built ids(tasks);
  Column<uint32_t>::Built order(tasks);
  for (size_t process = 0; process < task_processes_.size(); ++process) {
    const model::TaskGraph& graph = graphs_.at(process);
    TaskProcess& about = task_processes_[process];
    about.first_ticks = graph.first_ticks();
    about.edge_count = graph.edges().size();
    const uint32_t first = about.first_task;
    const auto count = static_cast<uint32_t>(graph.tasks().size());
    for (uint32_t k = 0; k < count; ++k) order[first + k] = first + k;
    auto id_of = [&](uint32_t task) { return graph.tasks()[task - first].id; };
    std::sort(order.begin() + first, order.begin() + first + count,
              [&](uint32_t a, uint32_t b) { return id_of(a) < id_of(b); });
    for (uint32_t k = first; k < first + count; ++k) ids[k] = id_of(order[k]);
  }
  task_ids_sorted_ = std::move(ids);
  task_by_sorted_id_ = std::move(order);

  // From here on task_index reads the sorted ids (wait_first_ is set last: see task_index).
  Column<uint32_t> wait_first;
  group_by_key<TaskWait>(
      tasks,
      [&](auto visit) {
        for (size_t process = 0; process < task_processes_.size(); ++process)
          for (const model::Edge& edge : graphs_[process].edges()) {
            if (edge.kind != model::EdgeKind::waits_on) continue;
            if (const auto from = task_index_by_id(process, edge.from)) visit(*from, TaskWait{edge.ticks, edge.to});
          }
      },
      wait_first, waits_);
  for (uint32_t k = 0; k < tasks; ++k)
    std::stable_sort(waits_.begin() + wait_first[k], waits_.begin() + wait_first[k + 1],
                     [](const TaskWait& a, const TaskWait& b) { return a.ticks < b.ticks; });
  return wait_first;
}

void TimelineIndex::index_task_arrow_lists() {
  const auto tasks = static_cast<uint32_t>(task_lines_.size());
  group_by_key<uint32_t>(
      tasks,
      [&](auto visit) {
        for (uint32_t k = 0; k < arrows_.size(); ++k) {
          visit(arrows_[k].from_task, k);
          if (arrows_[k].to_task != arrows_[k].from_task) visit(arrows_[k].to_task, k);
        }
      },
      task_arrow_first_, task_arrow_list_);
}

std::pair<uint32_t, uint32_t> TimelineIndex::tasks_of_process(size_t process) const {
  const uint32_t last = process + 1 < task_processes_.size() ? task_processes_[process + 1].first_task
                                                             : static_cast<uint32_t>(task_lines_.size());
  return {task_processes_.at(process).first_task, last};
}

std::optional<uint32_t> TimelineIndex::task_index_by_id(size_t process, model::TaskId id) const {
  const auto [first, last] = tasks_of_process(process);
  const auto begin = task_ids_sorted_.begin() + first;
  const auto end = task_ids_sorted_.begin() + last;
  const auto found = std::lower_bound(begin, end, id);
  if (found == end || *found != id) return std::nullopt;
  return task_by_sorted_id_[static_cast<size_t>(found - task_ids_sorted_.begin())];
}

std::optional<uint32_t> TimelineIndex::task_index(size_t process, model::TaskId id) const {
  // While the index is being built, the graphs are at hand and the lookup is not made yet.
  if (wait_first_.empty()) {
    const model::TaskGraph& graph = graphs().at(process);
    const model::Task* task = graph.find(id);
    if (!task) return std::nullopt;
    return task_processes_[process].first_task + static_cast<uint32_t>(task - graph.tasks().data());
  }
  return task_index_by_id(process, id);
}

bool TimelineIndex::graphs_held() const {
  return !graph_loader_ || graph_loader_->loaded.load(std::memory_order_acquire);
}

model::Task TimelineIndex::task_record(uint32_t index) const {
  if (index >= task_lines_.size()) throw std::out_of_range("task index");
  if (graphs_held() || task_records_.empty()) return task(index);
  return graph_loader_->read_task(task_records_[index]);
}

std::span<const TaskWait> TimelineIndex::task_waits(uint32_t index) const {
  return {waits_.data() + wait_first_.at(index), waits_.data() + wait_first_.at(index + 1)};
}

std::span<const uint32_t> TimelineIndex::task_arrows(uint32_t index) const {
  return {task_arrow_list_.data() + task_arrow_first_.at(index),
          task_arrow_list_.data() + task_arrow_first_.at(index + 1)};
}

std::vector<uint32_t> TimelineIndex::task_children(uint32_t index, size_t limit, size_t& count) const {
  // In tree order a task's subtree is the rows after its own; its children's subtrees follow one
  // another there, so the walk steps from child to child over their subtrees.
  std::vector<uint32_t> children;
  count = 0;
  const uint32_t end = task_tree_.row.at(index) + task_tree_.subtree[index];
  for (uint32_t row = task_tree_.row[index] + 1; row < end;) {
    const uint32_t child = task_tree_.row_task[row];
    if (children.size() < limit) children.push_back(child);
    ++count;
    row += std::max<uint32_t>(task_tree_.subtree[child], 1);
  }
  return children;
}

namespace {

// One process's tasks as the critical path's walk reads them: a task's record when the walk
// first reaches it, its waits from the index.
class IndexTasks final : public analysis::TaskSource {
 public:
  IndexTasks(const TimelineIndex& index, size_t process) : index_(index), process_(process) {}

  const model::Task* find(model::TaskId id) const override {
    auto [entry, inserted] = read_.try_emplace(id);
    if (inserted)
      if (const auto task = index_.task_index(process_, id))
        entry->second = std::make_unique<model::Task>(index_.task_record(*task));
    return entry->second.get();
  }
  std::span<const Wait> waits(model::TaskId id) const override {
    const auto task = index_.task_index(process_, id);
    return task ? index_.task_waits(*task) : std::span<const Wait>();
  }
  uint64_t first_ticks() const override { return index_.task_processes().at(process_).first_ticks; }
  size_t size() const override {
    const auto [first, last] = index_.tasks_of_process(process_);
    return last - first + index_.task_processes()[process_].edge_count;
  }

 private:
  const TimelineIndex& index_;
  size_t process_;
  mutable std::unordered_map<model::TaskId, std::unique_ptr<model::Task>> read_;
};

}  // namespace

std::vector<std::unique_ptr<analysis::TaskSource>> TimelineIndex::task_sources() const {
  std::vector<std::unique_ptr<analysis::TaskSource>> sources;
  for (size_t process = 0; process < task_processes_.size(); ++process)
    sources.push_back(std::make_unique<IndexTasks>(*this, process));
  return sources;
}

analysis::CriticalPath TimelineIndex::critical_path_in_process(size_t process, model::TaskId target) const {
  return analysis::critical_path(IndexTasks(*this, process), target);
}

}  // namespace chronicle::viewer
