#include "analysis/sample_profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_set>

namespace chronicle::analysis {
namespace {

constexpr uint64_t kThreadOwner = uint64_t{1} << 63;  // task ids stay below (layout.hpp)

// What is going on on each thread as the events go by in time order: the spans open in each
// owner (a thread, or a task wherever it runs), the tasks running on each thread, and each
// thread's CPU state since its last switch.
// A span open in an owner: its sequence (what its end is found by) and its site (its label).
struct OpenSpan {
  uint64_t sequence;
  uint32_t site_id;
};

class ThreadContexts {
 public:
  explicit ThreadContexts(const reader::Trace& trace) : trace_(trace) {}

  // The pairing's spans are copied: the one a begin returns lives in a stack that moves when it
  // grows, and an end returns another copy of the span it closes. Found again by sequence.
  void span_begin(const reader::PairedSpan& span) {
    open_[owner(span)].push_back({span.sequence, span.site_id});
    open_sequences_.insert(span.sequence);
  }
  void span_end(const reader::PairedSpan& span) {
    open_sequences_.erase(span.sequence);
    auto& stack = open_[owner(span)];
    const auto found = std::find_if(stack.rbegin(), stack.rend(),
                                    [&](const OpenSpan& open) { return open.sequence == span.sequence; });
    if (found != stack.rend()) stack.erase(std::next(found).base());
  }
  // A task created inside spans (of the task or thread creating it, or inherited by that task)
  // runs for them: the rule of reader/span_pairing.hpp that makes it their child in the exports.
  void task_created(uint32_t thread, uint64_t task) {
    std::vector<OpenSpan> spans = open_spans(thread);
    if (!spans.empty()) inherited_[task] = std::move(spans);
  }
  void run_begin(uint32_t thread, uint64_t task) { running_[thread].push_back(task); }
  void run_end(uint32_t thread, uint64_t task) {
    auto& runs = running_[thread];
    const auto found = std::find(runs.rbegin(), runs.rend(), task);
    if (found != runs.rend()) runs.erase(std::next(found).base());
  }
  void task_name(uint64_t task, uint32_t name_id) { task_names_[task] = name_id; }

  uint64_t running_task(uint32_t thread) const {
    const auto found = running_.find(thread);
    return found == running_.end() || found->second.empty() ? 0 : found->second.back();
  }
  // The spans open on `thread` now, outermost first: those its running task inherited from where
  // it was created and are still open, then the task's own; or the thread's own.
  std::vector<OpenSpan> open_spans(uint32_t thread) const {
    const uint64_t task = running_task(thread);
    std::vector<OpenSpan> spans;
    if (task != 0)
      if (const auto inherited = inherited_.find(task); inherited != inherited_.end())
        for (const OpenSpan& span : inherited->second)
          if (open_sequences_.contains(span.sequence)) spans.push_back(span);
    if (const auto own = open_.find(task != 0 ? task : (kThreadOwner | thread)); own != open_.end())
      spans.insert(spans.end(), own->second.begin(), own->second.end());
    return spans;
  }
  std::string span_label(const OpenSpan* span) const {
    if (!span) return "(no span)";
    const reader::Site* site = trace_.site(span->site_id);
    return site ? site->category + "/" + site->name : fmt::format("#{}", span->site_id);
  }
  std::string task_label(uint64_t task) const {
    if (task == 0) return "(no task)";
    const auto found = task_names_.find(task);
    const reader::Site* site = found == task_names_.end() ? nullptr : trace_.site(found->second);
    return site ? site->name : fmt::format("task {:x}", task);
  }
  std::string thread_label(uint32_t thread) const {
    const std::string name = trace_.thread_name(thread);
    return name.empty() ? fmt::format("thread {}", thread) : fmt::format("{} ({})", name, thread);
  }

