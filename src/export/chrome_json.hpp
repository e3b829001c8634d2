// Chrome Trace Event JSON (the format chrome://tracing and the Perfetto UI load): thread spans
// as complete events, tasks as async events with their runs on the threads, creation, wait and
// resolution arrows as flow events, counters, instants, notes, event-loop idle time, and the
// names of processes and threads.
#pragma once

#include <string>
#include <vector>

#include "export/export_common.hpp"

namespace chronicle::exports {

// Writes the traces (one record run: one process each) to `path`, events as they are read.
// Timestamps are microseconds since the earliest event of all the traces (its unix time is in
// otherData.time_origin_unix_ns). Throws reader::TraceError on malformed input,
// std::runtime_error when the file cannot be written.
void export_chrome_json(const std::vector<reader::Trace>& traces, const std::string& path,
                        const ExportOptions& options = {});

}  // namespace chronicle::exports
