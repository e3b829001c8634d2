// What index_cache.cpp (the index file) and index_open.cpp (where it is kept, how it is opened)
// both read of a trace's files.
#pragma once

#include <sys/stat.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "reader/trace_directory.hpp"

namespace chronicle::viewer::index_files {

inline std::string system_error(const std::string& what) {
  return fmt::format("{}: {}", what, std::strerror(errno));
}

// Each file of a trace directory that is part of the trace (not a dot-file such as the index
// itself), with what stat says of it; a rotated trace's files are in its chunks ("chunk-000002/thread-7").
template <class Each>
void for_each_trace_file(const std::string& directory, Each each) {
  std::error_code error;
  for (const std::string& chunk : reader::trace_chunks(directory)) {
    const std::string prefix =
        chunk == directory ? std::string() : std::filesystem::path(chunk).filename().string() + "/";
    for (const auto& entry : std::filesystem::directory_iterator(chunk, error)) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with(".") || !entry.is_regular_file(error)) continue;
      struct stat info {};
      if (stat(entry.path().c_str(), &info) == 0) each(prefix + name, info);
    }
  }
}

}  // namespace chronicle::viewer::index_files
