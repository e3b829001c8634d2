#include "shm/mapping_check.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace chronicle::shm {

void MappingCheck::fail(std::string_view field, uint64_t offset, std::string_view problem) const {
  throw MappingError(
      fmt::format("{}: not a readable chronicle {}: {} {} (offset {})", path_, kind_, field, problem, offset),
      std::string(field), offset);
}

uint64_t MappingCheck::product(std::string_view field, uint64_t offset, uint64_t a, uint64_t b) const {
  uint64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result))
    fail(field, offset, fmt::format("makes a size of {} x {} bytes, more than 64 bits hold", a, b));
  return result;
}

void MappingCheck::within(std::string_view field, uint64_t offset, uint64_t value, uint64_t lowest,
                          uint64_t highest) const {
  if (value < lowest || value > highest)
    fail(field, offset, fmt::format("is {}, outside [{}, {}]", value, lowest, highest));
}

uint64_t MappingCheck::region(Field start_field, uint64_t start, Field length_field, uint64_t length,
                              uint64_t not_before, uint64_t alignment) const {
  if (start < not_before || start > file_size_)
    fail(start_field.name, start_field.offset,
         fmt::format("is {}, outside [{}, {}] (the file's size)", start, not_before, file_size_));
  if (start % alignment != 0)
    fail(start_field.name, start_field.offset, fmt::format("is {}, not a multiple of {}", start, alignment));
  uint64_t end = 0;
  if (__builtin_add_overflow(start, length, &end) || end > file_size_)
    fail(length_field.name, length_field.offset,
         fmt::format("gives a region of {} bytes at {}, past the end of the file ({} bytes)", length, start,
                     file_size_));
  return end;
}

namespace {

std::string user_name(uid_t uid) {
  passwd entry{};
  passwd* found = nullptr;
  char buffer[1024];
  if (getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) == 0 && found)
    return fmt::format("uid {} ({})", uid, found->pw_name);
  return fmt::format("uid {}", uid);
}

// The effective uid of a running process, from the "Uid:" line of /proc/PID/status (real,
// effective, saved, filesystem).
std::optional<uid_t> process_user(int pid) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(status, line)) {
    if (!line.starts_with("Uid:")) continue;
    std::istringstream fields(line.substr(4));
    uid_t real = 0, effective = 0;
    if (fields >> real >> effective) return effective;
  }
  return std::nullopt;
}

}  // namespace

uid_t expected_mapping_owner(int pid) {
  return process_user(pid).value_or(geteuid());
}

int open_mapping_file(const std::string& path, int flags, std::optional<uid_t> owner, uint64_t& size) {
  // O_NONBLOCK: opening a FIFO planted under a mapping's name must not wait for a writer. A file
  // found by name (an owner to check) is never a symbolic link: writers do not make them, and
  // the link's target would be checked in its place.
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (owner ? O_NOFOLLOW : 0));
  if (fd < 0 && (errno == ELOOP || errno == EISDIR))
    throw MappingRefused(fmt::format("refused {}: it is {}", path, errno == ELOOP ? "a symbolic link" : "a directory"));
  if (fd < 0) throw std::runtime_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    const int failure = errno;
    ::close(fd);
    throw std::runtime_error(fmt::format("cannot stat {}: {}", path, std::strerror(failure)));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    throw MappingRefused(fmt::format("refused {}: it is not a regular file", path));
  }
  if (owner && info.st_uid != *owner) {
    ::close(fd);
    throw MappingRefused(fmt::format(
        "refused {}: it is owned by {}, not by {}, whose process it should belong to (another user could have "
        "planted it)",
        path, user_name(info.st_uid), user_name(*owner)));
  }
  size = static_cast<uint64_t>(info.st_size);
  return fd;
}

}  // namespace chronicle::shm
