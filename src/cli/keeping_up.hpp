// Whether `chronicle record` keeps up with the program it records, and why not when it does not:
// judged a few times a second from the events the rings lost meanwhile and the CPU record itself
// took (issue 44: under a busy machine's load, `record --compress` lost events while the docs
// said it keeps up; the user saw a count and no reason).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace chronicle::cli {

class KeepingUp {
 public:
  explicit KeepingUp(bool compress);
  // The discards of every session so far. Returns "" when nothing was lost since the last call,
  // else what the progress line says: how much was lost and why.
  std::string update(uint64_t discarded);
  // The interval that lost most, described as update() did ("" when none lost any).
  const std::string& worst() const { return worst_; }

 private:
  bool compress_;
  std::chrono::steady_clock::time_point last_when_;
  uint64_t last_cpu_ns_;
  uint64_t last_discarded_ = 0;
  uint64_t worst_lost_ = 0;
  std::string worst_;
};

}  // namespace chronicle::cli
