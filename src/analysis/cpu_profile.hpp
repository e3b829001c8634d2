// The tables of a sampling profiler over symbolised call stacks: a flat profile (each function's
// own samples and the samples it was anywhere on the stack for), a call graph (who called each
// function and whom it called, in samples) and collapsed stacks for flame graph tools.
//
// Functions are the caller's name ids (one id per function name); a sample's total counts each
// function once however often recursion puts it on the stack, so no total exceeds the samples.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chronicle::analysis {

struct CpuSampleStack {
  std::vector<uint32_t> frames;  // function-name ids, leaf first
  uint64_t count = 1;
};

struct FlatProfileRow {
  uint32_t function;
  uint64_t self = 0;   // samples with the function as the leaf
  uint64_t total = 0;  // samples with the function anywhere in the stack (once per sample)
};

struct CallGraphEntry {
  uint32_t function;
  uint64_t self = 0;
  uint64_t total = 0;
  // (caller, samples through that call), largest first then by id; a sample counts once per
  // pair however often the call repeats in its stack. Direct recursion makes a function its own
  // caller and callee.
  std::vector<std::pair<uint32_t, uint64_t>> callers;
  std::vector<std::pair<uint32_t, uint64_t>> callees;
};

class CpuProfile {
 public:
  // One stack, leaf first, seen `count` times. An empty stack counts in samples() alone.
  void add(std::span<const uint32_t> leaf_first_frames, uint64_t count = 1);
  uint64_t samples() const { return samples_; }
  // Every function met, by self desc, then total desc, then id.
  std::vector<FlatProfileRow> flat() const;
  // The `top` functions by total (then self desc, then id), largest first.
  std::vector<CallGraphEntry> call_graph(size_t top) const;
  // Collapsed stacks for flamegraph.pl and speedscope: "root;...;leaf COUNT\n", lines sorted;
  // `prefix` (e.g. a thread or span name) as the outermost frame when not empty. Stacks whose
  // names come out the same are one line.
  std::string folded(const std::function<std::string(uint32_t)>& name_of, std::string_view prefix = {}) const;

  const std::map<std::vector<uint32_t>, uint64_t>& stacks() const { return stacks_; }

 private:
  std::map<std::vector<uint32_t>, uint64_t> stacks_;  // leaf-first frames -> samples
  uint64_t samples_ = 0;
};

// gprof's flat profile in samples: a header line, then per row (flat() order, at most
// `max_rows`) the function's share of the samples as its own, the running sum of those shares,
// its self and total samples and its name:
//       %   cumulative        self     total  name
//    80.1        80.1          801      1000  hot()
std::string format_flat_profile(const CpuProfile& profile, const std::function<std::string(uint32_t)>& name_of,
                                size_t max_rows);
// gprof's call graph in samples, for the `top` functions by total: per function, its callers
// (samples through each call) above its own line ([index], % of all samples in it, self, total,
// name) and its callees below; functions with an entry of their own carry its [index].
std::string format_call_graph(const CpuProfile& profile, const std::function<std::string(uint32_t)>& name_of,
                              size_t top);

}  // namespace chronicle::analysis
