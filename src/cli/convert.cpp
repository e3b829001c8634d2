// `chronicle convert IN OUT`: a compressed or rotated trace (record --compress, --rotate) written
// back as one plain CTF 1.8 directory, for babeltrace2 and other CTF readers. Every packet comes
// out byte for byte as the collector copied it from the rings; a rotated trace's chunks are joined
// stream by stream. Damaged stretches are left out and named, as the other tools name them.
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "cli/common.hpp"
#include "collector/collector.hpp"
#include "merge/trace_merge.hpp"
#include "reader/trace_directory.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::cli {
namespace {

struct ConvertOptions {
  std::string input;
  std::string output;
  bool allow_shared_output = false;
};

// A new file (never one that is there, nor a planted link), mode 0600.
class NewFile {
 public:
  explicit NewFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ < 0) throw std::runtime_error(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  }
  ~NewFile() { ::close(fd_); }
  NewFile(const NewFile&) = delete;
  NewFile& operator=(const NewFile&) = delete;
  void write(const void* data, size_t size) {
    const auto* bytes = static_cast<const uint8_t*>(data);
    while (size > 0) {
      const ssize_t n = ::write(fd_, bytes, size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw std::runtime_error(fmt::format("cannot write {}: {}", path_, std::strerror(errno)));
      bytes += n;
      size -= static_cast<size_t>(n);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

struct Converted {
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t warnings = 0;
};

void convert_trace(const reader::Trace& trace, const std::string& output, Converted& total) {
  collector::create_private_directory(output);
  merge::write_plain_streams(trace, output, [&total](uint64_t bytes) {
    ++total.packets;
    total.bytes += bytes;
  });
  NewFile(output + "/metadata").write(trace.metadata_text().data(), trace.metadata_text().size());
  for (const std::string& warning : trace.warnings()) {
    fmt::print(stderr, "chronicle: {}: {}\n", trace.directory(), warning);
    ++total.warnings;
  }
}

int run_convert(const ConvertOptions& options) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::exists(options.output, error) && !fs::is_empty(options.output, error))
    throw std::invalid_argument(
        fmt::format("{}: exists and is not empty: convert writes a new directory", options.output));
  const std::vector<std::string> traces = reader::find_traces(options.input);
  prepare_output_directory(options.output, options.allow_shared_output);
  Converted total;
  for (const std::string& directory : traces) {
    const reader::Trace trace(directory);
    const fs::path relative = fs::relative(directory, options.input);
    const std::string output =
        relative.empty() || relative == "." ? options.output : (fs::path(options.output) / relative).string();
    convert_trace(trace, output, total);
  }
  fmt::print(stderr, "chronicle: {} converted into {}: {} packets, {}, {} trace{}\n", options.input, options.output,
             human_count(total.packets), human_bytes(total.bytes), traces.size(), traces.size() == 1 ? "" : "s");
  return 0;
}

}  // namespace

Command add_convert(CLI::App& app) {
  auto options = std::make_shared<ConvertOptions>();
  CLI::App* command = app.add_subcommand(
      "convert", "Write a compressed or rotated trace as one plain CTF trace (for babeltrace2 and other CTF readers)");
  command->add_option("input", options->input, "The trace (a directory)")->required();
  command->add_option("output", options->output, "The plain trace to write (a new directory)")->required();
  command->add_flag("--allow-shared-output", options->allow_shared_output,
                    "Write into a directory other users can write to");
  return {command, [options] { return run_convert(*options); }};
}

}  // namespace chronicle::cli
