#pragma once

#include <string>
#include <vector>

namespace chronicle::reader {

// The traces under `directory`: itself if it holds a metadata file, then each subdirectory
// that does (one per further process of a `chronicle record` run), sorted. Throws TraceError
// when there is none.
std::vector<std::string> find_traces(const std::string& directory);

}  // namespace chronicle::reader
