// The parts of the environment's conventions the tools share with the runtime: sizes as
// CHRONICLE_BUFFER_SIZE writes them, this process's name, and the claim on an output directory
// several processes share. Apart from environment.cpp so that a tool linking them (`record`
// checks a size before it starts the program) never links the auto-start path.
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <stdexcept>

#include "collector/collector.hpp"
#include "recorder/environment.hpp"

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
  return name;
}

std::string claim_output_directory(const std::string& output, std::string_view process_name, int pid) {
  try {
    collector::create_private_directory(output);
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

}  // namespace chronicle::recorder
