// The call stacks of a trace's cpu_sample events as function names (docs/profiling.md): the
// frame-pointer chain the kernel (or the signal handler) walked, the caller of a frameless leaf
// recovered from the recorded stack words where the call frame information says, each address
// symbolised against the trace's module definitions. One function name, one id.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "reader/trace_reader.hpp"

namespace chronicle::symbols {
class Symbolizer;
}

namespace chronicle::analysis {

class SampleStacks {
 public:
  explicit SampleStacks(const reader::Trace& trace);
  ~SampleStacks();
  SampleStacks(const SampleStacks&) = delete;
  SampleStacks& operator=(const SampleStacks&) = delete;

  // A cpu_sample event's stack, function-name ids leaf first; valid until the next call.
  const std::vector<uint32_t>& leaf_first(const reader::Event& sample);
  const std::string& function_name(uint32_t id) const { return names_[id]; }
  const std::vector<std::string>& function_names() const { return names_; }
  // Modules whose files are missing or another build, and modules where most stacks (of those
  // met by leaf_first) stop after one frame: code built without frame pointers.
  std::vector<std::string> warnings() const;

 private:
  struct ModuleDepth {
    uint64_t samples = 0;
    uint64_t single_frame = 0;
  };
  uint32_t intern(const std::string& name);
  void unwind(const reader::Event& sample);

  std::unique_ptr<symbols::Symbolizer> symbolizer_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::map<std::string, ModuleDepth> depths_;
  std::vector<std::pair<uint64_t, bool>> addresses_;  // (address, is a return address), leaf first
  std::vector<uint32_t> frames_;
};

}  // namespace chronicle::analysis
