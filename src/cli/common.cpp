#include "cli/common.hpp"

#include <unistd.h>

#include <fmt/format.h>
#include <ctime>

#include "reader/trace_reader.hpp"

namespace chronicle::cli {

bool stderr_is_terminal() {
  return isatty(STDERR_FILENO) == 1;
}

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

std::string human_count(uint64_t count) {
  std::string digits = std::to_string(count);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string timestamp_for_path() {
  const time_t now = time(nullptr);
  std::tm parts{};
  localtime_r(&now, &parts);
  return fmt::format("{:04}{:02}{:02}-{:02}{:02}{:02}", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                     parts.tm_hour, parts.tm_min, parts.tm_sec);
}

void warn_about_damage(const reader::Trace& trace) {
  for (const reader::Damage& damage : trace.damage())
    fmt::print(stderr, "chronicle: warning: {}\n", reader::describe(damage));
}

}  // namespace chronicle::cli
