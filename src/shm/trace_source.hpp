// The mapping a trace is collected from. A program that collects its own trace
// (CHRONICLE_OUTPUT) writes, when its collector starts, a small file in the trace directory that
// names its session's mapping, and removes it once the trace is finished. A trace that still
// has the file while no process holds the mapping's writer lock (shm_file.hpp) was cut: its
// writer died (SIGKILL, OOM killer) before it finished, and the events its rings held are still
// in the mapping, for `chronicle recover` (collector/recovery.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace chronicle::shm {

inline constexpr std::string_view kTraceSourceName = ".chronicle-source";

// Writes TRACE_DIR/.chronicle-source naming `mapping_path` (made absolute): created new, 0600,
// never through a link. Throws std::runtime_error saying why it could not.
void write_trace_source(const std::string& trace_dir, const std::string& mapping_path);
// The trace is finished: the file goes.
void remove_trace_source(const std::string& trace_dir);

// A trace whose writer died before it finished.
struct CutTrace {
  std::string mapping_path;
  bool mapping_left = false;  // the mapping is still there (what it holds can be recovered)
};

// The cut, if `trace_dir` was cut: it names a mapping whose writer is gone (no process holds
// its lock) or that is gone itself. nullopt for a finished trace, one written by `record`, and
// one whose writer is still running. A source file that is not a regular file of the trace's
// owner, or that names a file of another user, is not believed (nullopt).
std::optional<CutTrace> find_cut(const std::string& trace_dir);

// "TRACE_DIR was cut: its writer died before finishing it; `chronicle recover TRACE_DIR` appends
// what its mapping MAPPING still holds" (or says that the mapping is gone).
std::string describe_cut(const std::string& trace_dir, const CutTrace& cut);

}  // namespace chronicle::shm
