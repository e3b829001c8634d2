// Several traces on one timeline (IndexCombiner), and the critical paths that cross them.
#include "viewer/timeline_index.hpp"
#include "viewer/timeline_index_internal.hpp"

#include "analysis/critical_path.hpp"
#include "analysis/critical_path_cpu.hpp"
#include "reader/messages.hpp"

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>

namespace chronicle::viewer {

using index_internal::process_group;

// The traces reopened and the messages between them found, once, when a critical path first
// crosses processes: the index otherwise holds no trace (view lets their mappings go).
class CrossProcessPaths {
 public:
  explicit CrossProcessPaths(std::vector<std::string> directories) : directories_(std::move(directories)) {}
  const std::vector<std::string>& directories() const { return directories_; }

  // Throws when a trace can no longer be read.
  // `sources`: each process's tasks, in the order of the directories.
  analysis::CriticalPath path(const std::vector<const analysis::TaskSource*>& sources, size_t process,
                              model::TaskId target) {
    std::lock_guard lock(mutex_);
    if (traces_.empty())
      for (const std::string& directory : directories_) traces_.emplace_back(directory);
    if (traces_.size() != sources.size()) throw std::logic_error("a task source per trace");
    std::vector<analysis::ProcessGraph> processes;
    for (const reader::Trace& trace : traces_) processes.push_back({&trace, nullptr});  // the traces only
    if (!arrivals_) arrivals_ = analysis::MessageArrivals::find(processes);
    return analysis::critical_path(sources, processes, *arrivals_, process, target);
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> directories_;
  std::vector<reader::Trace> traces_;
  std::optional<analysis::MessageArrivals> arrivals_;
};

std::vector<std::string> TimelineIndex::cross_process_directories() const {
  return cross_process_ ? cross_process_->directories() : std::vector<std::string>{};
}

std::shared_ptr<CrossProcessPaths> TimelineIndex::paths_between(std::vector<std::string> directories) {
  return std::make_shared<CrossProcessPaths>(std::move(directories));
}

// Puts the indexes of several traces, each built alone, on one timeline: each moved by where its
// origin lies after the earliest one, the lanes, counters and tasks of the others appended with
// their site ids moved past the sites before them and their task indexes past the tasks before.
class IndexCombiner {
 public:
  static TimelineIndex combine(const std::vector<reader::Trace>& traces, const TimelineIndex::Progress& progress,
                               model::GraphDetail detail) {
    std::vector<TimelineIndex> parts;
    uint64_t events_before = 0;  // in the traces already indexed
    for (const reader::Trace& trace : traces) {
      TimelineIndex::Progress part_progress;
      if (progress) part_progress = [&](uint64_t events) { progress(events_before + events); };
      parts.push_back(TimelineIndex::build_one(trace, part_progress, detail, TimelineIndex::TaskLookup::made_later));
      parts.back().whole_spans_.keep_whole(parts.back().lanes_);  // to be added to, and shifted
      events_before += parts.back().event_count();
    }
    int64_t origin = parts.front().origin_unix_ns_;
    for (const TimelineIndex& part : parts) origin = std::min(origin, part.origin_unix_ns_);
    std::vector<uint32_t> first_lanes;
    std::vector<std::string> directories;
    TimelineIndex combined;
    for (size_t k = 0; k < parts.size(); ++k) {
      first_lanes.push_back(static_cast<uint32_t>(combined.lanes_.size()));
      const std::string group = process_group(traces[k]);
      for (std::string& warning : parts[k].warnings_) warning = group + ": " + warning;
      directories.push_back(traces[k].directory());
      const auto offset = static_cast<uint64_t>(parts[k].origin_unix_ns_ - origin);
      shift(parts[k], offset);
      parts[k].task_processes_.front().origin_offset_ns = offset;
      if (k == 0) {
        combined = std::move(parts[0]);
        combined.origin_offset_ns_ = offset;
        combined.origin_unix_ns_ = origin;
        continue;
      }
      append(combined, std::move(parts[k]));
    }
    index_internal::lay_out_tasks(combined);
    index_internal::sort_arrows(combined);
    index_internal::finish_whole_spans(combined);
    combined.whole_spans_.keep_apart_only(combined.lanes_);
    combined.messages_ = find_messages(traces, first_lanes, origin);
    combined.cross_process_ = std::make_shared<CrossProcessPaths>(std::move(directories));
    combined.index_task_lookup();
    return combined;
  }

 private:
  static void shift_row(IntervalRow& row, uint64_t offset) {
    for (uint64_t& begin : row.begins) begin += offset;
    for (uint64_t& end : row.ends) end += offset;
  }

