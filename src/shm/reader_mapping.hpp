// A mapping file another process wrote, as a reader opens and maps it: the one way for every
// mapping a tool reads (a session's rings, a process's metrics), with one rule for what is
// refused before any of it is read.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chronicle::shm {

class ReaderMapping {
 public:
  // Opens `path` with open_mapping_file (a regular file, of `owner` when given: MappingRefused
  // otherwise), refuses a file smaller than `header_size` (format::InputError: "PATH: file is N
  // bytes, too small for a chronicle KIND (offset 0)") and maps it whole, shared, read-write when
  // `writable`. std::runtime_error when it cannot be opened or mapped.
  ReaderMapping(const std::string& path, bool writable, std::optional<uid_t> owner, uint64_t header_size,
                std::string_view kind);
  // Memory this process already has mapped, named `path` in messages: not owned, no file.
  ReaderMapping(uint8_t* base, size_t size, std::string path);
  ~ReaderMapping();
  ReaderMapping(const ReaderMapping&) = delete;
  ReaderMapping& operator=(const ReaderMapping&) = delete;

  uint8_t* base() const { return base_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // The open file, for the roles' locks (take_role); -1 for memory this process mapped itself.
  int fd() const { return fd_; }
  // True while the writing process holds its lock on the file (shm_file.hpp); always true for
  // memory of this process.
  bool writer_alive() const;

 private:
  std::string path_;
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
};

// Where a reader finds the mappings of a process, one rule for sessions and metrics: a writer makes
// STEM.shm or, when a name is taken, one with a random part (STEM-*.shm); the files of either
// name in `places` (each directory once), STEM.shm first, the others newest first. Sessions: STEM chronicle-PID (their
// files are chronicle-PID-N.shm); metrics: chronicle-metrics-PID.
std::vector<std::string> find_mapping_files(const std::vector<std::string>& places, std::string_view stem);

}  // namespace chronicle::shm
