// The input is a file given to `chronicle merge` as OTLP/JSON (merge/otlp_input.hpp): whatever its
// bytes, convert_otlp_file either refuses it with format::InputError, naming the file, or writes
// traces that the reader reads whole, each with a span for every span it says it wrote. Any other
// exception is a defect: merge would end on a message that does not say what is wrong.
#include <cstdlib>
#include <filesystem>
#include <string>

#include "format/input_error.hpp"
#include "fuzz_support.hpp"
#include "merge/otlp_input.hpp"
#include "reader/trace_reader.hpp"

namespace {

using namespace chronicle;

void require(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string scratch = fuzz::scratch_directory();
  const std::string file = scratch + "/input.json";
  const std::string staging = scratch + "/staging";
  std::filesystem::remove_all(staging);
  std::filesystem::create_directories(staging);
  fuzz::write_file(file, data, size);
  merge::OtlpConversion conversion;
  try {
    conversion = merge::convert_otlp_file(file, staging);
  } catch (const format::InputError& refused) {
    require(std::string(refused.what()).find(file) != std::string::npos);
    return 0;
  }
  require(!conversion.processes.empty());
  for (const merge::OtlpProcess& process : conversion.processes) {
    const reader::Trace trace(process.directory);
    uint64_t begins = 0;
    trace.for_each_event([&](const reader::Event& event) {
      begins += event.type == format::EventId::span_begin;
      return true;
    });
    require(begins == process.spans);
  }
  return 0;
}
