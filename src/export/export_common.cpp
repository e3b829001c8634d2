#include "export/export_common.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "reader/trace_directory.hpp"

namespace chronicle::exports {

std::vector<reader::Trace> open_traces(const std::string& directory) {
  const auto directories = reader::find_traces(directory);
  std::vector<reader::Trace> traces;
  traces.reserve(directories.size());
  for (const auto& path : directories) traces.emplace_back(path);
  return traces;
}

OutputFile::OutputFile(const std::string& path, format::WhenExists when_exists) : path_(path) {
  if (format::is_stream_target(path)) {
    fd_ = format::open_stream_target(path);
  } else {
    file_.emplace(path, when_exists);
    fd_ = file_->fd();
  }
  buffer_.reserve(kFlushSize + (kFlushSize >> 2));
}

OutputFile::~OutputFile() {
  if (!file_ && fd_ >= 0) ::close(fd_);
}

void OutputFile::flush() {
  if (buffer_.empty()) return;
  format::write_all(fd_, buffer_, path_);
  buffer_.clear();
}

void OutputFile::close() {
  flush();
  if (file_) {
    file_->commit();  // close reports what the last writes could not do (a full disk, at the latest)
    return;
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw std::runtime_error(fmt::format("cannot write {}: {}", path_, std::strerror(errno)));
}

namespace {

// The length of the valid UTF-8 sequence at the start of `text`, or 0 when it is not one.
size_t utf8_sequence_length(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  size_t length;
  uint32_t code_point;
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code_point = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code_point = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code_point = lead & 0x07;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    code_point = (code_point << 6) | (byte(i) & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  if ((length == 3 && code_point < 0x800) || (length == 4 && code_point < 0x10000) || code_point > 0x10FFFF ||
      (code_point >= 0xD800 && code_point <= 0xDFFF))
    return 0;
  return length;
}

constexpr char kHexDigits[] = "0123456789abcdef";

// A byte JSON takes as it is: printable ASCII other than the quote and the backslash.
bool verbatim_in_json(unsigned char c) {
  return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

// Appends the escape of text[i] (not verbatim) and returns the bytes it took.
size_t append_json_escape(std::string& out, std::string_view text, size_t i) {
  const unsigned char c = static_cast<unsigned char>(text[i]);
  if (c == '"' || c == '\\') {
    out += '\\';
    out += static_cast<char>(c);
  } else if (c == '\n') {
    out += "\\n";
  } else if (c == '\t') {
    out += "\\t";
  } else if (c == '\r') {
    out += "\\r";
  } else if (c < 0x20) {
    out += "\\u00";
    out += kHexDigits[c >> 4];
    out += kHexDigits[c & 15];
  } else if (const size_t length = utf8_sequence_length(text.substr(i)); length > 0) {
    out.append(text.substr(i, length));
    return length;
  } else {
    out += "\xEF\xBF\xBD";
  }
  return 1;
}

// Whether all 8 bytes of `word` are verbatim_in_json, tested at once: the classic test for a
// zero byte, (x - 0x01..01) & ~x & 0x80..80, finds a byte below n when 0x01 is replaced by n
// (exact for n <= 0x80), and a byte equal to c as a zero byte of x ^ c..c.
bool word_verbatim_in_json(uint64_t word) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHighs = 0x8080808080808080ULL;
  const uint64_t quotes = word ^ (kOnes * '"');
  const uint64_t backslashes = word ^ (kOnes * '\\');
  const uint64_t found =
      ((word - kOnes * 0x20) & ~word) | ((quotes - kOnes) & ~quotes) | ((backslashes - kOnes) & ~backslashes) | word;
  return (found & kHighs) == 0;
}

// Where the run of verbatim bytes that begins at `i` ends.
size_t verbatim_run_end(std::string_view text, size_t i) {
  for (uint64_t word; i + 8 <= text.size(); i += 8) {
    std::memcpy(&word, text.data() + i, 8);
    if (!word_verbatim_in_json(word)) break;
  }
  while (i < text.size() && verbatim_in_json(static_cast<unsigned char>(text[i]))) ++i;
  return i;
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  size_t i = 0;
  while (i < text.size()) {
    const size_t verbatim_end = verbatim_run_end(text, i);
    out.append(text.data() + i, verbatim_end - i);
    i = verbatim_end;
    if (i < text.size()) i += append_json_escape(out, text, i);
  }
  out += '"';
}

void append_microseconds(std::string& out, int64_t ns) {
  if (ns < 0) out += '-';
  const uint64_t magnitude = ns < 0 ? uint64_t{0} - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  append_decimal(out, magnitude / 1000);
  const auto thousandths = static_cast<unsigned>(magnitude % 1000);
  const char decimals[4] = {'.', static_cast<char>('0' + thousandths / 100),
                            static_cast<char>('0' + thousandths / 10 % 10), static_cast<char>('0' + thousandths % 10)};
  out.append(decimals, 4);
}

void append_hex64(std::string& out, uint64_t value) {
  char digits[16];
  for (int i = 15; i >= 0; --i, value >>= 4) digits[i] = kHexDigits[value & 15];
  out.append(digits, 16);
}

void append_hex_bytes(std::string& out, std::span<const uint8_t> bytes) {
  for (const uint8_t byte : bytes) {
    out += kHexDigits[byte >> 4];
    out += kHexDigits[byte & 15];
  }
}

model::TaskGraph build_task_graph(const reader::Trace& trace, ProgressCounter& progress) {
  // Without the notes of the tasks' runs: no export reads them (each writes the events as they
  // stream by), and they grow with the events.
  model::TaskGraphBuilder builder(
      [&trace](uint32_t site_id) {
        const reader::Site* site = trace.site(site_id);
        return site ? site->name : std::string();
      },
      model::GraphDetail::no_notes);
  trace.for_each_event([&](const reader::Event& event) {
    builder.add(event);
    progress.count();
    return true;
  });
  return builder.finish();
}

TaskExtent task_extent(const model::Task& task, const model::TaskGraph& graph) {
  TaskExtent extent;
  if (task.created)
    extent.begin = *task.created;
  else
    extent.begin = task.runs.empty() ? graph.first_ticks() : task.runs.front().begin;
  uint64_t last_run_end = extent.begin;
  for (const auto& run : task.runs) {
    extent.begin = std::min(extent.begin, run.begin);
    last_run_end = std::max(last_run_end, run.end);
  }
  if (task.resolved)
    extent.end = std::max(*task.resolved, last_run_end);
  else
    extent.end = std::max(graph.last_ticks(), last_run_end);
  extent.end = std::max(extent.end, extent.begin);
  return extent;
}

const model::RunInterval* run_at(const model::Task& task, uint64_t ticks) {
  for (const auto& run : task.runs)
    if (run.begin <= ticks && ticks <= run.end) return &run;
  return nullptr;
}

const model::RunInterval* first_run_from(const model::Task& task, uint64_t ticks) {
  for (const auto& run : task.runs)
    if (run.begin >= ticks) return &run;
  return nullptr;
}

}  // namespace chronicle::exports
