// A directory of its own in /dev/shm for a benchmark's flight sessions. A flight session without
// an output leaves its mapping in place when it stops, for `chronicle snapshot` (docs/control.md);
// a benchmark that starts one per repetition would leave gigabytes of them in /dev/shm, and the
// memory they hold skews the runs after them. Emptied after each session, removed at exit.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace chronicle_bench {

class ScratchShm {
 public:
  ScratchShm() {
    char name[] = "/dev/shm/chronicle-bench-XXXXXX";
    if (::mkdtemp(name)) path_ = name;
  }
  ~ScratchShm() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScratchShm(const ScratchShm&) = delete;
  ScratchShm& operator=(const ScratchShm&) = delete;

  // Empty when it could not be made: the sessions then use the default directory.
  const std::string& path() const { return path_; }
  // Removes the mappings that stopped sessions left.
  void empty() const {
    std::error_code ignored;
    if (path_.empty()) return;
    for (const auto& entry : std::filesystem::directory_iterator(path_, ignored))
      std::filesystem::remove(entry.path(), ignored);
  }

 private:
  std::string path_;
};

inline ScratchShm& scratch_shm() {
  static ScratchShm directory;
  return directory;
}

}  // namespace chronicle_bench
