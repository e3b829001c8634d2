#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chronicle::reader {

// Why a link where a sub-trace or a chunk would be is skipped: like a trace's files, its
// directories are never reached through a link (one planted could lead to another user's trace).
inline constexpr const char* kLinkedDirectory =
    "a symbolic link: a trace's sub-traces and chunks are directories, never read through a link";

// The traces under `directory`: itself if it is one, then each subdirectory that is (one per
// further process of a `chronicle record` run), sorted; links are skipped (kLinkedDirectory), and
// when only links remain the first is named in the TraceError. A directory is a trace when it holds a
// metadata file (plain or compressed, "metadata.ctfz"), or chunks that do (a rotated trace:
// record --rotate). Throws TraceError when there is none.
std::vector<std::string> find_traces(const std::string& directory);

// The symbolic links directly in `directory`, sorted: a reader names them as skipped.
std::vector<std::string> linked_entries(const std::string& directory);

// A rotated trace's chunk directories ("chunk-000001"...) that hold a metadata file, oldest first;
// for any other directory, the directory itself.
std::vector<std::string> trace_chunks(const std::string& directory);

// A file opened for reading (closed with it), or why it was not opened.
class ReadableFile {
 public:
  ReadableFile() = default;
  ~ReadableFile();
  ReadableFile(ReadableFile&& other) noexcept;
  ReadableFile& operator=(ReadableFile&& other) noexcept;
  explicit operator bool() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  uint64_t size() const { return static_cast<uint64_t>(info_.st_size); }
  // Why it is not open: "not a regular file (a FIFO)", "a symbolic link", ...
  const std::string& problem() const { return problem_; }

 private:
  friend ReadableFile open_readable_file(const std::string& path, std::optional<uid_t> owner);
  int fd_ = -1;
  struct stat info_ {};
  std::string problem_;
};

// Opens `path` for reading if it is a regular file. With `owner` (a file of a trace: the trace
// directory's owner, trace_owner), also only if that user owns it and it is not a symbolic link
// (O_NOFOLLOW): a link or another user's file planted in a trace is never read through. O_NONBLOCK:
// a FIFO never makes the open wait. Every reader of a trace's files opens them here.
ReadableFile open_readable_file(const std::string& path, std::optional<uid_t> owner = std::nullopt);

// Whose the trace in `directory` is: the directory's owner.
uid_t trace_owner(const std::string& directory);

// The number of a chunk directory's name ("chunk-000012": 12), 0 for another name.
uint64_t chunk_number(std::string_view name);

}  // namespace chronicle::reader
