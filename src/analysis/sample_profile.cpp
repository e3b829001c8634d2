#include "analysis/sample_profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>

#include "symbols/symbolizer.hpp"

namespace chronicle::analysis {
namespace {

constexpr uint64_t kThreadOwner = uint64_t{1} << 63;  // task ids stay below (layout.hpp)

// Stacks that stop after one frame are what frame-pointer unwinding gives in code built without
// frame pointers; a module is reported when most of its samples (of enough) look like that.
constexpr uint64_t kShallowReportMinimum = 20;

struct ModuleDepth {
  uint64_t samples = 0;
  uint64_t single_frame = 0;
};

std::vector<symbols::Module> modules_of(const reader::Trace& trace) {
  std::vector<symbols::Module> modules;
  for (const reader::ModuleMap& map : trace.modules())
    modules.push_back(symbols::Module{map.base, map.start, map.end, map.path, map.build_id});
  return modules;
}

// What is going on on each thread as the events go by in time order: the spans open in each
// owner (a thread, or a task wherever it runs), the tasks running on each thread, and each
// thread's CPU state since its last switch.
class ThreadContexts {
 public:
  explicit ThreadContexts(const reader::Trace& trace) : trace_(trace) {}

  void span_begin(const reader::PairedSpan& span) { open_[owner(span)].push_back(&span); }
  void span_end(const reader::PairedSpan& span) {
    auto& stack = open_[owner(span)];
    const auto found = std::find(stack.rbegin(), stack.rend(), &span);
    if (found != stack.rend()) stack.erase(std::next(found).base());
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
  // The spans open on `thread` now, outermost first: its running task's, or the thread's own.
  const std::vector<const reader::PairedSpan*>* open_spans(uint32_t thread) const {
    const uint64_t task = running_task(thread);
    const auto found = open_.find(task != 0 ? task : (kThreadOwner | thread));
    return found == open_.end() ? nullptr : &found->second;
  }
  std::string span_label(const reader::PairedSpan* span) const {
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
  std::unordered_map<uint64_t, std::vector<const reader::PairedSpan*>> open_;
  std::unordered_map<uint32_t, std::vector<uint64_t>> running_;
  std::unordered_map<uint64_t, uint32_t> task_names_;
};

// The sample's stack, innermost first, each address with whether it is a return address. The
// kernel follows frame pointers; where the interrupted function has not set one up (a leaf that
// needs no stack frame, a prologue), the frame pointer is still its caller's and the chain skips
// that caller: its return address is then on the stack where the call frame information says,
// among the words recorded from the stack pointer. A return address in no module ends the stack:
// code built without frame pointers used the register for something else, and what the chain
// found from there is not frames.
const std::vector<std::pair<uint64_t, bool>>& unwound_stack(const reader::Event& event, symbols::Symbolizer& symbolizer,
                                                            std::vector<std::pair<uint64_t, bool>>& out) {
  out.clear();
  for (uint32_t i = 0; i < event.frame_count; ++i) {
    if (i > 0 && symbolizer.resolve(event.frame(i), true).module.empty()) break;
    out.emplace_back(event.frame(i), i > 0);
  }
  if (out.empty()) return out;
  const std::optional<uint64_t> offset = symbolizer.return_address_offset(out[0].first);
  if (!offset || *offset % 8 != 0 || *offset / 8 >= event.stack_word_count) return out;
  const uint64_t caller = event.stack_word(*offset / 8);
  if (out.size() < 2 || out[1].first != caller) out.insert(out.begin() + 1, {caller, true});
  return out;
}

}  // namespace

uint32_t SampleProfile::intern(const std::string& name) {
  const auto [found, added] = ids_.try_emplace(name, static_cast<uint32_t>(names_.size()));
  if (added) names_.push_back(name);
  return found->second;
}

SampleProfile::SampleProfile(const reader::Trace& trace, SampleGrouping grouping) {
  symbols::Symbolizer symbolizer(modules_of(trace));
  ThreadContexts contexts(trace);
  const uint32_t pid = static_cast<uint32_t>(trace.description().pid);
  std::map<std::string, ModuleDepth> depths;
  struct ThreadCpu {
    format::CpuState state;
    uint64_t since;  // ticks
  };
  std::unordered_map<uint32_t, ThreadCpu> cpu;
  std::vector<uint32_t> frames;
  std::vector<std::pair<uint64_t, bool>> addresses;

  // The time since the thread's last switch goes to the thread, the spans open on it and its
  // running task, in the state it was in; called before anything of these changes.
  auto settle = [&](uint32_t thread, uint64_t ticks) {
    const auto found = cpu.find(thread);
    if (found == cpu.end() || ticks <= found->second.since) return;
    const uint64_t ns = static_cast<uint64_t>(trace.to_unix_ns(ticks) - trace.to_unix_ns(found->second.since));
    const format::CpuState state = found->second.state;
    found->second.since = ticks;
    thread_states_[contexts.thread_label(thread)].add(state, ns);
    if (const auto* spans = contexts.open_spans(thread)) {
      std::set<std::string> labels;  // a recursive span counts once
      for (const reader::PairedSpan* span : *spans) labels.insert(contexts.span_label(span));
      for (const std::string& label : labels) span_states_[label].add(state, ns);
    }
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
        frames.clear();
        for (const auto& [address, is_return] : unwound_stack(event, symbolizer, addresses))
          frames.push_back(intern(symbolizer.name(address, is_return)));
        if (event.frame_count > 0) {
          ModuleDepth& depth = depths[symbolizer.resolve(event.frame(0), false).module];
          ++depth.samples;
          if (event.frame_count == 1) ++depth.single_frame;
        }
        overall_.add(frames);
        const uint32_t thread = event.sampled_tid;
        std::string group;
        if (grouping == SampleGrouping::by_thread) {
          group = contexts.thread_label(thread);
        } else if (grouping == SampleGrouping::by_span) {
          const auto* spans = contexts.open_spans(thread);
          group = contexts.span_label(spans && !spans->empty() ? spans->back() : nullptr);
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
  warnings_ = symbolizer.warnings();
  for (const auto& [module, depth] : depths)
    if (depth.samples >= kShallowReportMinimum && depth.single_frame * 2 > depth.samples)
      warnings_.push_back(
          fmt::format("{}: {} of {} samples stop after one frame: the stacks are cut short (build it with "
                      "-fno-omit-frame-pointer, docs/profiling.md)",
                      module.empty() ? "(no module)" : module, depth.single_frame, depth.samples));
}

}  // namespace chronicle::analysis
