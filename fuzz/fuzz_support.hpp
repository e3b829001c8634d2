// What the fuzz targets share: a scratch trace directory on tmpfs whose files the input replaces.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "format/metadata.hpp"

namespace chronicle::fuzz {

inline std::string scratch_directory() {
  static const std::string path = [] {
    const std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string directory = base + "/chronicle-fuzz-" + std::to_string(getpid());
    std::filesystem::create_directories(directory);
    return directory;
  }();
  return path;
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
