// The input is a session mapping file, as a dead process (or a hostile one) might leave it:
// checked, then snapshot into a trace directory, which is read back, then drained and finished as
// `record --otlp-endpoint` does (cutting open packets), and read back.
#include "collector/collector.hpp"
#include "fuzz_support.hpp"
#include "reader/trace_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chronicle;
  const std::string path = fuzz::scratch_directory() + "/mapping.shm";
  const std::string output = fuzz::scratch_directory() + "/mapping-out";
  fuzz::write_file(path, data, size);
  std::filesystem::remove_all(output);
  try {
    collector::SessionMapping mapping(path);
    collector::Collector collector(mapping, output);
    collector.snapshot();
    reader::Trace trace(output);
    trace.for_each_event([](const reader::Event&) { return true; });
    // What `record --otlp-endpoint` does while the program runs (drains, cutting the open packets
    // that waited) and at its end (the open packets' rest); the trace is read back.
    std::filesystem::remove_all(output);
    collector::CollectorOptions options;
    options.cut_open_packets_after = std::chrono::nanoseconds(1);
    collector::Collector finishing(mapping, output, options);
    finishing.drain();
    finishing.drain();
    finishing.finish();
    reader::Trace finished(output);
    finished.for_each_event([](const reader::Event&) { return true; });
  } catch (const format::InputError&) {
  } catch (const std::runtime_error&) {  // e.g. metadata of a mapping whose clock makes no sense
  }
  return 0;
}
