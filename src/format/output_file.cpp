#include "format/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace chronicle::format {
namespace {

namespace fs = std::filesystem;

std::string reason(const std::string& what, int error) {
  return fmt::format("{}: {}", what, std::strerror(error));
}

// `path` made absolute and without a trailing slash: lstat of "link/" would follow the link.
fs::path without_trailing_slash(const std::string& path) {
  std::error_code error;
  fs::path full = fs::absolute(path, error).lexically_normal();
  if (!full.has_filename() && full.has_parent_path()) full = full.parent_path();
  return full;
}

// rename(2) that fails with EEXIST instead of replacing a file (a link included) at `to`.
// RENAME_NOREPLACE checks and renames at once; where the file system lacks it, link(2) (which
// never replaces) then unlink of the temporary does the same.
int rename_no_replace(const char* from, const char* to) {
  if (::renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  if (::link(from, to) != 0) return errno;
  ::unlink(from);
  return 0;
}

}  // namespace

PrivateFile::PrivateFile(std::string path, WhenExists when_exists) : path_(std::move(path)), when_exists_(when_exists) {
  const fs::path target(path_);
  const std::string name = target.filename().string();
  if (name.empty() || name == "." || name == "..")
    throw std::runtime_error(fmt::format("cannot create {}: not a file name", path_));
  temporary_ = (target.parent_path() / ("." + name + ".XXXXXX")).string();
  // mkostemp: O_CREAT|O_EXCL (a link at the name fails rather than being followed), mode 0600.
  fd_ = ::mkostemp(temporary_.data(), O_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error(reason("cannot create a file beside " + path_, errno));
}

PrivateFile::~PrivateFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temporary_.c_str());
}

void PrivateFile::write(std::string_view bytes) {
  write_all(fd_, bytes, path_);
}

void PrivateFile::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw std::runtime_error(reason("cannot write " + path_, errno));
}

void PrivateFile::commit() {
  close();
  if (when_exists_ == WhenExists::replace) {
    if (::rename(temporary_.c_str(), path_.c_str()) != 0)
      throw std::runtime_error(reason("cannot rename " + temporary_ + " to " + path_, errno));
  } else if (const int failure = rename_no_replace(temporary_.c_str(), path_.c_str()); failure == EEXIST) {
    throw OutputRefused(fmt::format("{} exists: it is not replaced", path_));
  } else if (failure != 0) {
    throw std::runtime_error(reason("cannot rename " + temporary_ + " to " + path_, failure));
  }
  committed_ = true;
}

void write_private_file(const std::string& path, std::string_view bytes, WhenExists when_exists) {
  PrivateFile file(path, when_exists);
  file.write(bytes);
  file.commit();
}

void write_output(const std::string& path, std::string_view bytes, WhenExists when_exists) {
  if (!is_stream_target(path)) return write_private_file(path, bytes, when_exists);
  const int fd = open_stream_target(path);
  try {
    write_all(fd, bytes, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) throw std::runtime_error(reason("cannot write " + path, errno));
}

void write_all(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) throw std::runtime_error(reason("cannot write " + path, written < 0 ? errno : ENOSPC));
    bytes.remove_prefix(static_cast<size_t>(written));
  }
}

bool is_stream_target(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return false;
  if (S_ISLNK(info.st_mode) && info.st_uid != ::geteuid() && info.st_uid != 0) return false;
  if (::stat(path.c_str(), &info) != 0) return false;
  return S_ISCHR(info.st_mode) || S_ISFIFO(info.st_mode);
}

int open_stream_target(const std::string& path) {
  if (!is_stream_target(path)) throw OutputRefused(fmt::format("{} is not a device or a pipe", path));
  const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(reason("cannot open " + path, errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !(S_ISCHR(info.st_mode) || S_ISFIFO(info.st_mode))) {
    ::close(fd);
    throw OutputRefused(fmt::format("{} is not a device or a pipe", path));
  }
  return fd;
}

std::string planted_link_problem(const std::string& path) {
  const fs::path full = without_trailing_slash(path);
  struct stat info {};
  if (::lstat(full.c_str(), &info) != 0 || !S_ISLNK(info.st_mode)) return {};
  if (info.st_uid != ::geteuid())
    return fmt::format("{} is a symbolic link of another user (uid {}): it is not followed", path, info.st_uid);
  const fs::path parent = full.parent_path();
  if (::stat(parent.c_str(), &info) == 0 && (info.st_mode & (S_IWGRP | S_IWOTH)))
    return fmt::format("{} is a symbolic link in {}, which other users may write (mode {:o}): it is not followed", path,
                       parent.string(), info.st_mode & 07777);
  return {};
}

void create_private_directory(const std::string& directory) {
  const fs::path path(directory);
  std::error_code error;
  if (path.has_parent_path() && !path.parent_path().empty()) fs::create_directories(path.parent_path(), error);
  if (::mkdir(directory.c_str(), 0700) == 0) return;
  const int failure = errno;
  // Checked after mkdir failed: a link planted between a check and the mkdir is seen here.
  if (std::string problem = planted_link_problem(directory); !problem.empty()) throw OutputRefused(problem);
  struct stat info {};
  if (failure == EEXIST && ::stat(directory.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) return;
  throw std::runtime_error(reason("cannot create " + directory, failure));
}

}  // namespace chronicle::format
