#include "recorder/environment.hpp"

#include <fmt/format.h>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>

#include "chronicle/config.hpp"

namespace chronicle {

bool config_from_environment(Config& config) {
  const char* output = std::getenv(recorder::kEnvOutput);
  const char* armed = std::getenv(recorder::kEnvArmed);
  config.armed = armed && *armed && std::string_view(armed) != "0";
  if ((!output || !*output) && !config.armed) return false;
  if (!output) output = "";
  if (const char* mode = std::getenv(recorder::kEnvMode); mode && *mode) {
    const std::string_view text = mode;
    if (text == "stream")
      config.mode = Mode::stream;
    else if (text == "flight")
      config.mode = Mode::flight;
    else
      throw std::invalid_argument(fmt::format("{}='{}': expected stream or flight", recorder::kEnvMode, text));
  }
  if (const char* size = std::getenv(recorder::kEnvBufferSize); size && *size)
    config.buffer_size = recorder::parse_size(size);
  if (const char* size = std::getenv(recorder::kEnvPacketSize); size && *size)
    config.packet_size = recorder::parse_size(size);
  if (const char* categories = std::getenv(recorder::kEnvCategories); categories && *categories)
    config.categories = categories;
  if (const char* dir = std::getenv(recorder::kEnvShmDir); dir && *dir) config.shm_dir = dir;
  if (const char* keep = std::getenv(recorder::kEnvKeepShm); keep && *keep && std::string_view(keep) != "0")
    config.keep_shm = true;
  const char* collector = std::getenv(recorder::kEnvCollector);
  config.output = collector && std::string_view(collector) == "external" ? std::string() : std::string(output);
  return true;
}

}  // namespace chronicle
