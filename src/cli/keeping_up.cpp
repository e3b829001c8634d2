#include "cli/keeping_up.hpp"

#include <time.h>

#include <fmt/format.h>

#include "format/clock.hpp"

namespace chronicle::cli {
namespace {

// Past this share of one core, record's own work is what held the rings up; below it, record
// was not given the CPU it asked for.
constexpr double kBusyShare = 0.85;

}  // namespace

KeepingUp::KeepingUp(bool compress)
    : compress_(compress),
      last_when_(std::chrono::steady_clock::now()),
      last_cpu_ns_(recorder::read_clock_ns(CLOCK_PROCESS_CPUTIME_ID)) {}

std::string KeepingUp::update(uint64_t discarded) {
  const auto now = std::chrono::steady_clock::now();
  const uint64_t cpu_ns = recorder::read_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
  const double seconds = std::chrono::duration<double>(now - last_when_).count();
  const double share = seconds > 0 ? static_cast<double>(cpu_ns - last_cpu_ns_) / 1e9 / seconds : 0;
  const uint64_t lost = discarded - std::min(discarded, last_discarded_);
  last_when_ = now;
  last_cpu_ns_ = cpu_ns;
  last_discarded_ = discarded;
  if (lost == 0) return {};
  const std::string why =
      share >= kBusyShare
          ? fmt::format("record used {:.0f}% of a core: {} the program's events takes more than a core", 100 * share,
                        compress_ ? "copying and compressing" : "copying")
          : fmt::format("record got {:.0f}% of a core: the machine is busy and did not run it in time", 100 * share);
  std::string text = fmt::format(
      "falling behind: {} events lost in {:.2f} s; {} (a larger --buffer-size rides out bursts)", lost, seconds, why);
  if (lost > worst_lost_) {
    worst_lost_ = lost;
    worst_ = text;
  }
  return text;
}

}  // namespace chronicle::cli
