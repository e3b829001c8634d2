// Every file and directory a tool makes for its user comes from here, so that one rule holds
// for all of them (docs/guarantees.md, "Files the tools write"):
// - a file is written under a random hidden name beside its final one, created new (O_EXCL,
//   O_NOFOLLOW, mode 0600 whatever the umask: it holds what the trace holds), and renamed into
//   place when whole. A link planted at the final name is replaced, never written through, and a
//   name planted at the temporary one cannot be guessed in advance;
// - a directory is made with mode 0700; an existing one is used only when no link leads to it
//   that another user could have planted.
// The trace files themselves (collector, merge, convert) go into a directory made this way.
#pragma once

#include <string>
#include <string_view>

#include "format/input_error.hpp"

namespace chronicle::format {

// A place to write that is refused (a planted link, a directory others may write): exit 2.
class OutputRefused : public InputError {
 public:
  using InputError::InputError;
};

// What committing does when a file already has the final name.
enum class WhenExists {
  refuse,   // OutputRefused; checked atomically by the rename itself (RENAME_NOREPLACE)
  replace,  // renamed over it: a link there is replaced, its target untouched
};

// A new private file, written under a temporary name and given its final one by commit().
// Every failure throws std::runtime_error naming the file and the reason; a file never
// committed is removed.
class PrivateFile {
 public:
  PrivateFile(std::string path, WhenExists when_exists);
  ~PrivateFile();
  PrivateFile(const PrivateFile&) = delete;
  PrivateFile& operator=(const PrivateFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // For a writer that opens the file by its name (SQLite): the name it has until commit().
  const std::string& temporary_path() const { return temporary_; }

  void write(std::string_view bytes);
  // Closes the descriptor (a writer that opened the file by name writes through its own).
  void close();
  // Closes the file if open and renames it into place.
  void commit();

 private:
  std::string path_;
  std::string temporary_;
  WhenExists when_exists_;
  int fd_ = -1;
  bool committed_ = false;
};

// The whole of `bytes` as the file `path`, by PrivateFile.
void write_private_file(const std::string& path, std::string_view bytes, WhenExists when_exists);

// `bytes` as the output `path` of a tool: written in place when it is a device or a pipe
// (is_stream_target), else as a PrivateFile.
void write_output(const std::string& path, std::string_view bytes, WhenExists when_exists);

// Writes all of `bytes` to `fd` (the file `path`, named in the error thrown when it cannot).
void write_all(int fd, std::string_view bytes, const std::string& path);

// Whether `path` is where a stream goes that is written in place, not replaced: a character
// device or a FIFO (/dev/null, /dev/stdout, a pipe), reached through no link another user owns.
bool is_stream_target(const std::string& path);
// Opens such a target for writing (never creating or truncating a file); throws when it cannot.
int open_stream_target(const std::string& path);

// Why a symbolic link at `path` must not be followed to write there: it belongs to another user,
// or it lies in a directory others may write (where another user could have put it, sticky bit
// or not). Empty when `path` is no link, or is the caller's own in a directory of the caller's.
std::string planted_link_problem(const std::string& path);

// Makes `directory` with mode 0700 (its parents as create_directories does) unless it is an
// existing directory; throws OutputRefused when the name is a link planted_link_problem refuses,
// std::runtime_error when it cannot be made.
void create_private_directory(const std::string& directory);

}  // namespace chronicle::format
