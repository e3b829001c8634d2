// The input is the definitions stream (site and thread names) of an otherwise sound trace.
#include "fuzz_support.hpp"
#include "reader/trace_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chronicle;
  static const std::string directory = [] {
    const std::string path = fuzz::scratch_directory() + "/strings";
    std::filesystem::create_directories(path);
    const std::string metadata = fuzz::sound_metadata();
    fuzz::write_file(path + "/metadata", reinterpret_cast<const uint8_t*>(metadata.data()), metadata.size());
    return path;
  }();
  fuzz::write_file(directory + "/strings", data, size);
  try {
    reader::Trace trace(directory);
    for (const auto& site : trace.sites()) (void)site.name.size();
  } catch (const format::InputError&) {
  }
  return 0;
}
