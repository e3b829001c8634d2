#include "merge/trace_merge.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <vector>

#include "chronicle/detail/layout.hpp"
#include "compression/ctfz.hpp"
#include "format/input_error.hpp"
#include "reader/run_on_threads.hpp"
#include "reader/trace_directory.hpp"
#include "reader/trace_reader.hpp"

namespace chronicle::merge {

std::string path_part(const std::string& text) {
  // A metadata or an OTLP resource may name a host or process longer than a file name may be
  // (255 bytes): two parts and a pid still fit.
  constexpr size_t kMostBytes = 100;
  std::string out;
  for (char c : text.substr(0, kMostBytes))
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
  if (out.empty()) out = "unknown";
  if (out.front() == '.') out.front() = '_';
  return out;
}

namespace {

void refuse_duplicates(const std::vector<reader::Trace>& traces) {
  std::map<std::array<uint8_t, 16>, size_t> seen;
  for (size_t index = 0; index < traces.size(); ++index) {
    const auto [found, inserted] = seen.emplace(traces[index].description().uuid, index);
    if (!inserted)
      throw std::invalid_argument(fmt::format("{} and {} are the same trace (uuid {}): give each trace once",
                                              traces[found->second].directory(), traces[index].directory(),
                                              format::uuid_to_string(traces[index].description().uuid)));
  }
}

// The calibration and correction that put a trace's clock on the reference host's.
void correct_clock(const reader::Trace& trace, const Host& host, const std::string& reference, PlannedTrace& planned) {
  const format::ClockCalibration& original = trace.description().clock;
  const ClockLine& line = host.alignment.to_reference;
  planned.clock = original;
  const auto start = static_cast<int64_t>(original.realtime_ns_at_start);
  planned.clock.realtime_ns_at_start = static_cast<uint64_t>(line.apply(start));
  // The frequency is an integer: the drift applied is the one it can say (within half a tick
  // per second: 0.5 ppb at 1 GHz).
  const long double frequency = static_cast<long double>(original.frequency_hz) / (1.0L + line.drift);
  planned.clock.frequency_hz = static_cast<uint64_t>(std::max(1.0L, std::round(frequency)));
  const long double applied_drift =
      static_cast<long double>(original.frequency_hz) / static_cast<long double>(planned.clock.frequency_hz) - 1;
  format::ClockCorrection& correction = planned.correction;
  correction.reference_host = reference;
  correction.offset_ns = static_cast<int64_t>(planned.clock.realtime_ns_at_start) - start;
  correction.drift_ppb = static_cast<int64_t>(std::llround(applied_drift * 1e9L));
  correction.bound_ns =
      std::isinf(host.alignment.bound_ns) ? -1 : static_cast<int64_t>(std::ceil(host.alignment.bound_ns));
  correction.pairs = host.alignment.pairs;
  correction.method = host.alignment.reason;
  // A trace merged before: what this merge adds comes on top of what the last one applied.
  if (const auto& earlier = trace.description().correction) {
    correction.offset_ns += earlier->offset_ns;
    correction.drift_ppb += earlier->drift_ppb;
    correction.bound_ns =
        correction.bound_ns < 0 || earlier->bound_ns < 0 ? -1 : correction.bound_ns + earlier->bound_ns;
    correction.pairs += earlier->pairs;
  }
}

int create_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  return fd;
}

void write_all(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t written = ::write(fd, data, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    data += written;
    size -= static_cast<size_t>(written);
  }
}

// Closes a file descriptor on the way out, or on purpose to see the error.
class FileCloser {
 public:
  explicit FileCloser(int fd) : fd_(fd) {}
  ~FileCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileCloser(const FileCloser&) = delete;
  FileCloser& operator=(const FileCloser&) = delete;
  int fd() const { return fd_; }
  // Closing reports what the writes could not do (a full disk on some file systems).
  void close(const std::string& path) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }

 private:
  int fd_;
};

