#include "shm/trace_source.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "format/output_file.hpp"
#include "shm/mapping_check.hpp"
#include "shm/shm_file.hpp"

namespace chronicle::shm {
namespace {

constexpr std::string_view kFirstLine = "chronicle trace source 1\n";
// A path and the line around it: anything longer is not a file a collector wrote.
constexpr size_t kMaxSourceBytes = 8192;

std::string source_path(const std::string& trace_dir) {
  return trace_dir + "/" + std::string(kTraceSourceName);
}

// The mapping path the source file names, and the file's owner; nullopt when there is no file
// or it is not one a collector wrote.
std::optional<std::string> read_mapping_path(const std::string& trace_dir, uid_t& owner) {
  const int fd = ::open(source_path(trace_dir).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat info {};
  std::array<char, kMaxSourceBytes> text{};
  ssize_t size = -1;
  if (fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && static_cast<size_t>(info.st_size) < text.size())
    size = ::read(fd, text.data(), text.size());
  ::close(fd);
  if (size <= 0) return std::nullopt;
  owner = info.st_uid;
  const std::string_view content(text.data(), static_cast<size_t>(size));
  if (!content.starts_with(kFirstLine) || !content.ends_with('\n')) return std::nullopt;
  std::string path(content.substr(kFirstLine.size(), content.size() - kFirstLine.size() - 1));
  if (path.empty() || path.find('\n') != std::string::npos || path.front() != '/') return std::nullopt;
  return path;
}

}  // namespace

void write_trace_source(const std::string& trace_dir, const std::string& mapping_path) {
  const std::string text =
      std::string(kFirstLine) + std::filesystem::absolute(mapping_path).lexically_normal().string() + "\n";
  // New and whole (a reader never sees half a name), never through a link, 0600.
  format::write_private_file(source_path(trace_dir), text, format::WhenExists::refuse);
}

void remove_trace_source(const std::string& trace_dir) {
  ::unlink(source_path(trace_dir).c_str());
}

std::optional<CutTrace> find_cut(const std::string& trace_dir) {
  uid_t owner = 0;
  const std::optional<std::string> mapping = read_mapping_path(trace_dir, owner);
  if (!mapping) return std::nullopt;
  CutTrace cut{*mapping, false};
  struct stat info {};
  if (::lstat(mapping->c_str(), &info) != 0) return errno == ENOENT ? std::optional(cut) : std::nullopt;
  uint64_t size = 0;
  int fd = -1;
  try {
    fd = open_mapping_file(*mapping, O_RDONLY, owner, size);
  } catch (const std::runtime_error&) {
    return std::nullopt;  // not the writer's file (or unreadable): it tells nothing
  }
  // The lock, not the pid: a pid is reused, the lock goes with the last process that held it.
  const bool alive = writer_alive(fd);
  ::close(fd);
  if (alive) return std::nullopt;
  cut.mapping_left = true;
  return cut;
}

std::string describe_cut(const std::string& trace_dir, const CutTrace& cut) {
  if (!cut.mapping_left)
    return fmt::format(
        "{} was cut: its writer died before finishing it, and its mapping {} is gone: the events it held are lost",
        trace_dir, cut.mapping_path);
  return fmt::format(
      "{} was cut: its writer died before finishing it; `chronicle recover {}` appends what its mapping {} still "
      "holds",
      trace_dir, trace_dir, cut.mapping_path);
}

}  // namespace chronicle::shm
