// What the exporters share: the traces of a record run, progress reporting, a buffered output
// file that reports write errors, JSON string escaping, and the pairing of span begins and ends
// per thread as events stream by.
#pragma once

#include <fmt/format.h>

#include <concepts>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/output_file.hpp"
#include "model/task_graph.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::exports {

struct ExportOptions {
  // Called every 2^20 events with the number of events read so far, across all traces (an
  // exporter reads a trace twice: once for the task graph, once for the events).
  std::function<void(uint64_t events_read)> on_progress;
  // The output is written under a temporary name and renamed into place (format::PrivateFile);
  // this says what happens to a file already at its name. A device or a pipe is written in place.
  format::WhenExists when_exists = format::WhenExists::refuse;
};

// Opens every trace of a record run: DIR itself and its NAME-PID subdirectories. Throws
// reader::TraceError when there is none or one is malformed.
std::vector<reader::Trace> open_traces(const std::string& directory);

// Counts events and calls the progress callback every 2^20 of them.
class ProgressCounter {
 public:
  explicit ProgressCounter(const ExportOptions& options) : options_(options) {}
  void count() {
    if ((++events_ & kEvery) == 0 && options_.on_progress) options_.on_progress(events_);
  }
  uint64_t events() const { return events_; }

 private:
  static constexpr uint64_t kEvery = (uint64_t{1} << 20) - 1;
  const ExportOptions& options_;
  uint64_t events_ = 0;
};

// A file written through a large buffer: a private file renamed into place by close(), or a
// device or pipe written in place (format::is_stream_target). Every failure (open, write, close)
// throws std::runtime_error naming the file and the reason; a file not closed is not kept.
class OutputFile {
 public:
  OutputFile(const std::string& path, format::WhenExists when_exists);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // The text to append to: write() hands it to the file when it has grown large.
  std::string& buffer() { return buffer_; }
  void write(std::string_view text) {
    buffer_.append(text);
    flush_if_large();
  }
  void flush_if_large() {
    if (buffer_.size() >= kFlushSize) flush();
  }
  void close();

 private:
  static constexpr size_t kFlushSize = 1 << 20;
  void flush();
  std::string path_;
  std::optional<format::PrivateFile> file_;  // unless a stream is written in place
  int fd_ = -1;
  std::string buffer_;
};

// Appends `text` as a JSON string literal (quotes included). Bytes that are not valid UTF-8
// (a note cut in the middle of a character) become U+FFFD, so the output is always valid JSON.
void append_json_string(std::string& out, std::string_view text);

// An integer's decimal digits / a 64-bit value as 16 lowercase hex digits, appended. The
// exporters write several numbers per event: fmt::format_to into a std::string parses its format
// string and resizes the string (zero-filling it) at each call, which was a third of an export.
template <std::integral Integer>
void append_decimal(std::string& out, Integer value) {
  const fmt::format_int digits(value);
  out.append(digits.data(), digits.size());
}
void append_hex64(std::string& out, uint64_t value);
// Each byte as two lowercase hex digits, in order (an OTLP trace id).
void append_hex_bytes(std::string& out, std::span<const uint8_t> bytes);

// Nanoseconds as microseconds with three decimals ("1234.567"), exact for any int64.
void append_microseconds(std::string& out, int64_t ns);

// The trace's task graph without the tasks' notes (GraphDetail::no_notes), counting the events
// read for progress.
model::TaskGraph build_task_graph(const reader::Trace& trace, ProgressCounter& progress);

// The stretch a task spans: from its creation (else its first run, else the trace's start) to
// its resolution (else the end of its last run or the trace's end when it was never resolved),
// never shorter than its runs.
struct TaskExtent {
  uint64_t begin = 0;
  uint64_t end = 0;
};
TaskExtent task_extent(const model::Task& task, const model::TaskGraph& graph);

// The task's run that holds `ticks`, or nullptr.
const model::RunInterval* run_at(const model::Task& task, uint64_t ticks);
// The first of the task's runs that begins at or after `ticks`, or nullptr.
const model::RunInterval* first_run_from(const model::Task& task, uint64_t ticks);

}  // namespace chronicle::exports
