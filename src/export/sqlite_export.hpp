// SQLite: a database to query a trace with SQL. Tables: processes, strings (the call sites:
// category, name, file, line), threads, spans (begin, end, duration, depth, parent span, the
// task running), tasks, task_runs, edges, counters and notes (notes and instants). Times are
// unix nanoseconds; task ids are the recorder's 64-bit ids (task_text: "t1.2", as dump prints).
// docs/export.md describes the schema with example queries.
#pragma once

#include <string>
#include <vector>

#include "export/export_common.hpp"

namespace chronicle::exports {

// Writes the traces into a new database at `path` (which must not exist), in one transaction.
// Throws reader::TraceError on malformed input, std::runtime_error on a database error.
void export_sqlite(const std::vector<reader::Trace>& traces, const std::string& path,
                   const ExportOptions& options = {});

}  // namespace chronicle::exports