  static void shift(TimelineIndex& index, uint64_t offset) {
    if (offset == 0) return;
    for (Lane& lane : index.lanes_) {
      for (IntervalRow& row : lane.depths) shift_row(row, offset);
      for (IntervalRow& row : lane.runs) shift_row(row, offset);
      shift_row(lane.idle, offset);
      shift_row(lane.off_cpu, offset);
      shift_row(lane.samples, offset);
      shift_row(lane.lost, offset);
      shift_row(lane.busy, offset);
      for (uint64_t& time : lane.markers.times) time += offset;
    }
    for (uint64_t& time : index.whole_spans_.begins) time += offset;
    for (uint64_t& time : index.whole_spans_.ends) time += offset;
    for (uint64_t& time : index.whole_spans_.reach) time += offset;
    for (uint64_t& time : index.whole_spans_.block_reach) time += offset;
    for (uint64_t& time : index.whole_spans_.block_begins) time += offset;
    for (TaskLine& line : index.task_lines_) {
      line.begin += offset;
      line.end += offset;
    }
    for (uint64_t& time : index.run_begins_) time += offset;
    for (uint64_t& time : index.run_ends_) time += offset;
    for (Arrow& arrow : index.arrows_) {
      arrow.from_time += offset;
      arrow.to_time += offset;
    }
    for (CounterSeries& series : index.counters_)
      for (uint64_t& time : series.times) time += offset;
    shift_row(index.samples_without_lane_, offset);
    index.duration_ += offset;
  }

  // `part`'s lanes, counters, sites and tasks after `into`'s.
  static void append(TimelineIndex& into, TimelineIndex&& part) {
    const auto site_offset = static_cast<uint32_t>(into.sites_.size());
    const auto lane_offset = static_cast<uint32_t>(into.lanes_.size());
    const auto task_offset = static_cast<uint32_t>(into.task_lines_.size());
    append_tasks(into, std::move(part), lane_offset);
    auto moved_site = [site_offset](uint32_t site) { return site == 0 ? 0 : site + site_offset; };
    for (reader::Site& site : part.sites_) {
      site.id = moved_site(site.id);
      into.sites_.push_back(std::move(site));
    }
    const auto stack_offset = static_cast<uint32_t>(into.sample_stacks_.size());
    append_sample_stacks(into.sample_stacks_, part.sample_stacks_);
    for (uint32_t& stack : part.samples_without_lane_.items) stack += stack_offset;
    append_row(into.samples_without_lane_, part.samples_without_lane_);
    for (Lane& lane : part.lanes_) {
      for (uint32_t& stack : lane.samples.items) stack += stack_offset;
      for (IntervalRow& row : lane.depths)
        for (uint32_t& item : row.items) item = moved_site(item);
      for (uint32_t& site : lane.markers.sites) site = moved_site(site);
      for (IntervalRow& row : lane.runs)
        for (uint32_t& item : row.items) item += task_offset;
      into.lanes_.push_back(std::move(lane));
    }
    for (CounterSeries& series : part.counters_) {
      series.site = moved_site(series.site);
      series.lane += lane_offset;
      for (uint32_t& lane : series.lanes) lane += lane_offset;
      for (uint32_t& lane : series.sample_lanes) lane += lane_offset;
      into.counters_.push_back(std::move(series));
    }
    for (auto& prefix : part.busy_sums_) into.busy_sums_.push_back(std::move(prefix));
    const auto span_offset = static_cast<uint32_t>(into.whole_spans_.size());
    // An index loop, not views::drop: clang 14 (the fuzz build) does not take libstdc++ 12's ranges.
    for (size_t lane = lane_offset; lane < into.lanes_.size(); ++lane)
      for (Column<uint32_t>& column : into.lanes_[lane].depth_spans)
        for (uint32_t& span : column) span += span_offset;
    append_whole_spans(into.whole_spans_, part.whole_spans_, moved_site, lane_offset);
    for (std::string& warning : part.warnings_) into.warnings_.push_back(std::move(warning));
    into.event_count_ += part.event_count_;
    into.duration_ = std::max(into.duration_, part.duration_);
  }

