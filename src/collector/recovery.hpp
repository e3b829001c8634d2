// Traces whose writer died before finishing them (shm/trace_source.hpp), and the mappings such
// deaths leave behind: `chronicle recover`.
#pragma once

#include <string>
#include <vector>

#include "collector/collector.hpp"

namespace chronicle::collector {

struct Recovery {
  std::string mapping_path;
  CollectorStats appended;  // what the mapping still held, now in the trace
};

// Appends to the cut trace `trace_dir` what its mapping still holds: the packets its collector
// had not handed back, then every thread's open packet, as a collector finishing the trace
// would (Collector::finish, with CollectorOptions::append); then removes the mapping and the
// trace's source file. Throws format::InputError when `trace_dir` is not a cut trace whose
// mapping is still there, is compressed, or its mapping is in use by another process.
Recovery recover_trace(const std::string& trace_dir);

// A session or metrics mapping (chronicle-PID-....shm, chronicle-metrics-PID....shm) of this
// user that no process holds any more: its writer died without removing it.
struct LeftoverMapping {
  std::string path;
  int pid = 0;         // the writer's, from the name
  uint64_t bytes = 0;  // of memory it holds (not its apparent size)
};

// The leftover mappings in `directories` (each looked at once), oldest name first.
std::vector<LeftoverMapping> leftover_mappings(const std::vector<std::string>& directories);

// Removes a leftover mapping, unless a process took it meanwhile; false when it did not.
bool remove_leftover_mapping(const std::string& path);

}  // namespace chronicle::collector
