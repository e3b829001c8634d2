// Reading a mapping another process wrote (a trace session, a process's metrics): every size,
// offset and index in it is checked before use, with arithmetic that cannot wrap, against the
// file's real size. A field that fails names itself and its offset in the file, so that a tool
// answers a crafted or damaged mapping with exit code 2 and a message saying where it is wrong,
// rather than reading outside the file.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "format/input_error.hpp"

namespace chronicle::shm {

// A field of a mapping that cannot be right.
class MappingError : public format::InputError {
 public:
  MappingError(const std::string& message, std::string field, uint64_t offset)
      : format::InputError(message), field_(std::move(field)), offset_(offset) {}
  const std::string& field() const { return field_; }
  uint64_t offset() const { return offset_; }

 private:
  std::string field_;
  uint64_t offset_;
};

// The checks of one mapping file. Errors read "PATH: not a readable chronicle KIND: FIELD
// PROBLEM (offset N)".
class MappingCheck {
 public:
  MappingCheck(std::string path, std::string kind, uint64_t file_size)
      : path_(std::move(path)), kind_(std::move(kind)), file_size_(file_size) {}

  uint64_t file_size() const { return file_size_; }

  [[noreturn]] void fail(std::string_view field, uint64_t offset, std::string_view problem) const;

  // a * b; fails on `field` when the product does not fit 64 bits.
  uint64_t product(std::string_view field, uint64_t offset, uint64_t a, uint64_t b) const;

  // Fails on `field` unless lowest <= value <= highest.
  void within(std::string_view field, uint64_t offset, uint64_t value, uint64_t lowest, uint64_t highest) const;

  // The region [start, start + length) of the file, which must begin at `not_before` or later
  // and at a multiple of `alignment`. A start out of place fails on `start_field`; a length that
  // runs past the end of the file (or wraps around) on `length_field`. Returns the region's end.
  struct Field {
    std::string_view name;
    uint64_t offset;
  };
  uint64_t region(Field start_field, uint64_t start, Field length_field, uint64_t length, uint64_t not_before,
                  uint64_t alignment = 1) const;

 private:
  std::string path_;
  std::string kind_;
  uint64_t file_size_;
};

// Opens a mapping file another process wrote, for a reader. Refuses what is not a regular file
// (a FIFO would block, a directory or a device is no mapping) and, when `owner` is given, a file
// that user does not own: MappingRefused, which says why (a reader looking through candidates
// says so and tries the next). Returns the descriptor; `size` is the file's.
class MappingRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
int open_mapping_file(const std::string& path, int flags, std::optional<uid_t> owner, uint64_t& size);

// Who may have made the mappings of process `pid` that a reader finds by its pid: the user the
// process runs as (its effective uid, with which it creates files). A process that is not
// running has no user to ask: the caller's own files are the only ones it can trust then.
uid_t expected_mapping_owner(int pid);

}  // namespace chronicle::shm
