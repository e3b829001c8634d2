// `chronicle stats --profile` and its variants: the sampler's view of a trace (docs/profiling.md).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace chronicle::cli {

struct SampleProfileOptions {
  bool by_span = false;  // group samples by the innermost open span
  bool by_task = false;  // by the running task
  bool folded = false;   // collapsed stacks only, for flamegraph.pl and speedscope
  bool json = false;
  size_t top = 30;
};

int print_sample_profile(const std::vector<std::string>& traces, const SampleProfileOptions& options);

}  // namespace chronicle::cli