// Copies `from` to a new file `to`, in the kernel where it can (copy_file_range), by reads and
// writes elsewhere; reports each chunk to `copied`.
void copy_file(const std::string& from, uid_t owner, const std::string& to,
               const std::function<void(uint64_t)>& copied) {
  const reader::ReadableFile in = reader::open_readable_file(from, owner);
  if (!in) throw format::InputError(fmt::format("{}: {}", from, in.problem()));
  FileCloser out(create_file(to));
  constexpr size_t kChunk = 64 << 20;
  bool in_kernel = true;
  std::vector<char> buffer;
  while (true) {
    ssize_t moved = -1;
    if (in_kernel) {
      moved = ::copy_file_range(in.fd(), nullptr, out.fd(), nullptr, kChunk, 0);
      if (moved < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
        in_kernel = false;
        continue;
      }
    } else {
      buffer.resize(1 << 20);
      moved = ::read(in.fd(), buffer.data(), buffer.size());
      if (moved > 0) write_all(out.fd(), buffer.data(), static_cast<size_t>(moved), to);
    }
    if (moved < 0 && errno == EINTR) continue;
    if (moved < 0) throw std::runtime_error(fmt::format("cannot copy {} to {}: {}", from, to, std::strerror(errno)));
    if (moved == 0) break;
    copied(static_cast<uint64_t>(moved));
  }
  out.close(to);
}

// The files of a trace directory a copy takes: every regular file but the metadata (the stream
// files and the definitions), as the reader and babeltrace2 find them; dot-files and the
// subdirectories of a record run's other processes are not the trace's.
std::vector<std::filesystem::path> stream_files(const std::string& directory, uid_t owner) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    if (name == "metadata" || name.starts_with(".") || entry.is_directory(error)) continue;
    // What is not the trace's own (a planted link, another user's file) the reader has named
    // and skipped: it is not copied either.
    if (!reader::open_readable_file(entry.path().string(), owner)) continue;
    files.push_back(entry.path());
  }
  if (error) throw std::runtime_error(fmt::format("cannot list {}: {}", directory, error.message()));
  std::sort(files.begin(), files.end());
  return files;
}

// A trace's subdirectory in the merged trace, named by its host, pid and process (path_part
// keeps each short enough for a file name); a taken name moves to the next suffix.
std::string unique_subdirectory(const reader::Trace& trace, std::set<std::string>& taken) {
  const auto& description = trace.description();
  const std::string base =
      fmt::format("{}-{}-{}", path_part(description.hostname), description.pid, path_part(description.process_name));
  std::string name = base;
  for (int suffix = 2; !taken.insert(name).second; ++suffix) name = fmt::format("{}-{}", base, suffix);
  return name;
}

}  // namespace

std::vector<reader::Trace> open_traces(const std::vector<std::string>& directories) {
  // Opening decodes every event (the reader's damage check): most of a merge's time, and each
  // trace's alone, so the traces open side by side.
  std::vector<std::optional<reader::Trace>> opened(directories.size());
  const std::vector<std::exception_ptr> failures =
      reader::run_on_threads(directories.size(), reader::default_thread_count(),
                             [&](size_t index) { opened[index].emplace(directories[index]); });
  std::vector<reader::Trace> traces;
  traces.reserve(directories.size());
  for (size_t index = 0; index < directories.size(); ++index) {
    if (failures[index]) std::rethrow_exception(failures[index]);
    traces.push_back(std::move(*opened[index]));
  }
  return traces;
}