  // `part`'s whole spans after `into`'s (finish_whole_spans puts them in order of begin).
  template <typename MovedSite>
  static void append_whole_spans(WholeSpans& into, const WholeSpans& part, const MovedSite& moved_site,
                                 uint32_t lane_offset) {
    if (part.kept_apart_only()) throw std::logic_error("spans kept in their pieces added to others");
    const auto span_offset = static_cast<uint32_t>(into.size());
    into.keep_every_running();  // the first part's were kept as it was finished
    for (size_t k = 0; k < part.size(); ++k) {
      into.begins.push_back(part.begins[k]);
      into.ends.push_back(part.ends[k]);
      into.sites.push_back(moved_site(part.sites[k]));
      into.lanes.push_back(part.lanes[k] + lane_offset);
      into.parents.push_back(part.parents[k] == WholeSpans::kNoParent ? WholeSpans::kNoParent
                                                                      : part.parents[k] + span_offset);
      into.running.push_back(part.running_ns(k, {}));
    }
    for (size_t a = 0; a < part.attribute_spans.size(); ++a) {
      into.attribute_spans.push_back(part.attribute_spans[a] + span_offset);
      into.attribute_texts.add(part.attribute_texts[a]);
    }
  }

  // `part`'s stacks and functions after `into`'s (a function of both processes has an id in each).
  static void append_sample_stacks(SampleStackTable& into, const SampleStackTable& part) {
    if (part.size() == 0) return;
    if (into.first.empty()) into.first.push_back(0);
    const auto function_offset = static_cast<uint32_t>(into.functions.size());
    for (size_t k = 0; k < part.size(); ++k) {
      for (const uint32_t function : part[k]) into.frames.push_back(function + function_offset);
      into.first.push_back(into.frames.size());
    }
    for (size_t k = 0; k < part.functions.size(); ++k) into.functions.add(part.functions[k]);
  }

  // `part`'s intervals after `into`'s, in time order (both rows are).
  static void append_row(IntervalRow& into, const IntervalRow& part) {
    IntervalRow merged;
    size_t a = 0;
    size_t b = 0;
    while (a < into.size() || b < part.size()) {
      const bool from_into = b == part.size() || (a < into.size() && into.begins[a] <= part.begins[b]);
      const IntervalRow& row = from_into ? into : part;
      const size_t k = from_into ? a++ : b++;
      merged.add(row.begins[k], row.ends[k], row.items[k]);
    }
    into = std::move(merged);
  }

  // Task indexes, rows and arrows are laid out again once every part is in.
  static void append_tasks(TimelineIndex& into, TimelineIndex&& part, uint32_t lane_offset) {
    const auto task_offset = static_cast<uint32_t>(into.task_lines_.size());
    const auto run_offset = static_cast<uint32_t>(into.run_begins_.size());
    TaskProcess process = part.task_processes_.front();
    process.first_task = task_offset;
    process.first_lane = lane_offset;
    into.task_processes_.push_back(std::move(process));
    into.graphs_.push_back(std::move(part.graphs_.front()));
    into.task_lines_.insert_at_end(part.task_lines_.begin(), part.task_lines_.end());
    for (uint32_t k = 0; k < part.task_names_.size(); ++k) {
      into.task_names_.add(part.task_names_[k]);
      into.task_labels_.add(part.task_labels_[k]);
    }
    for (size_t a = 0; a < part.task_attribute_tasks_.size(); ++a) {
      into.task_attribute_tasks_.push_back(part.task_attribute_tasks_[a] + task_offset);
      into.task_attribute_texts_.add(part.task_attribute_texts_[a]);
    }
    for (size_t k = 1; k < part.run_first_.size(); ++k) into.run_first_.push_back(part.run_first_[k] + run_offset);
    into.run_begins_.insert_at_end(part.run_begins_.begin(), part.run_begins_.end());
    into.run_ends_.insert_at_end(part.run_ends_.begin(), part.run_ends_.end());
    for (Arrow arrow : part.arrows_) {
      arrow.from_task += task_offset;
      arrow.to_task += task_offset;
      into.arrows_.push_back(arrow);
    }
  }

