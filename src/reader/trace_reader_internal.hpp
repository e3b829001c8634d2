// Private to the trace reader's files (src/reader/trace_*.cpp): the mapped files and the
// listing they share.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compression/ctfz.hpp"
#include "reader/trace_directory.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::reader {

// A read-only mapping of a whole file.
class MappedFile {
 public:
  // At most `limit` bytes from the file's start, a file of the trace owned by `owner`
  // (open_readable_file: a regular file of the trace's owner, never through a link).
  // A file past `cap` bytes is refused before it is mapped.
  MappedFile(const std::string& path, uid_t owner, uint64_t limit = UINT64_MAX,
             const std::function<void(uint64_t)>& cap = nullptr)
      : path_(path) {
    const ReadableFile file = open_readable_file(path, owner);
    if (!file) throw TraceError(path, 0, file.problem());
    if (cap) cap(file.size());
    size_ = std::min(file.size(), limit);
    if (size_ > 0) {
      void* mapped = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
      if (mapped == MAP_FAILED) throw TraceError(path, 0, fmt::format("cannot map: {}", std::strerror(errno)));
      data_ = static_cast<const uint8_t*>(mapped);
      madvise(mapped, size_, MADV_SEQUENTIAL);
    }
  }
  ~MappedFile() {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
  }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // Lets go of the whole pages of [from, to): they leave the process's resident memory, and a
  // later read maps them again from the page cache or the file. Nothing else changes (the
  // mapping is private and never written), so any thread may call it for any range.
  void release(uint64_t from, uint64_t to) const {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t first = (from + page - 1) / page * page;
    const uint64_t end = std::min(to, size_) / page * page;
    if (end > first) madvise(const_cast<uint8_t*>(data_) + first, end - first, MADV_DONTNEED);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

namespace trace_internal {

template <typename T>
T load(const uint8_t* data) {
  T value;
  std::memcpy(&value, data, sizeof value);
  return value;
}

}  // namespace trace_internal

// One of a stream's files (a stream has one per chunk that has one, oldest first), and how many
// bytes of it may be read (UINT64_MAX: all).
struct Trace::ListedFile {
  std::string path;
  uint64_t limit = UINT64_MAX;
};

// A stream file as the reader maps it. A compressed one has its seek table.
struct Trace::StreamFile {
  std::unique_ptr<MappedFile> mapped;
  bool compressed = false;
  std::vector<compression::UnitPlace> units;

  std::span<const uint8_t> bytes() const { return {mapped->data(), mapped->size()}; }
  // Its size as a plain file.
  uint64_t decoded_size() const {
    if (!compressed) return mapped->size();
    return units.empty() ? 0 : units.back().raw_offset + units.back().entry.raw_size;
  }
};

}  // namespace chronicle::reader