std::string resolution_text(uint64_t resolution_ns) {
  if (resolution_ns == 1'000'000) return "whole milliseconds";
  if (resolution_ns == 1'000) return "whole microseconds";
  return fmt::format("multiples of {} ns", resolution_ns);
}

namespace {

// Where a trace's events are, on its host's clock: from its packets' first begin to their last
// end; none for a trace of no packet.
std::optional<TimeSpan> time_span(const reader::Trace& trace) {
  uint64_t first = std::numeric_limits<uint64_t>::max(), last = 0;
  for (size_t stream = 0; stream < trace.streams().size(); ++stream)
    trace.for_each_packet(stream, [&](const uint8_t* packet, uint64_t) {
      const auto* header = reinterpret_cast<const format::PacketHeader*>(packet);
      first = std::min(first, header->timestamp_begin);
      last = std::max(last, header->timestamp_end.load(std::memory_order_relaxed));
    });
  if (first > last) return std::nullopt;
  return TimeSpan{trace.to_unix_ns(first), trace.to_unix_ns(last)};
}

// The union of `span` and `more`.
void widen_span(std::optional<TimeSpan>& span, const std::optional<TimeSpan>& more) {
  if (!more) return;
  if (!span) {
    span = more;
    return;
  }
  span->first_ns = std::min(span->first_ns, more->first_ns);
  span->last_ns = std::max(span->last_ns, more->last_ns);
}

// Hosts of one hostname are told apart by their ids: "web (host id 3f2a9c1e)", "web (no host id)".
void name_hosts_apart(std::vector<Host>& hosts, const std::map<std::pair<std::string, std::string>, size_t>& keys) {
  std::map<std::string, size_t> of_name;
  for (const auto& [key, index] : keys) ++of_name[key.first];
  for (const auto& [key, index] : keys)
    if (of_name[key.first] > 1)
      hosts[index].name =
          fmt::format("{} ({})", key.first, key.second.empty() ? "no host id" : "host id " + key.second.substr(0, 8));
}

}  // namespace

MergePlan plan_merge(const std::vector<reader::Trace>& traces, const std::vector<MessagePair>& pairs) {
  refuse_duplicates(traces);
  MergePlan plan;
  // A host is a hostname and the id of its clock (a boot id): two machines of one hostname are
  // two clocks; a trace that names no id is a host of its own beside those that do.
  std::map<std::pair<std::string, std::string>, size_t> host_of_key;
  std::vector<size_t> host_of_trace;
  for (size_t index = 0; index < traces.size(); ++index) {
    const format::TraceDescription& description = traces[index].description();
    const std::string& name = description.hostname;
    const auto [found, added] = host_of_key.emplace(std::pair{name, description.host_id}, plan.hosts.size());
    if (added) plan.hosts.push_back(Host{name, {}, {}});
    Host& host = plan.hosts[found->second];
    host.traces.push_back(index);
    host.time_resolution_ns = std::max(host.time_resolution_ns, traces[index].description().time_resolution_ns);
    host_of_trace.push_back(found->second);
  }
  name_hosts_apart(plan.hosts, host_of_key);
  std::vector<HostMessage> messages;
  for (const MessagePair& pair : pairs) {
    if (pair.sender >= traces.size() || pair.receiver >= traces.size())
      throw std::invalid_argument(
          fmt::format("message pair names trace {} of {}", std::max(pair.sender, pair.receiver), traces.size()));
    const size_t sender = host_of_trace[pair.sender], receiver = host_of_trace[pair.receiver];
    if (sender == receiver) continue;  // one host, one clock: nothing to learn
    // A time of coarse resolution r happened within r of what it says: the send as early, the
    // receive as late as that allows, so that no line the truth follows is ruled out.
    const auto widen = [&](size_t host) { return static_cast<int64_t>(plan.hosts[host].time_resolution_ns); };
    messages.push_back({sender, pair.send_ns - widen(sender), receiver, pair.receive_ns + widen(receiver)});
    ++plan.pairs;
  }
  // Each host's bound holds over the whole of its traces, not only where its messages are.
  std::vector<std::optional<TimeSpan>> spans(plan.hosts.size());
  for (size_t index = 0; index < traces.size(); ++index)
    widen_span(spans[host_of_trace[index]], time_span(traces[index]));
  const std::vector<HostAlignment> alignments = align_hosts(plan.hosts.size(), messages, spans);
  for (size_t host = 0; host < plan.hosts.size(); ++host) {
    plan.hosts[host].alignment = alignments[host];
    if (const uint64_t resolution = plan.hosts[host].time_resolution_ns; resolution != 0)
      plan.hosts[host].alignment.reason +=
          fmt::format("; its times are {} (detected), each allowed that much either way in the fit and its bound",
                      resolution_text(resolution));
  }
  std::set<std::string> taken;
  for (size_t index = 0; index < traces.size(); ++index) {
    PlannedTrace planned;
    planned.host = host_of_trace[index];
    planned.subdirectory = unique_subdirectory(traces[index], taken);
    correct_clock(traces[index], plan.hosts[planned.host], plan.hosts.front().name, planned);
    plan.traces.push_back(std::move(planned));
  }
  return plan;
}

namespace {

// A plain trace of one chunk is copied file by file, as it is. A compressed or rotated one is
// written as `chronicle convert` writes it: each stream's sound packets, decoded and joined across
// the chunks (the damage left out was named when the trace was opened).
bool copied_file_by_file(const reader::Trace& trace) {
  return trace.chunks() == std::vector<std::string>{trace.directory()} &&
         std::filesystem::exists(trace.directory() + "/metadata");
}

}  // namespace

void write_plain_streams(const reader::Trace& trace, const std::string& directory,
                         const std::function<void(uint64_t)>& count) {
  for (size_t stream = 0; stream < trace.streams().size(); ++stream) {
    const std::string path =
        directory + "/" +
        compression::plain_name(std::filesystem::path(trace.streams()[stream].path).filename().string());
    FileCloser out(create_file(path));
    trace.for_each_packet(stream, [&](const uint8_t* packet, uint64_t bytes) {
      write_all(out.fd(), reinterpret_cast<const char*>(packet), bytes, path);
      count(bytes);
    });
    out.close(path);
  }
  if (trace.definitions_bytes().empty()) return;
  const std::string path = directory + "/strings";
  FileCloser out(create_file(path));
  write_all(out.fd(), reinterpret_cast<const char*>(trace.definitions_bytes().data()), trace.definitions_bytes().size(),
            path);
  out.close(path);
}

uint64_t write_merge(const std::vector<reader::Trace>& traces, const MergePlan& plan, const std::string& output,
                     const CopyProgress& progress) {
  // Per trace, the files to copy as they are; none when it is written packet by packet.
  std::vector<std::optional<std::vector<std::filesystem::path>>> files;
  uint64_t total = 0;
  for (const reader::Trace& trace : traces) {
    files.emplace_back();
    if (!copied_file_by_file(trace)) {
      for (const reader::StreamInfo& stream : trace.streams()) total += stream.bytes;
      continue;
    }
    files.back() = stream_files(trace.directory(), trace.owner());
    for (const auto& file : *files.back()) total += std::filesystem::file_size(file);
  }
  uint64_t copied = 0;
  const auto count = [&](uint64_t bytes) {
    copied += bytes;
    if (progress) progress(copied, total);
  };
  for (size_t index = 0; index < traces.size(); ++index) {
    const PlannedTrace& planned = plan.traces[index];
    const std::string directory = output + "/" + planned.subdirectory;
    if (::mkdir(directory.c_str(), 0700) != 0)
      throw std::runtime_error(fmt::format("cannot create {}: {}", directory, std::strerror(errno)));
    if (files[index]) {
      for (const auto& file : *files[index])
        copy_file(file.string(), traces[index].owner(), directory + "/" + file.filename().string(), count);
    } else {
      write_plain_streams(traces[index], directory, count);
    }
    const std::string metadata = format::with_clock(traces[index].metadata_text(), planned.clock, planned.correction);
    const std::string metadata_path = directory + "/metadata";
    FileCloser out(create_file(metadata_path));
    write_all(out.fd(), metadata.data(), metadata.size(), metadata_path);
    out.close(metadata_path);
  }
  if (progress) progress(total, total);
  return copied;
}

}  // namespace chronicle::merge
