// What the fuzz targets share: a scratch trace directory on tmpfs whose files the input replaces.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "format/metadata.hpp"

namespace chronicle::fuzz {

// This process's scratch directory, removed when it exits. The path is never destroyed: the
// removal runs at exit, after static objects made later than its registration are gone.
inline std::string scratch_directory() {
  static const std::string* const path = [] {
    const std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    auto* directory = new std::string(base + "/chronicle-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(*directory);
    return directory;
  }();
  static const bool removed_at_exit = [] {
    return std::atexit([] {
             std::error_code ignored;
             std::filesystem::remove_all(*path, ignored);
           }) == 0;
  }();
  (void)removed_at_exit;
  return *path;
}

inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) std::abort();
  if (size) std::fwrite(data, 1, size, file);
  std::fclose(file);
}

// A sound metadata file for streams made with this uuid (all zero but the first byte).
inline std::string sound_metadata() {
  format::TraceDescription trace;
  trace.uuid[0] = 1;
  trace.clock = {1'000'000'000, 0, 0, 1'700'000'000'000'000'000, 0, 0};
  trace.pid = 1;
  trace.process_name = "fuzz";
  trace.hostname = "fuzz";
  return format::make_metadata(trace);
}

}  // namespace chronicle::fuzz
