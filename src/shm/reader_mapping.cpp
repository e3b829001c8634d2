#include "shm/reader_mapping.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <utility>

#include "format/input_error.hpp"
#include "shm/mapping_check.hpp"
#include "shm/shm_file.hpp"

namespace chronicle::shm {

ReaderMapping::ReaderMapping(const std::string& path, bool writable, std::optional<uid_t> owner, uint64_t header_size,
                             std::string_view kind)
    : path_(path) {
  uint64_t file_size = 0;
  fd_ = open_mapping_file(path, writable ? O_RDWR : O_RDONLY, owner, file_size);
  if (file_size < header_size) {
    ::close(fd_);
    throw format::InputError(
        fmt::format("{}: file is {} bytes, too small for a chronicle {} (offset 0)", path, file_size, kind));
  }
  size_ = static_cast<size_t>(file_size);
  void* mapped = mmap(nullptr, size_, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd_, 0);
  if (mapped == MAP_FAILED) {
    const int error = errno;
    ::close(fd_);
    throw std::runtime_error(fmt::format("cannot map {}: {}", path, std::strerror(error)));
  }
  base_ = static_cast<uint8_t*>(mapped);
}

ReaderMapping::ReaderMapping(uint8_t* base, size_t size, std::string path)
    : path_(std::move(path)), base_(base), size_(size) {}

ReaderMapping::~ReaderMapping() {
  if (fd_ < 0) return;
  munmap(base_, size_);
  ::close(fd_);
}

bool ReaderMapping::writer_alive() const {
  return fd_ < 0 || shm::writer_alive(fd_);
}

std::vector<std::string> find_mapping_files(const std::vector<std::string>& places, std::string_view stem) {
  namespace fs = std::filesystem;
  const std::string usual = fmt::format("{}.shm", stem);
  const std::string other_prefix = fmt::format("{}-", stem);
  struct Found {
    bool usual;  // first: a reader says why it refuses a file planted there before it reads another
    fs::file_time_type written;
    std::string path;
  };
  std::vector<Found> found;
  std::set<fs::path> seen;  // $CHRONICLE_SHM_DIR may be one of the others
  std::error_code error;
  for (const auto& place : places) {
    if (!seen.insert(fs::weakly_canonical(place, error)).second) continue;
    for (const auto& entry : fs::directory_iterator(place, error)) {
      const std::string name = entry.path().filename().string();
      if (name == usual || (name.starts_with(other_prefix) && entry.path().extension() == ".shm"))
        found.push_back({name == usual, entry.last_write_time(error), entry.path().string()});
    }
  }
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.usual != b.usual ? a.usual : a.written > b.written; });
  std::vector<std::string> paths;
  for (Found& file : found) paths.push_back(std::move(file.path));
  return paths;
}

}  // namespace chronicle::shm