 private:
  static uint64_t owner(const reader::PairedSpan& span) {
    return span.task != 0 ? span.task : (kThreadOwner | span.thread_id);
  }
  const reader::Trace& trace_;
  std::unordered_map<uint64_t, std::vector<OpenSpan>> open_;
  std::unordered_set<uint64_t> open_sequences_;
  std::unordered_map<uint64_t, std::vector<OpenSpan>> inherited_;  // by task, when not empty
  std::unordered_map<uint32_t, std::vector<uint64_t>> running_;
  std::unordered_map<uint64_t, uint32_t> task_names_;
};

}  // namespace

SampleProfile::SampleProfile(const reader::Trace& trace, SampleGrouping grouping)
    : stacks_(std::make_unique<SampleStacks>(trace)) {
  ThreadContexts contexts(trace);
  const uint32_t pid = static_cast<uint32_t>(trace.description().pid);
  struct ThreadCpu {
    format::CpuState state;
    uint64_t since;  // ticks
  };
  std::unordered_map<uint32_t, ThreadCpu> cpu;

  // The time since the thread's last switch goes to the thread, the spans open on it and its
  // running task, in the state it was in; called before anything of these changes.
  auto settle = [&](uint32_t thread, uint64_t ticks) {
    const auto found = cpu.find(thread);
    if (found == cpu.end() || ticks <= found->second.since) return;
    const uint64_t ns = static_cast<uint64_t>(trace.to_unix_ns(ticks) - trace.to_unix_ns(found->second.since));
    const format::CpuState state = found->second.state;
    found->second.since = ticks;
    thread_states_[contexts.thread_label(thread)].add(state, ns);
    std::set<std::string> labels;  // a recursive span counts once
    for (const OpenSpan& span : contexts.open_spans(thread)) labels.insert(contexts.span_label(&span));
    for (const std::string& label : labels) span_states_[label].add(state, ns);
    if (const uint64_t task = contexts.running_task(thread)) task_states_[contexts.task_label(task)].add(state, ns);
  };

  trace.for_each_event([&](const reader::Event& event) {
    switch (event.type) {
      case format::EventId::span_begin:
        settle(event.thread_id, event.ticks);
        if (event.span) contexts.span_begin(*event.span);
        break;
      case format::EventId::span_end:
        settle(event.thread_id, event.ticks);
        if (event.span) contexts.span_end(*event.span);
        break;
      case format::EventId::task_create:
        contexts.task_name(event.task, event.name_id);
        contexts.task_created(event.thread_id, event.task);
        break;
      case format::EventId::task_run_begin:
        settle(event.thread_id, event.ticks);
        contexts.run_begin(event.thread_id, event.task);
        break;
      case format::EventId::task_run_end:
        settle(event.thread_id, event.ticks);
        contexts.run_end(event.thread_id, event.task);
        break;
      case format::EventId::cpu_switch:
        if (event.sampled_pid != pid) break;
        ++switches_;
        settle(event.sampled_tid, event.ticks);
        cpu[event.sampled_tid] = ThreadCpu{event.cpu_state, event.ticks};
        break;
      case format::EventId::cpu_sample: {
        if (event.sampled_pid != pid) {
          ++other_process_samples_;
          break;
        }
        ++samples_;
        const std::vector<uint32_t>& frames = stacks_->leaf_first(event);
        overall_.add(frames);
        const uint32_t thread = event.sampled_tid;
        std::string group;
        if (grouping == SampleGrouping::by_thread) {
          group = contexts.thread_label(thread);
        } else if (grouping == SampleGrouping::by_span) {
          const std::vector<OpenSpan> spans = contexts.open_spans(thread);
          group = contexts.span_label(spans.empty() ? nullptr : &spans.back());
        } else {
          group = contexts.task_label(contexts.running_task(thread));
        }
        groups_[group].add(frames);
        break;
      }
      default:
        break;
    }
    return true;
  });
  warnings_ = stacks_->warnings();
}

SampleProfile::~SampleProfile() = default;

}  // namespace chronicle::analysis
