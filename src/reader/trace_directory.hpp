#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chronicle::reader {

// The traces under `directory`: itself if it is one, then each subdirectory that is (one per
// further process of a `chronicle record` run), sorted. A directory is a trace when it holds a
// metadata file (plain or compressed, "metadata.ctfz"), or chunks that do (a rotated trace:
// record --rotate). Throws TraceError when there is none.
std::vector<std::string> find_traces(const std::string& directory);

// A rotated trace's chunk directories ("chunk-000001"...) that hold a metadata file, oldest first;
// for any other directory, the directory itself.
std::vector<std::string> trace_chunks(const std::string& directory);

// The number of a chunk directory's name ("chunk-000012": 12), 0 for another name.
uint64_t chunk_number(std::string_view name);

}  // namespace chronicle::reader