  // Every message sent in one trace and received in another, by send time. Streams and lanes
  // are in the same order, so a stream's lane is its trace's first lane plus its number.
  static std::vector<MessageArrow> find_messages(const std::vector<reader::Trace>& traces,
                                                 const std::vector<uint32_t>& first_lanes, int64_t origin) {
    auto time = [&](size_t trace, uint64_t ticks) {
      return static_cast<uint64_t>(std::max<int64_t>(traces[trace].to_unix_ns(ticks) - origin, 0));
    };
    std::vector<MessageArrow> messages;
    for (const reader::MessageEnds& message : reader::match_messages(traces))
      messages.push_back({first_lanes[message.sender] + static_cast<uint32_t>(message.send_stream),
                          first_lanes[message.receiver] + static_cast<uint32_t>(message.receive_stream),
                          time(message.sender, message.send_ticks), time(message.receiver, message.receive_ticks)});
    std::sort(messages.begin(), messages.end(),
              [](const MessageArrow& a, const MessageArrow& b) { return a.from_time < b.from_time; });
    return messages;
  }
};

TimelineIndex TimelineIndex::build(const std::vector<reader::Trace>& traces, const Progress& progress,
                                   model::GraphDetail detail) {
  if (traces.empty()) throw std::invalid_argument("no trace to index");
  if (traces.size() == 1) return build(traces.front(), progress, detail);
  return IndexCombiner::combine(traces, progress, detail);
}

namespace {

// The lane whose runs row holds task `task`'s run that begins at `begin` (ns), if any.
std::optional<uint32_t> lane_of_run(const std::vector<Lane>& lanes, uint32_t task, uint64_t begin) {
  for (uint32_t lane = 0; lane < lanes.size(); ++lane)
    for (const IntervalRow& row : lanes[lane].runs) {
      const std::span<const uint64_t> begins = row.begins;
      for (auto at = std::lower_bound(begins.begin(), begins.end(), begin); at != begins.end() && *at == begin; ++at)
        if (row.items[static_cast<size_t>(at - begins.begin())] == task) return lane;
    }
  return std::nullopt;
}

// The stretches of [from, to) (ns) that `lane` spent off its CPU, as its off_cpu row has them
// (sorted, not overlapping): `visit(begin, end, format::CpuState)`.
template <typename Visit>
void off_cpu_stretches(const Lane& lane, uint64_t from, uint64_t to, Visit&& visit) {
  const IntervalRow& row = lane.off_cpu;
  const std::span<const uint64_t> begins = row.begins;
  size_t k = static_cast<size_t>(std::upper_bound(begins.begin(), begins.end(), from) - begins.begin());
  if (k > 0) --k;
  for (; k < row.size() && row.begins[k] < to; ++k)
    if (row.ends[k] > from)
      visit(std::max(row.begins[k], from), std::min(row.ends[k], to), static_cast<format::CpuState>(row.items[k]));
}

}  // namespace

// With scheduler data (record --sched), each `ran` step is split by its thread's CPU state, by
// the rule `stats --critical-path` follows (analysis::split_ran_step): blocked, preempted.
std::vector<CriticalStep> TimelineIndex::split_by_cpu_state(std::vector<CriticalStep> steps) const {
  if (std::none_of(lanes_.begin(), lanes_.end(), [](const Lane& lane) { return lane.off_cpu.size() > 0; }))
    return steps;
  std::vector<CriticalStep> split;
  for (CriticalStep& step : steps) {
    if (step.state != analysis::StepState::ran) {
      split.push_back(std::move(step));
      continue;
    }
    std::vector<analysis::RunOn> runs;
    const auto begins = run_begins(step.task), ends = run_ends(step.task);
    for (size_t k = 0; k < begins.size(); ++k)
      if (ends[k] > step.from && begins[k] < step.to)
        if (const auto lane = lane_of_run(lanes_, step.task, begins[k])) runs.push_back({*lane, begins[k], ends[k]});
    auto stretches = [this](uint64_t lane, uint64_t from, uint64_t to, auto&& visit) {
      off_cpu_stretches(lanes_[lane], from, to, visit);
    };
    for (CriticalStep& piece : analysis::split_ran_step(step, runs, stretches)) split.push_back(std::move(piece));
  }
  return split;
}

// Across processes when the index has several: a task that waited for a message goes on in the
// sender's process (as `chronicle stats --critical-path` does). Should the traces be gone since
// the index was built, the path stays within the task's own process.
std::vector<CriticalStep> TimelineIndex::critical_path(uint32_t task_number) const {
  std::vector<CriticalStep> steps;
  if (task_number >= task_lines_.size()) return steps;
  const size_t process = process_of_task(task_number);
  const model::TaskId target = task_lines_[task_number].id;
  analysis::CriticalPath path;
  bool found = false;
  if (cross_process_) try {
      const std::vector<std::unique_ptr<analysis::TaskSource>> sources = task_sources();
      std::vector<const analysis::TaskSource*> each;
      for (const auto& source : sources) each.push_back(source.get());
      path = cross_process_->path(each, process, target);
      found = true;
    } catch (const std::exception&) {
    }
  if (!found) {
    path = critical_path_in_process(process, target);
    for (analysis::CriticalStep& step : path.steps) step.process = process;
  }
  for (const analysis::CriticalStep& step : path.steps) {
    const auto index = task_index(step.process, step.task);
    if (index)
      steps.push_back({*index, step.state, step.what, to_ns(step.process, step.from), to_ns(step.process, step.to)});
  }
  return split_by_cpu_state(std::move(steps));
}

}  // namespace chronicle::viewer
