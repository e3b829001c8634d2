#include "shm/shm_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace chronicle::shm {

bool reserve(int fd, uint64_t offset, uint64_t length) {
  return posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(length)) == 0;
}

bool create_writer_file(const std::string& path, size_t size, std::initializer_list<Range> reserved, WriterFile& out,
                        std::string& error, int* error_number) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (error_number) *error_number = errno;
    error = fmt::format("cannot create {}: {}", path, std::strerror(errno));
    return false;
  }
  auto give_up = [&](std::string reason, int failure = errno) {
    if (error_number) *error_number = failure;
    ::close(fd);
    ::unlink(path.c_str());
    error = std::move(reason);
    return false;
  };
  if (ftruncate(fd, static_cast<off_t>(size)) != 0)
    return give_up(fmt::format("cannot size {} to {} bytes: {}", path, size, std::strerror(errno)));
  for (const Range& range : reserved) {
    if (int failed = posix_fallocate(fd, static_cast<off_t>(range.offset), static_cast<off_t>(range.length));
        failed != 0)
      return give_up(fmt::format("no room for {} ({} bytes reserved at offset {}): {}", path, range.length,
                                 range.offset, std::strerror(failed)),
                     failed);
  }
  void* mapped = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED) return give_up(fmt::format("cannot map {}: {}", path, std::strerror(errno)));
  flock(fd, LOCK_SH);
  out.path = path;
  out.fd = fd;
  out.base = static_cast<uint8_t*>(mapped);
  out.size = size;
  return true;
}

void release(WriterFile& file, bool unmap) {
  if (file.fd >= 0) {
    flock(file.fd, LOCK_UN);
    ::close(file.fd);
    file.fd = -1;
  }
  if (unmap && file.base) {
    munmap(file.base, file.size);
    file.base = nullptr;
  }
}

void forget_in_forked_child(WriterFile& file) {
  if (file.fd >= 0) ::close(file.fd);
  file.fd = -1;
  if (file.base) munmap(file.base, file.size);
  file.base = nullptr;
}

void* map_again_without_locks(const WriterFile& file, size_t bytes) {
  if (file.fd < 0) return nullptr;
  // Opening the descriptor's /proc link makes a new open file description of the same file. No
  // allocation: this runs in a forked child, where another thread's malloc lock may be held.
  char link[32] = "/proc/self/fd/";
  const size_t prefix = std::strlen(link);
  const auto written = std::to_chars(link + prefix, link + sizeof link - 1, file.fd);
  if (written.ec != std::errc()) return nullptr;
  *written.ptr = '\0';
  const int fd = ::open(link, O_RDWR | O_CLOEXEC);
  if (fd < 0) return nullptr;
  void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  return mapped == MAP_FAILED ? nullptr : mapped;
}

namespace {

bool lock_word(int fd, uint64_t offset, short type) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = static_cast<off_t>(offset);
  lock.l_len = 4;
  return fd >= 0 && fcntl(fd, F_OFD_SETLK, &lock) == 0;
}

}  // namespace

bool take_role(int fd, uint64_t word_offset) {
  return lock_word(fd, word_offset, F_WRLCK);
}

void give_up_role(int fd, uint64_t word_offset) {
  lock_word(fd, word_offset, F_UNLCK);
}

bool writer_alive(int fd) {
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
    flock(fd, LOCK_UN);
    return false;
  }
  return true;
}

std::optional<int> mapping_writer_pid(std::string_view name) {
  if (!name.ends_with(".shm")) return std::nullopt;
  for (std::string_view prefix : {"chronicle-metrics-", "chronicle-"}) {
    if (!name.starts_with(prefix)) continue;
    const std::string_view rest = name.substr(prefix.size());
    int pid = 0;
    const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (error != std::errc() || pid <= 0 || (*end != '-' && *end != '.')) return std::nullopt;
    return pid;
  }
  return std::nullopt;
}

}  // namespace chronicle::shm
