#include "collector/recovery.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include "compression/ctfz.hpp"
#include "format/input_error.hpp"
#include "shm/mapping_check.hpp"
#include "shm/shm_file.hpp"
#include "shm/trace_source.hpp"

namespace chronicle::collector {
namespace {

namespace fs = std::filesystem;

// An exclusive lock on the mapping's file for as long as it lives: no writer holds it (a
// writer's shared lock would refuse it), and no other `recover` or `--clean` works on it now.
class ExclusiveMappingLock {
 public:
  explicit ExclusiveMappingLock(const std::string& path) {
    uint64_t size = 0;
    fd_ = shm::open_mapping_file(path, O_RDONLY, ::geteuid(), size);
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~ExclusiveMappingLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  ExclusiveMappingLock(const ExclusiveMappingLock&) = delete;
  ExclusiveMappingLock& operator=(const ExclusiveMappingLock&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

bool is_compressed(const std::string& trace_dir) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(trace_dir, error))
    if (compression::has_compressed_name(entry.path().string())) return true;
  return false;
}

// The room the dead collector set aside for its last files (Collector::reserve_room), which it
// did not live to give back.
void remove_dead_reserve(const std::string& trace_dir) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(trace_dir, error))
    if (entry.path().filename().string().starts_with(".reserve.") && entry.is_regular_file(error))
      fs::remove(entry.path(), error);
}

}  // namespace

Recovery recover_trace(const std::string& trace_dir) {
  const std::optional<shm::CutTrace> cut = shm::find_cut(trace_dir);
  if (!cut)
    throw format::InputError(fmt::format(
        "{}: not a cut trace (it names no mapping whose writer died: finished, written by `chronicle record`, or "
        "still being written)",
        trace_dir));
  if (!cut->mapping_left) throw format::InputError(shm::describe_cut(trace_dir, *cut));
  const ExclusiveMappingLock lock(cut->mapping_path);
  if (!lock.held())
    throw format::InputError(
        fmt::format("{}: its mapping {} is in use by another process (a writer, or another recover)", trace_dir,
                    cut->mapping_path));
  Recovery recovery{cut->mapping_path, {}};
  {
    SessionMapping mapping(cut->mapping_path, ::geteuid());
    CollectorOptions options;
    options.append = true;
    options.compress = is_compressed(trace_dir);
    Collector collector(mapping, trace_dir, options);
    collector.start_after_consumed();
    collector.finish();
    recovery.appended = collector.stats();
    if (!recovery.appended.files_unwritten.empty())
      throw std::runtime_error(fmt::format("{}: not recovered whole ({}); the mapping {} is kept", trace_dir,
                                           recovery.appended.files_unwritten.front(), cut->mapping_path));
  }
  shm::remove_trace_source(trace_dir);
  ::unlink(cut->mapping_path.c_str());
  remove_dead_reserve(trace_dir);
  return recovery;
}

std::vector<LeftoverMapping> leftover_mappings(const std::vector<std::string>& directories) {
  std::vector<LeftoverMapping> found;
  std::set<fs::path> seen;
  for (const std::string& directory : directories) {
    std::error_code error;
    if (!seen.insert(fs::weakly_canonical(directory, error)).second) continue;
    for (const auto& entry : fs::directory_iterator(directory, error)) {
      const std::optional<int> pid = shm::mapping_writer_pid(entry.path().filename().string());
      if (!pid) continue;
      uint64_t size = 0;
      int fd = -1;
      try {
        fd = shm::open_mapping_file(entry.path().string(), O_RDONLY, ::geteuid(), size);
      } catch (const std::runtime_error&) {
        continue;  // another user's, or not a file: not ours to list
      }
      struct stat info {};
      const bool dead = !shm::writer_alive(fd) && ::fstat(fd, &info) == 0;
      ::close(fd);
      if (dead) found.push_back({entry.path().string(), *pid, static_cast<uint64_t>(info.st_blocks) * 512});
    }
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return found;
}

bool remove_leftover_mapping(const std::string& path) {
  try {
    const ExclusiveMappingLock lock(path);
    if (!lock.held()) return false;
    return ::unlink(path.c_str()) == 0;
  } catch (const std::runtime_error&) {
    return false;
  }
}

}  // namespace chronicle::collector
