#include "recorder/environment.hpp"

#include <fmt/format.h>
#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

#include "chronicle/config.hpp"

namespace chronicle {

int recorder::parse_snapshot_signal(std::string_view text) {
  if (text.starts_with("SIG")) text.remove_prefix(3);
  if (text == "1" || text == "USR2") return SIGUSR2;
  if (text == "USR1") return SIGUSR1;
  int number = 0;
  for (char c : text) {
    if (c < '0' || c > '9' || number > SIGRTMAX) {
      number = 0;
      break;
    }
    number = number * 10 + (c - '0');
  }
  // The signals a program may take for itself: not those it cannot catch, nor the fatal ones.
  const bool usable = number == SIGHUP || number == SIGUSR1 || number == SIGUSR2 || number == SIGWINCH ||
                      (number >= SIGRTMIN && number <= SIGRTMAX);
  if (!usable)
    throw std::invalid_argument(
        fmt::format("{}='{}': expected 1, USR1, USR2 or a signal number (HUP, WINCH, "
                    "real-time)",
                    kEnvSnapshotSignal, text));
  return number;
}

long recorder::parse_interval_ms(std::string_view variable, std::string_view text) {
  long scale = 1;
  std::string_view digits = text;
  if (digits.ends_with("ms")) {
    digits.remove_suffix(2);
  } else if (digits.ends_with("s")) {
    digits.remove_suffix(1);
    scale = 1000;
  }
  long value = 0;
  bool valid = !digits.empty() && digits.size() <= 9;
  for (char c : digits) valid = valid && c >= '0' && c <= '9', value = value * 10 + (c - '0');
  if (!valid)
    throw std::invalid_argument(
        fmt::format("{}='{}': expected milliseconds or a duration such as 250ms or 2s (0: never)", variable, text));
  return value * scale;
}

unsigned recorder::parse_sample_frequency(std::string_view text) {
  unsigned value = 0;
  bool valid = !text.empty() && text.size() <= 6;
  for (char c : text) valid = valid && c >= '0' && c <= '9', value = value * 10 + static_cast<unsigned>(c - '0');
  if (!valid || value > kMaxSampleFrequency)
    throw std::invalid_argument(
        fmt::format("{}='{}': expected samples per second, 0 to {} (e.g. 999)", kEnvSample, text, kMaxSampleFrequency));
  return value;
}

SampleMethod recorder::parse_sample_method(std::string_view text) {
  if (text == "auto") return SampleMethod::automatic;
  if (text == "perf") return SampleMethod::perf;
  if (text == "timer") return SampleMethod::timer;
  throw std::invalid_argument(fmt::format("{}='{}': expected auto, perf or timer", kEnvSampleMethod, text));
}

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
