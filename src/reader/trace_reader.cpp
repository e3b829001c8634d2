#include "reader/trace_reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>

namespace chronicle::reader {

TraceError::TraceError(std::string file, uint64_t offset, const std::string& reason)
    : format::InputError(fmt::format("{}: offset {}: {}", file, offset, reason)),
      file_(std::move(file)),
      offset_(offset) {}

namespace {

std::string file_kind(const struct stat& info) {
  if (S_ISDIR(info.st_mode)) return "a directory";
  if (S_ISFIFO(info.st_mode)) return "a FIFO";
  if (S_ISSOCK(info.st_mode)) return "a socket";
  if (S_ISCHR(info.st_mode) || S_ISBLK(info.st_mode)) return "a device";
  return fmt::format("mode {:o}", info.st_mode);
}

}  // namespace

// A read-only mapping of a whole file.
class MappedFile {
 public:
  // At most `limit` bytes from the file's start.
  explicit MappedFile(const std::string& path, uint64_t limit = UINT64_MAX) : path_(path) {
    // O_NONBLOCK: opening a FIFO would wait for a writer that never comes. Only regular files
    // are read (a device could be endless, a FIFO empty).
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw TraceError(path, 0, fmt::format("cannot open: {}", std::strerror(errno)));
    struct stat info {};
    if (fstat(fd, &info) != 0) {
      ::close(fd);
      throw TraceError(path, 0, fmt::format("cannot stat: {}", std::strerror(errno)));
    }
    if (!S_ISREG(info.st_mode)) {
      ::close(fd);
      throw TraceError(path, 0, fmt::format("not a regular file ({}): a trace is made of files", file_kind(info)));
    }
    size_ = std::min(static_cast<uint64_t>(info.st_size), limit);
    if (size_ > 0) {
      void* mapped = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (mapped == MAP_FAILED) {
        ::close(fd);
        throw TraceError(path, 0, fmt::format("cannot map: {}", std::strerror(errno)));
      }
      data_ = static_cast<const uint8_t*>(mapped);
      madvise(mapped, size_, MADV_SEQUENTIAL);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
  }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

namespace {

template <typename T>
T load(const uint8_t* data) {
  T value;
  std::memcpy(&value, data, sizeof value);
  return value;
}

// Reads the fields of a definition event in order.
class FieldReader {
 public:
  FieldReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  T number() {
    T value = load<T>(data_ + offset_);
    offset_ += sizeof(T);
    return value;
  }
  std::string text() {
    const char* start = reinterpret_cast<const char*>(data_ + offset_);
    const size_t length = strnlen(start, size_ - offset_);
    offset_ += length + 1;
    return std::string(start, length);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
};

}  // namespace

Trace::Trace(const std::string& directory) : directory_(directory) {
  open(nullptr, nullptr);
}

Trace::Trace(const std::string& directory, const std::map<std::string, uint64_t>& starts) : directory_(directory) {
  open(&starts, nullptr);
}

Trace::Trace(const std::string& directory, const std::map<std::string, uint64_t>& starts,
             const std::map<std::string, uint64_t>& committed)
    : directory_(directory) {
  open(&starts, &committed);
}

void Trace::open(const std::map<std::string, uint64_t>* starts, const std::map<std::string, uint64_t>* committed) {
  namespace fs = std::filesystem;
  const std::string& directory = directory_;
  std::error_code error;
  if (!fs::is_directory(directory, error)) throw TraceError(directory, 0, "not a directory");
  const std::string metadata_path = directory + "/metadata";
  {
    MappedFile metadata(metadata_path);
    try {
      description_ =
          format::parse_metadata(std::string_view(reinterpret_cast<const char*>(metadata.data()), metadata.size()));
    } catch (const std::exception& parse_error) {
      throw TraceError(metadata_path, 0, parse_error.what());
    }
  }
  const format::ClockOffset offset = format::clock_offset(description_.clock);
  if (__builtin_mul_overflow(offset.seconds, int64_t{1'000'000'000}, &clock_base_ns_))
    throw TraceError(metadata_path, 0, fmt::format("clock offset of {} s is out of range", offset.seconds));
  clock_offset_ticks_ = offset.ticks;

  std::vector<std::string> stream_paths;
  bool has_strings = false;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    if (name == "metadata" || name.starts_with(".")) continue;
    // Subdirectories are other processes' traces. Anything else that is not a regular file
    // (a FIFO, a link to nowhere or to itself) is named rather than skipped or waited on.
    std::error_code status_error;
    const fs::file_status status = entry.status(status_error);
    if (fs::is_directory(status)) continue;
    if (status_error || !fs::is_regular_file(status))
      throw TraceError(entry.path().string(), 0,
                       status_error ? fmt::format("cannot read: {}", status_error.message())
                                    : std::string("not a regular file: a trace is made of files"));
    if (entry.file_size(status_error) == 0) continue;
    if (name == "strings")
      has_strings = true;
    else if (!committed || committed->contains(name))
      stream_paths.push_back(entry.path().string());
  }
  if (error) throw TraceError(directory, 0, fmt::format("cannot list: {}", error.message()));
  if (has_strings) load_definitions(directory + "/strings");
  std::sort(stream_paths.begin(), stream_paths.end());
  for (const auto& path : stream_paths) {
    uint64_t start = 0;
    if (starts)
      if (const auto found = starts->find(path); found != starts->end()) start = found->second;
    uint64_t limit = UINT64_MAX;
    if (committed) limit = committed->at(std::filesystem::path(path).filename().string());
    index_stream(path, start, starts != nullptr, limit);
  }
  if (streams_.empty() && !damage_.empty())
    throw TraceError(damage_.front().file, damage_.front().offset,
                     damage_.front().reason + " (nothing readable is left in the trace)");
}

Trace::~Trace() = default;
Trace::Trace(Trace&&) noexcept = default;

void Trace::load_definitions(const std::string& path) {
  MappedFile file(path);
  uint64_t offset = 0;
  while (offset < file.size()) {
    const std::string problem = format::check_packet_header(file.data() + offset, file.size() - offset);
    if (!problem.empty()) throw TraceError(path, offset, problem);
    const auto& header = *reinterpret_cast<const format::PacketHeader*>(file.data() + offset);
    if (header.stream_id != format::kStreamStrings)
      throw TraceError(path, offset, fmt::format("stream id {} in the definitions file", header.stream_id));
    try {
      format::PacketDecoder decoder(file.data() + offset, format::content_bytes(header));
      format::RawEvent event;
      while (decoder.next(event)) {
        FieldReader fields(event.payload, event.payload_size);
        if (event.spec->id == static_cast<uint32_t>(format::DefinitionId::site)) {
          Site site;
          site.id = fields.number<uint32_t>();
          site.kind = static_cast<format::SiteKind>(fields.number<uint8_t>());
          site.category = fields.text();
          site.name = fields.text();
          site.file = fields.text();
          site.line = fields.number<uint32_t>();
          // Ids are dense from 1, and each definition takes more than a byte of the file: an id
          // beyond the file's size is damage (and would make the table as large as it says).
          if (site.id == 0 || site.id > file.size())
            throw TraceError(path, offset + event.offset, fmt::format("site id {} out of range", site.id));
          if (sites_.size() < site.id) sites_.resize(site.id);
          sites_[site.id - 1] = std::move(site);
        } else if (event.spec->id == static_cast<uint32_t>(format::DefinitionId::thread)) {
          const uint32_t thread_id = fields.number<uint32_t>();
          thread_names_[thread_id] = fields.text();
        } else if (event.spec->id == static_cast<uint32_t>(format::DefinitionId::module)) {
          ModuleMap module;
          module.base = fields.number<uint64_t>();
          module.start = fields.number<uint64_t>();
          module.end = fields.number<uint64_t>();
          module.build_id = fields.text();
          module.path = fields.text();
          modules_.push_back(std::move(module));
        }
      }
    } catch (const format::DecodeError& decode_error) {
      throw TraceError(path, offset + decode_error.offset(), decode_error.what());
    }
    offset += header.packet_size_bits / 8;
  }
}

void Trace::index_stream(const std::string& path, uint64_t start, bool growing, uint64_t committed) {
  auto file = std::make_unique<MappedFile>(path, committed);
  StreamInfo info;
  info.path = path;
  info.bytes = file->size();
  std::vector<uint64_t> readable;
  std::vector<uint32_t> event_types;
  uint64_t offset = start;
  uint64_t previous_discarded = 0;
  while (offset < file->size()) {
    const uint8_t* packet = file->data() + offset;
    const uint64_t left = file->size() - offset;
    const std::optional<uint64_t> packet_bytes = format::framed_packet_size(packet, left);
    if (!packet_bytes) {
      // The collector appends whole packets: one that ends short is being written now.
      if (growing) break;
      // Where this packet ends, and so where the next one starts, is unknown: the rest is lost.
      damage_.push_back({path, offset, left, std::nullopt, format::check_packet_header(packet, left)});
      break;
    }
    uint32_t types = 0;
    const std::string problem = packet_problem(packet, offset, previous_discarded, types);
    const auto& header = *reinterpret_cast<const format::PacketHeader*>(packet);
    if (problem.empty()) {
      readable.push_back(offset);
      event_types.push_back(types);
      previous_discarded = header.events_discarded.load(std::memory_order_relaxed);
      info.thread_id = header.thread_id;
      ++info.packets;
    } else {
      // Its events can still be counted when only the header's other fields are wrong.
      const uint64_t content = format::content_bytes(header);
      std::optional<uint64_t> events;
      if (content >= format::kPacketHeaderSize && content <= *packet_bytes)
        events = format::count_events(packet, content);
      damage_.push_back({path, offset, *packet_bytes, events, problem});
    }
    offset += *packet_bytes;
  }
  if (readable.empty()) return;  // nothing of this stream to show; damage() says why
  info.events_discarded = previous_discarded;
  streams_.push_back(std::move(info));
  files_.push_back(std::move(file));
  readable_packets_.push_back(std::move(readable));
  packet_event_types_.push_back(std::move(event_types));
}

// What makes a framed packet unreadable, or an empty string. Walks every event as the decoder
// would, so that the cursors never meet a fault after they have handed out part of a packet, and
// notes the packet's event types.
std::string Trace::packet_problem(const uint8_t* packet, uint64_t offset, uint64_t previous_discarded,
                                  uint32_t& event_types) const {
  const std::string problem = format::check_packet_header(packet, std::numeric_limits<size_t>::max());
  if (!problem.empty()) return problem;
  const auto& header = *reinterpret_cast<const format::PacketHeader*>(packet);
  if (header.stream_id != format::kStreamThread)
    return fmt::format("stream id {} where thread events were expected", header.stream_id);
  if (std::memcmp(header.uuid, description_.uuid.data(), 16) != 0)
    return fmt::format("packet uuid differs from the metadata's (at offset {})",
                       offset + offsetof(format::PacketHeader, uuid));
  if (header.events_discarded.load(std::memory_order_relaxed) < previous_discarded)
    return fmt::format("events_discarded decreases (it is cumulative) (at offset {})",
                       offset + offsetof(format::PacketHeader, events_discarded));
  if (format::events_decode(packet, format::content_bytes(header), event_types)) return {};
  // Damage (rare): the decoder, which the cursors will use, has the last word and says what and where.
  try {
    format::PacketDecoder decoder(packet, format::content_bytes(header));
    format::RawEvent event;
    while (decoder.next(event)) event_types |= format::event_type_bit(event.spec->id);
  } catch (const format::DecodeError& error) {
    return fmt::format("{} (at offset {})", error.what(), offset + error.offset());
  }
  return {};
}

const Site* Trace::site(uint32_t id) const {
  if (id == 0 || id > sites_.size() || sites_[id - 1].id == 0) return nullptr;
  return &sites_[id - 1];
}

std::string Trace::thread_name(uint32_t thread_id) const {
  auto found = thread_names_.find(thread_id);
  return found == thread_names_.end() ? std::string() : found->second;
}

std::string describe(const Damage& damage) {
  const std::string lost =
      damage.events_lost ? fmt::format("{} events lost", *damage.events_lost) : "events lost: unknown";
  return fmt::format("{}: offset {}: skipped {} bytes ({}): {}", damage.file, damage.offset, damage.bytes, lost,
                     damage.reason);
}

std::vector<std::string> Trace::warnings() const {
  std::vector<std::string> lines;
  if (const uint64_t discarded = events_discarded(); discarded > 0)
    lines.push_back(fmt::format("{} events discarded (not in the trace)", discarded));
  if (const std::string losses = format::describe_losses(description_.losses); !losses.empty())
    lines.push_back("lost: " + losses);
  for (const Damage& stretch : damage_) lines.push_back("damaged, skipped: " + describe(stretch));
  return lines;
}

uint32_t Trace::event_types(size_t index) const {
  uint32_t types = 0;
  for (const uint32_t packet : packet_event_types_[index]) types |= packet;
  return types;
}

uint64_t Trace::events_discarded() const {
  uint64_t total = 0;
  for (const auto& stream : streams_) total += stream.events_discarded;
  return total;
}

int64_t Trace::to_unix_ns(uint64_t ticks) const {
  const __int128 scaled = (static_cast<__int128>(clock_offset_ticks_) + ticks) * 1'000'000'000 /
                          static_cast<__int128>(description_.clock.frequency_hz);
  return clock_base_ns_ + static_cast<int64_t>(scaled);
}

std::string Trace::format_time(uint64_t ticks) const {
  const int64_t ns = to_unix_ns(ticks);
  const time_t seconds = static_cast<time_t>(ns / 1'000'000'000);
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:09}", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                     parts.tm_hour, parts.tm_min, parts.tm_sec, ns % 1'000'000'000);
}

Trace::StreamCursor::StreamCursor(const Trace& trace, size_t index, uint32_t event_types)
    : trace_(trace),
      index_(index),
      data_(trace.files_[index]->data()),
      packets_(trace.readable_packets_[index]),
      packet_event_types_(trace.packet_event_types_[index]),
      event_types_(event_types) {}

bool Trace::StreamCursor::next_packet() {
  // All types (the default) read every packet, without looking at what the check noted.
  if (event_types_ != ~uint32_t{0})
    while (next_packet_ < packets_.size() && (packet_event_types_[next_packet_] & event_types_) == 0) ++next_packet_;
  if (next_packet_ >= packets_.size()) return false;
  packet_offset_ = packets_[next_packet_++];
  const auto& header = *reinterpret_cast<const format::PacketHeader*>(data_ + packet_offset_);
  packet_.emplace(data_ + packet_offset_, format::content_bytes(header));
  return true;
}

bool Trace::StreamCursor::next(Event& event) {
  format::RawEvent raw;
  while (true) {
    if (packet_) {
      try {
        if (packet_->next(raw)) break;
      } catch (const format::DecodeError& error) {
        throw TraceError(trace_.streams_[index_].path, packet_offset_ + error.offset(), error.what());
      }
    }
    if (!next_packet()) return false;
  }
  const auto type = static_cast<format::EventId>(raw.spec->id);
  event.type = type;
  event.ticks = raw.ticks;
  event.thread_id = trace_.streams_[index_].thread_id;
  event.stream = static_cast<uint32_t>(index_);
  event.name_id = 0;
  event.value = 0;
  event.value_float = 0;
  event.text = {};
  event.depth = 0;
  event.task = 0;
  event.related_task = 0;
  event.task_kind = format::TaskKind::unknown;
  event.outcome = format::TaskOutcome::ok;
  event.span = nullptr;
  // Payload sizes were checked against the catalogue by the decoder; the layouts are its.
  auto text_after = [&raw](size_t fixed) {
    return std::string_view(reinterpret_cast<const char*>(raw.payload + fixed), raw.payload_size - fixed - 1);
  };
  switch (type) {
    case format::EventId::span_begin:
    case format::EventId::span_end:
    case format::EventId::instant:
      event.name_id = load<format::NamePayload>(raw.payload).name_id;
      break;
    case format::EventId::counter: {
      const auto payload = load<format::CounterPayload>(raw.payload);
      event.name_id = payload.name_id;
      event.value = payload.value;
      break;
    }
    case format::EventId::counter_float: {
      const auto payload = load<format::CounterFloatPayload>(raw.payload);
      event.name_id = payload.name_id;
      event.value_float = payload.value;
      break;
    }
    case format::EventId::note:
      event.name_id = load<format::NotePrefix>(raw.payload).name_id;
      event.text = text_after(sizeof(format::NotePrefix));
      break;
    case format::EventId::task_create: {
      const auto payload = load<format::TaskCreatePayload>(raw.payload);
      event.task = payload.task;
      event.related_task = payload.parent;
      event.task_kind = static_cast<format::TaskKind>(payload.kind);
      event.name_id = payload.name_id;
      break;
    }
    case format::EventId::task_run_begin:
    case format::EventId::task_run_end:
      event.task = load<format::TaskPayload>(raw.payload).task;
      break;
    case format::EventId::task_wait: {
      const auto payload = load<format::TaskWaitPayload>(raw.payload);
      event.task = payload.task;
      event.related_task = payload.awaited;
      break;
    }
    case format::EventId::task_resolve: {
      const auto payload = load<format::TaskResolvePrefix>(raw.payload);
      event.task = payload.task;
      event.related_task = payload.resolver;
      event.outcome = static_cast<format::TaskOutcome>(payload.outcome);
      event.text = text_after(sizeof(format::TaskResolvePrefix));
      break;
    }
    case format::EventId::task_label:
      event.task = load<format::TaskLabelPrefix>(raw.payload).task;
      event.text = text_after(sizeof(format::TaskLabelPrefix));
      break;
    case format::EventId::context_send: {
      const auto payload = load<format::ContextSendPayload>(raw.payload);
      event.trace_high = payload.trace_high;
      event.trace_low = payload.trace_low;
      event.context_span = payload.span;
      event.context_flags = payload.flags;
      break;
    }
    case format::EventId::context_receive: {
      const auto payload = load<format::ContextReceivePayload>(raw.payload);
      event.trace_high = payload.trace_high;
      event.trace_low = payload.trace_low;
      event.context_span = payload.span;
      event.context_parent = payload.parent;
      event.context_flags = payload.flags;
      break;
    }
    case format::EventId::context_receive_end:
      event.context_span = load<format::ContextReceiveEndPayload>(raw.payload).span;
      break;
    case format::EventId::task_context: {
      const auto payload = load<format::TaskContextPayload>(raw.payload);
      event.task = payload.task;
      event.trace_high = payload.trace_high;
      event.trace_low = payload.trace_low;
      event.context_flags = payload.flags;
      break;
    }
    case format::EventId::cpu_sample: {
      const auto payload = load<format::CpuSamplePrefix>(raw.payload);
      event.sampled_pid = payload.pid;
      event.sampled_tid = payload.tid;
      event.frame_count = payload.frame_count;
      event.frames = raw.payload + sizeof payload;
      const uint8_t* after_frames = event.frames + size_t{payload.frame_count} * sizeof(uint64_t);
      std::memcpy(&event.stack_word_count, after_frames, sizeof event.stack_word_count);
      event.stack_words = after_frames + sizeof event.stack_word_count;
      break;
    }
    case format::EventId::cpu_switch: {
      const auto payload = load<format::CpuSwitchPayload>(raw.payload);
      event.sampled_pid = payload.pid;
      event.sampled_tid = payload.tid;
      event.cpu_state = static_cast<format::CpuState>(payload.state);
      break;
    }
    default:
      break;
  }
  return true;
}

}  // namespace chronicle::reader
