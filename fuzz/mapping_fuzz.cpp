// The input is a session mapping file, as a dead process (or a hostile one) might leave it:
// checked, then snapshot into a trace directory, which is read back, then finished as `record`
// finishes it.
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
    // What `record` does at a program's end: drains a stream session's rings, then its open packets.
    std::filesystem::remove_all(output);
    collector::Collector finishing(mapping, output);
    finishing.finish();
  } catch (const format::InputError&) {
  } catch (const std::runtime_error&) {  // e.g. metadata of a mapping whose clock makes no sense
  }
  return 0;
}
