// The input is a thread stream file beside sound metadata: open, read every event, build the
// task graph, the profile, and the sampler's profile and CPU states. Malformed input must end in
// InputError, never a crash or a hang.
#include "analysis/cpu_timeline.hpp"
#include "analysis/profile.hpp"
#include "analysis/sample_profile.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chronicle;
  static const std::string directory = [] {
    const std::string path = fuzz::scratch_directory() + "/stream";
    std::filesystem::create_directories(path);
    const std::string metadata = fuzz::sound_metadata();
    fuzz::write_file(path + "/metadata", reinterpret_cast<const uint8_t*>(metadata.data()), metadata.size());
    return path;
  }();
  fuzz::write_file(directory + "/thread-1", data, size);
  try {
    reader::Trace trace(directory);
    model::TaskGraph graph;
    analysis::profile_trace(trace, &graph);
    const analysis::SampleProfile samples(trace, analysis::SampleGrouping::by_span);
    const analysis::CpuTimeline timeline(trace);
    static_cast<void>(timeline.between(1, 0, ~uint64_t{0}));
  } catch (const format::InputError&) {
  }
  return 0;
}
