#include "reader/trace_directory.hpp"

#include <algorithm>
#include <filesystem>

#include "reader/trace_reader.hpp"

namespace chronicle::reader {

std::vector<std::string> find_traces(const std::string& directory) {
  namespace fs = std::filesystem;
  std::vector<std::string> traces;
  std::error_code error;
  // Anything named metadata makes a trace, even a link that leads nowhere: opening the trace
  // then says what is wrong with it, rather than "no trace here".
  auto has_metadata = [&error](const fs::path& place) {
    return fs::exists(fs::symlink_status(place / "metadata", error));
  };
  if (has_metadata(directory)) traces.push_back(directory);
  std::vector<std::string> children;
  for (const auto& entry : fs::directory_iterator(directory, error))
    if (entry.is_directory(error) && has_metadata(entry.path())) children.push_back(entry.path().string());
  std::sort(children.begin(), children.end());
  traces.insert(traces.end(), children.begin(), children.end());
  if (traces.empty()) throw TraceError(directory, 0, "no trace here (no metadata file in it or its subdirectories)");
  return traces;
}

}  // namespace chronicle::reader
