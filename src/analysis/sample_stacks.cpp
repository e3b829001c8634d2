#include "analysis/sample_stacks.hpp"

#include <fmt/format.h>

#include <optional>

#include "symbols/symbolizer.hpp"

namespace chronicle::analysis {
namespace {

// Stacks that stop after one frame are what frame-pointer unwinding gives in code built without
// frame pointers; a module is reported when most of its samples (of enough) look like that.
constexpr uint64_t kShallowReportMinimum = 20;

std::vector<symbols::Module> modules_of(const reader::Trace& trace) {
  std::vector<symbols::Module> modules;
  for (const reader::ModuleMap& map : trace.modules())
    modules.push_back(symbols::Module{map.base, map.start, map.end, map.path, map.build_id});
  return modules;
}

}  // namespace

SampleStacks::SampleStacks(const reader::Trace& trace)
    : symbolizer_(std::make_unique<symbols::Symbolizer>(modules_of(trace))) {}

SampleStacks::~SampleStacks() = default;

uint32_t SampleStacks::intern(const std::string& name) {
  const auto [found, added] = ids_.try_emplace(name, static_cast<uint32_t>(names_.size()));
  if (added) names_.push_back(name);
  return found->second;
}

// The kernel follows frame pointers; where the interrupted function has not set one up (a leaf
// that needs no stack frame, a prologue), the frame pointer is still its caller's and the chain
// skips that caller: its return address is then on the stack where the call frame information
// says, among the words recorded from the stack pointer. A return address in no module ends the
// stack: code built without frame pointers used the register for something else, and what the
// chain found from there is not frames.
void SampleStacks::unwind(const reader::Event& sample) {
  addresses_.clear();
  for (uint32_t i = 0; i < sample.frame_count; ++i) {
    if (i > 0 && symbolizer_->resolve(sample.frame(i), true).module.empty()) break;
    addresses_.emplace_back(sample.frame(i), i > 0);
  }
  if (addresses_.empty()) return;
  const std::optional<uint64_t> offset = symbolizer_->return_address_offset(addresses_[0].first);
  if (!offset || *offset % 8 != 0 || *offset / 8 >= sample.stack_word_count) return;
  const uint64_t caller = sample.stack_word(*offset / 8);
  if (addresses_.size() < 2 || addresses_[1].first != caller) addresses_.insert(addresses_.begin() + 1, {caller, true});
}

const std::vector<uint32_t>& SampleStacks::leaf_first(const reader::Event& sample) {
  unwind(sample);
  frames_.clear();
  for (const auto& [address, is_return] : addresses_) frames_.push_back(intern(symbolizer_->name(address, is_return)));
  if (sample.frame_count > 0) {
    ModuleDepth& depth = depths_[symbolizer_->resolve(sample.frame(0), false).module];
    ++depth.samples;
    if (sample.frame_count == 1) ++depth.single_frame;
  }
  return frames_;
}

std::vector<std::string> SampleStacks::warnings() const {
  std::vector<std::string> warnings = symbolizer_->warnings();
  for (const auto& [module, depth] : depths_)
    if (depth.samples >= kShallowReportMinimum && depth.single_frame * 2 > depth.samples)
      warnings.push_back(
          fmt::format("{}: {} of {} samples stop after one frame: the stacks are cut short (build it with "
                      "-fno-omit-frame-pointer, docs/profiling.md)",
                      module.empty() ? "(no module)" : module, depth.single_frame, depth.samples));
  return warnings;
}

}  // namespace chronicle::analysis
