// The input is a metadata text: parsed, or refused with a reason.
#include <stdexcept>
#include <string_view>

#include "format/metadata.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto trace = chronicle::format::parse_metadata(std::string_view(reinterpret_cast<const char*>(data), size));
    (void)chronicle::format::clock_offset(trace.clock);
  } catch (const std::runtime_error&) {
  } catch (const std::invalid_argument&) {
  } catch (const std::out_of_range&) {
  }
  return 0;
}
