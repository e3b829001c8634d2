#include "reader/trace_directory.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include "reader/trace_reader.hpp"

namespace chronicle::reader {

namespace fs = std::filesystem;

namespace {

// Anything named metadata makes a trace, even a link that leads nowhere: opening the trace then
// says what is wrong with it, rather than "no trace here".
bool has_metadata(const fs::path& place) {
  std::error_code error;
  return fs::exists(fs::symlink_status(place / "metadata", error)) ||
         fs::exists(fs::symlink_status(place / "metadata.ctfz", error));
}

std::map<uint64_t, std::string> chunks_of(const std::string& directory) {
  std::map<uint64_t, std::string> chunks;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error))
    if (const uint64_t number = chunk_number(entry.path().filename().string());
        number > 0 && !entry.is_symlink(error) && entry.is_directory(error) && has_metadata(entry.path()))
      chunks[number] = entry.path().string();
  return chunks;
}

bool is_trace(const std::string& directory) {
  return has_metadata(directory) || !chunks_of(directory).empty();
}

std::string file_kind(const struct stat& info) {
  if (S_ISDIR(info.st_mode)) return "a directory";
  if (S_ISFIFO(info.st_mode)) return "a FIFO";
  if (S_ISSOCK(info.st_mode)) return "a socket";
  if (S_ISCHR(info.st_mode) || S_ISBLK(info.st_mode)) return "a device";
  return fmt::format("mode {:o}", info.st_mode);
}

}  // namespace

ReadableFile::~ReadableFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadableFile::ReadableFile(ReadableFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), info_(other.info_), problem_(std::move(other.problem_)) {}

ReadableFile& ReadableFile::operator=(ReadableFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    info_ = other.info_;
    problem_ = std::move(other.problem_);
  }
  return *this;
}

ReadableFile open_readable_file(const std::string& path, std::optional<uid_t> owner) {
  ReadableFile file;
  const int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (owner ? O_NOFOLLOW : 0);
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    file.problem_ = owner && errno == ELOOP ? "a symbolic link: a trace is made of files, never read through a link"
                                            : fmt::format("cannot open: {}", std::strerror(errno));
    return file;
  }
  file.fd_ = fd;
  if (fstat(fd, &file.info_) != 0)
    file.problem_ = fmt::format("cannot stat: {}", std::strerror(errno));
  else if (!S_ISREG(file.info_.st_mode))
    file.problem_ = fmt::format("not a regular file ({}): a trace is made of files", file_kind(file.info_));
  else if (owner && file.info_.st_uid != *owner)
    file.problem_ = fmt::format("owned by uid {}, not by the trace's owner (uid {})", file.info_.st_uid, *owner);
  if (!file.problem_.empty()) ::close(std::exchange(file.fd_, -1));
  return file;
}

uid_t trace_owner(const std::string& directory) {
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0)
    throw TraceError(directory, 0, fmt::format("cannot stat: {}", std::strerror(errno)));
  return info.st_uid;
}

uint64_t chunk_number(std::string_view name) {
  constexpr std::string_view kPrefix = "chunk-";
  if (!name.starts_with(kPrefix) || name.size() == kPrefix.size()) return 0;
  const std::string_view digits = name.substr(kPrefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return 0;
  uint64_t number = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
  return error == std::errc() && end == digits.data() + digits.size() ? number : 0;
}

std::vector<std::string> linked_entries(const std::string& directory) {
  std::vector<std::string> links;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error))
    if (entry.is_symlink(error)) links.push_back(entry.path().string());
  std::sort(links.begin(), links.end());
  return links;
}

std::vector<std::string> trace_chunks(const std::string& directory) {
  if (has_metadata(directory)) return {directory};
  const std::map<uint64_t, std::string> chunks = chunks_of(directory);
  if (chunks.empty()) return {directory};
  std::vector<std::string> ordered;
  for (const auto& [number, path] : chunks) ordered.push_back(path);
  return ordered;
}

std::vector<std::string> find_traces(const std::string& directory) {
  std::vector<std::string> traces;
  std::error_code error;
  if (is_trace(directory)) traces.push_back(directory);
  std::vector<std::string> children;
  std::string linked;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    if (!entry.is_directory(error) || chunk_number(entry.path().filename().string()) != 0) continue;
    if (entry.is_symlink(error))
      linked = entry.path().string();
    else if (is_trace(entry.path().string()))
      children.push_back(entry.path().string());
  }
  std::sort(children.begin(), children.end());
  traces.insert(traces.end(), children.begin(), children.end());
  if (traces.empty() && !linked.empty()) throw TraceError(linked, 0, kLinkedDirectory);
  if (traces.empty()) throw TraceError(directory, 0, "no trace here (no metadata file in it or its subdirectories)");
  return traces;
}

}  // namespace chronicle::reader
