#include "reader/trace_directory.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>

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
        number > 0 && entry.is_directory(error) && has_metadata(entry.path()))
      chunks[number] = entry.path().string();
  return chunks;
}

bool is_trace(const std::string& directory) {
  return has_metadata(directory) || !chunks_of(directory).empty();
}

}  // namespace

uint64_t chunk_number(std::string_view name) {
  constexpr std::string_view kPrefix = "chunk-";
  if (!name.starts_with(kPrefix) || name.size() == kPrefix.size()) return 0;
  const std::string_view digits = name.substr(kPrefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return 0;
  uint64_t number = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
  return error == std::errc() && end == digits.data() + digits.size() ? number : 0;
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
  for (const auto& entry : fs::directory_iterator(directory, error))
    if (entry.is_directory(error) && chunk_number(entry.path().filename().string()) == 0 &&
        is_trace(entry.path().string()))
      children.push_back(entry.path().string());
  std::sort(children.begin(), children.end());
  traces.insert(traces.end(), children.begin(), children.end());
  if (traces.empty()) throw TraceError(directory, 0, "no trace here (no metadata file in it or its subdirectories)");
  return traces;
}

}  // namespace chronicle::reader
