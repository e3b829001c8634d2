// The input is a process's metrics mapping file: checked, read (every metric summed over its
// shards) and exposed as Prometheus text, as `chronicle metrics show` does.
#include "format/input_error.hpp"
#include "fuzz_support.hpp"
#include "metrics/exposition.hpp"
#include "metrics/snapshot.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chronicle;
  const std::string path = fuzz::scratch_directory() + "/metrics.shm";
  fuzz::write_file(path, data, size);
  try {
    metrics::MetricsMapping mapping(path);
    const metrics::MetricsSnapshot snapshot = mapping.read();
    const std::string text = metrics::expose(snapshot, metrics::TextFormat::openmetrics);
    if (text.empty()) std::abort();  // even no metric ends with "# EOF"
  } catch (const format::InputError&) {
  }
  return 0;
}
