// The environment's conventions the tools share with the runtime: the variables' values as they
// are written (sizes, intervals, signals, sample rates), this process's name, and the claim on an
// output directory several processes share. A library of its own below the runtime, so that a
// tool linking it (`record` checks a size before it starts the program) never links the
// auto-start path (recorder/environment.cpp).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <stdexcept>

#include "format/output_file.hpp"
#include "settings/settings.hpp"

namespace chronicle::recorder {

size_t parse_size(std::string_view text) {
  if (text.empty()) throw std::invalid_argument("empty size");
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) throw std::invalid_argument(fmt::format("size '{}' does not start with a number", text));
  const unsigned long long number = std::stoull(std::string(text.substr(0, digits)));
  std::string_view unit = text.substr(digits);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.remove_suffix(1);
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.remove_suffix(1);
  unsigned shift = 0;
  if (unit.empty())
    shift = 0;
  else if (unit == "K" || unit == "k")
    shift = 10;
  else if (unit == "M" || unit == "m")
    shift = 20;
  else if (unit == "G" || unit == "g")
    shift = 30;
  else
    throw std::invalid_argument(fmt::format("size '{}' has an unknown unit (use K, M or G)", text));
  if (number > (~0ULL >> shift)) throw std::invalid_argument(fmt::format("size '{}' is too large", text));
  return static_cast<size_t>(number << shift);
}

std::string no_memory_for_rings(const std::string& shm_dir, uint64_t ring_bytes) {
  return fmt::format(
      "no memory for a {} KiB ring in {} (full, or too small): threads without a ring are not traced, their events "
      "are counted as lost (no_channel); free some, or a smaller --buffer-size / CHRONICLE_BUFFER_SIZE",
      ring_bytes >> 10, shm_dir);
}

std::string ring_geometry_problem(size_t buffer_size, size_t packet_size) {
  if (packet_size < 1024 || packet_size % 8 != 0 || packet_size > (size_t{1} << 30))
    return fmt::format("packet size {} must be a multiple of 8 between 1 KiB and 1 GiB", packet_size);
  if (buffer_size / 2 < packet_size)
    return fmt::format("buffer size {} must hold at least two packets of {} bytes", buffer_size, packet_size);
  return {};
}

std::string read_process_name() {
  char name[64] = {};
  int fd = ::open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = ::read(fd, name, sizeof name - 1);
    ::close(fd);
    if (n > 0 && name[n - 1] == '\n') name[n - 1] = '\0';
  }
  std::string comm = name;
  constexpr size_t kCommLength = 15;  // TASK_COMM_LEN - 1: what the kernel keeps
  if (comm.size() != kCommLength) return comm;
  char path[4096];
  const ssize_t length = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (length <= 0) return comm;
  std::string_view executable(path, static_cast<size_t>(length));
  if (executable.ends_with(" (deleted)")) executable.remove_suffix(10);
  const size_t slash = executable.rfind('/');
  const std::string_view file = slash == std::string_view::npos ? executable : executable.substr(slash + 1);
  return file.starts_with(comm) ? std::string(file.substr(0, 63)) : comm;
}

std::string claim_output_directory(const std::string& output, std::string_view process_name, int pid) {
  try {
    format::create_private_directory(output);
  } catch (const std::exception&) {
    // Nothing is claimed where the directory could not be made or is a link not to follow (the
    // marker would land in the link's target); the collector says why it cannot write there.
    return output;
  }
  // O_EXCL makes the claim atomic between processes started together.
  const std::string marker = output + "/.chronicle-owner";
  int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) {
    const std::string text = fmt::format("{}\n", pid);
    (void)!::write(fd, text.data(), text.size());
    ::close(fd);
    return output;
  }
  return fmt::format("{}/{}-{}", output, process_name, pid);
}

int parse_snapshot_signal(std::string_view text) {
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

long parse_interval_ms(std::string_view variable, std::string_view text) {
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

unsigned parse_sample_frequency(std::string_view text) {
  unsigned value = 0;
  bool valid = !text.empty() && text.size() <= 6;
  for (char c : text) valid = valid && c >= '0' && c <= '9', value = value * 10 + static_cast<unsigned>(c - '0');
  if (!valid || value > kMaxSampleFrequency)
    throw std::invalid_argument(
        fmt::format("{}='{}': expected samples per second, 0 to {} (e.g. 999)", kEnvSample, text, kMaxSampleFrequency));
  return value;
}

SampleMethod parse_sample_method(std::string_view text) {
  if (text == "auto") return SampleMethod::automatic;
  if (text == "perf") return SampleMethod::perf;
  if (text == "timer") return SampleMethod::timer;
  throw std::invalid_argument(fmt::format("{}='{}': expected auto, perf or timer", kEnvSampleMethod, text));
}

}  // namespace chronicle::recorder
