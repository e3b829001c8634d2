#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

#include "chronicle/config.hpp"
#include "settings/settings.hpp"

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
  if (const char* handler = std::getenv(recorder::kEnvCrashHandler); handler && std::string_view(handler) == "0")
    config.crash_handler = false;
  if (const char* signal = std::getenv(recorder::kEnvSnapshotSignal); signal && *signal)
    config.snapshot_signal = recorder::parse_snapshot_signal(signal);
  if (const char* dir = std::getenv(recorder::kEnvSnapshotDir); dir && *dir) config.snapshot_dir = dir;
  if (const char* interval = std::getenv(recorder::kEnvSelfStatsInterval); interval && *interval)
    config.self_stats_interval =
        std::chrono::milliseconds(recorder::parse_interval_ms(recorder::kEnvSelfStatsInterval, interval));
  if (const char* frequency = std::getenv(recorder::kEnvSample); frequency && *frequency)
    config.sample_frequency = recorder::parse_sample_frequency(frequency);
  if (const char* sched = std::getenv(recorder::kEnvSched); sched && *sched && std::string_view(sched) != "0")
    config.context_switches = true;
  if (const char* method = std::getenv(recorder::kEnvSampleMethod); method && *method)
    config.sample_method = recorder::parse_sample_method(method);
  if (const char* compress = std::getenv(recorder::kEnvCompress);
      compress && *compress && std::string_view(compress) != "0")
    config.compress = true;
  const char* collector = std::getenv(recorder::kEnvCollector);
  config.output = collector && std::string_view(collector) == "external" ? std::string() : std::string(output);
  return true;
}

}  // namespace chronicle
