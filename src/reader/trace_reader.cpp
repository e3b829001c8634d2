// Opening a trace: its chunks and stream files listed, its metadata and definitions read, and
// what it says of itself. The packet index is in trace_packets.cpp, event decoding in
// trace_events.cpp.
#include "reader/trace_reader.hpp"

#include <sys/stat.h>

#include <fmt/format.h>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <optional>

#include "compression/ctfz.hpp"
#include "reader/trace_directory.hpp"
#include "reader/trace_reader_internal.hpp"
#include "shm/trace_source.hpp"

namespace chronicle::reader {

TraceError::TraceError(std::string file, uint64_t offset, const std::string& reason)
    : format::InputError(fmt::format("{}: offset {}: {}", file, offset, reason)),
      file_(std::move(file)),
      offset_(offset) {}

namespace {

using trace_internal::load;

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

Trace::Trace(const std::string& directory, const OpenOptions& options) : directory_(directory), options_(options) {
  open(nullptr, nullptr);
}

Trace::Trace(const std::string& directory, const std::map<std::string, uint64_t>& starts) : directory_(directory) {
  open(&starts, nullptr);
}

Trace::Trace(const std::string& directory, const std::map<std::string, uint64_t>& starts,
             const CommittedFiles& committed)
    : directory_(directory) {
  open(&starts, &committed);
}

namespace {

namespace fs = std::filesystem;

// A file of the trace by its plain name ("metadata", "strings"), plain or compressed: its path,
// or "" when the directory has neither.
std::string find_file(const std::string& directory, std::string_view name) {
  std::error_code error;
  const fs::path plain = fs::path(directory) / name;
  if (fs::exists(fs::symlink_status(plain, error))) return plain.string();
  const fs::path compressed = fs::path(directory) / (std::string(name) + std::string(compression::kSuffix));
  if (fs::exists(fs::symlink_status(compressed, error))) return compressed.string();
  return {};
}

// A file the reader holds whole in memory (the metadata, the definitions), and the most it may
// cost, as said in refusals: "16 MiB a metadata may hold".
struct SmallFile {
  uint64_t cap = 0;
  const char* cap_text = "";
};
constexpr SmallFile kMetadataFile{kMaxMetadataBytes, "16 MiB a metadata may hold"};
constexpr SmallFile kDefinitionsFile{kMaxDefinitionsBytes, "256 MiB a definitions file may hold"};
static_assert(kMaxMetadataBytes == 16 << 20 && kMaxDefinitionsBytes == 256 << 20, "the texts above say the caps");

void refuse_past_cap(const std::string& path, uint64_t size, const SmallFile& kind) {
  if (size > kind.cap) throw TraceError(path, 0, fmt::format("{} bytes, more than the {}", size, kind.cap_text));
}

// A compressed file's content, decoded whole into memory. A unit that does not decode makes the
// file unreadable; units that claim more than the file's cap are refused before any is decoded.
std::vector<uint8_t> decode_small_file(const std::string& path, const uint8_t* data, uint64_t size,
                                       const SmallFile& kind) {
  std::vector<uint8_t> raw;
  std::vector<compression::UnitProblem> problems;
  try {
    compression::decode_file(
        {data, size}, [&raw](std::span<const uint8_t> unit) { raw.insert(raw.end(), unit.begin(), unit.end()); },
        problems, kind.cap);
  } catch (const compression::FileCapError&) {
    throw TraceError(path, 0, fmt::format("decodes to more than the {}", kind.cap_text));
  }
  if (!problems.empty()) throw TraceError(path, problems.front().offset, problems.front().reason);
  return raw;
}

}  // namespace

bool Trace::rotated() const {
  return chunks_.size() > 1 || chunks_.front() != directory_;
}

void Trace::open(const std::map<std::string, uint64_t>* starts, const CommittedFiles* committed) {
  const std::string& directory = directory_;
  std::error_code error;
  if (!fs::is_directory(directory, error)) throw TraceError(directory, 0, "not a directory");
  owner_ = trace_owner(directory);
  chunks_ = trace_chunks(directory);
  cut_ = shm::find_cut(directory);
  if (rotated()) first_chunk_number_ = chunk_number(fs::path(chunks_.front()).filename().string());
  read_metadata();
  read_definitions();
  // A rotated trace's top directory holds chunks, not streams: a link there is named here.
  if (rotated())
    for (const std::string& link : linked_entries(directory))
      damage_.push_back({link, 0, 0, std::nullopt, kLinkedDirectory});
  const std::map<std::string, StreamFiles> stream_files = list_stream_files(committed, damage_);
  index_streams(stream_files, starts, committed != nullptr);
  if (streams_.empty() && !damage_.empty())
    throw TraceError(damage_.front().file, damage_.front().offset,
                     damage_.front().reason + " (nothing readable is left in the trace)");
}

// Stream files by plain name, each with its file in every chunk that has one, oldest first. For
// a trace being written (`committed`), only what its collector has written whole; a chunk or a
// file removed while it is listed (record --max-size) is left out.
std::map<std::string, Trace::StreamFiles> Trace::list_stream_files(const CommittedFiles* committed,
                                                                   std::vector<Damage>& skipped) const {
  const bool rotated = this->rotated();
  const uint64_t writing =
      committed && rotated && !committed->writing_chunk.empty() ? chunk_number(committed->writing_chunk) : 0;
  std::map<std::string, StreamFiles> stream_files;
  for (const std::string& chunk : chunks_) {
    const std::string chunk_name = rotated ? fs::path(chunk).filename().string() : std::string();
    const uint64_t number = rotated ? chunk_number(chunk_name) : 0;
    if (writing > 0 && number > writing) continue;  // begun since the collector said where it was
    const bool being_written = committed && number == writing;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(chunk, error)) {
      const std::string name = entry.path().filename().string();
      const std::string plain = compression::plain_name(name);
      if (plain == "metadata" || plain == "strings" || name.starts_with(".")) continue;
      // Subdirectories are other processes' traces. Anything else that is not a regular file of
      // the trace's owner (a FIFO, a link planted to a file its reader may read, another user's
      // file) is named and skipped, never read through or waited on.
      std::error_code status_error;
      const fs::file_status status = entry.symlink_status(status_error);
      if (fs::is_directory(status)) continue;
      if (committed && status_error == std::errc::no_such_file_or_directory) continue;
      const ReadableFile readable = open_readable_file(entry.path().string(), owner_);
      if (!readable) {
        if (committed && !fs::exists(fs::symlink_status(entry.path(), status_error))) continue;
        struct stat link {};
        const uint64_t bytes = ::lstat(entry.path().c_str(), &link) == 0 ? static_cast<uint64_t>(link.st_size) : 0;
        skipped.push_back({entry.path().string(), 0, bytes, std::nullopt, readable.problem()});
        continue;
      }
      if (readable.size() == 0) continue;
      uint64_t limit = UINT64_MAX;
      if (being_written) {
        const auto found = committed->sizes.find(chunk_name.empty() ? name : chunk_name + "/" + name);
        if (found == committed->sizes.end()) continue;  // created since
        limit = found->second;
      }
      stream_files[plain].push_back({entry.path().string(), limit});
    }
    if (error && committed && !fs::exists(chunk)) continue;
    if (error) throw TraceError(chunk, 0, fmt::format("cannot list: {}", error.message()));
  }
  return stream_files;
}

// The newest chunk's metadata: its clock is the most refined, its losses the latest.
void Trace::read_metadata() {
  std::string metadata_path;
  for (auto chunk = chunks_.rbegin(); chunk != chunks_.rend() && metadata_path.empty(); ++chunk)
    metadata_path = find_file(*chunk, "metadata");
  if (metadata_path.empty()) metadata_path = chunks_.back() + "/metadata";  // its absence is the error
  {
    const MappedFile metadata(metadata_path, owner_, UINT64_MAX,
                              [&](uint64_t size) { refuse_past_cap(metadata_path, size, kMetadataFile); });
    if (compression::has_compressed_name(metadata_path)) {
      const std::vector<uint8_t> text =
          decode_small_file(metadata_path, metadata.data(), metadata.size(), kMetadataFile);
      metadata_text_.assign(text.begin(), text.end());
    } else {
      metadata_text_.assign(reinterpret_cast<const char*>(metadata.data()), metadata.size());
    }
    try {
      description_ = format::parse_metadata(metadata_text_);
    } catch (const std::exception& parse_error) {
      throw TraceError(metadata_path, 0, parse_error.what());
    }
  }
  const format::ClockOffset offset = format::clock_offset(description_.clock);
  if (__builtin_mul_overflow(offset.seconds, int64_t{1'000'000'000}, &clock_base_ns_))
    throw TraceError(metadata_path, 0, fmt::format("clock offset of {} s is out of range", offset.seconds));
  clock_offset_ticks_ = offset.ticks;
}

// The newest chunk's definitions: each chunk holds every definition made until it closed.
void Trace::read_definitions() {
  for (auto chunk = chunks_.rbegin(); chunk != chunks_.rend(); ++chunk) {
    const std::string path = find_file(*chunk, "strings");
    if (path.empty()) continue;
    // Names what is not a regular file of the trace's owner.
    const MappedFile file(path, owner_, UINT64_MAX,
                          [&](uint64_t size) { refuse_past_cap(path, size, kDefinitionsFile); });
    if (file.size() == 0) continue;
    if (compression::has_compressed_name(path))
      definitions_bytes_ = decode_small_file(path, file.data(), file.size(), kDefinitionsFile);
    else
      definitions_bytes_.assign(file.data(), file.data() + file.size());
    load_definitions(path, definitions_bytes_.data(), definitions_bytes_.size());
    return;
  }
}

Trace::~Trace() = default;
Trace::Trace(Trace&&) noexcept = default;

void Trace::load_definitions(const std::string& path, const uint8_t* data, uint64_t size) {
  uint64_t offset = 0;
  while (offset < size) {
    const std::string problem = format::check_packet_header(data + offset, size - offset);
    if (!problem.empty()) throw TraceError(path, offset, problem);
    const auto& header = *reinterpret_cast<const format::PacketHeader*>(data + offset);
    if (header.stream_id != format::kStreamStrings)
      throw TraceError(path, offset, fmt::format("stream id {} in the definitions file", header.stream_id));
    try {
      format::PacketDecoder decoder(data + offset, format::content_bytes(header));
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
          if (site.id == 0 || site.id > size)
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
  if (cut_) lines.push_back(shm::describe_cut(directory_, *cut_));
  if (const uint64_t discarded = events_discarded(); discarded > 0)
    lines.push_back(fmt::format("{} events discarded (not in the trace)", discarded));
  if (const std::string losses = format::describe_losses(description_.losses); !losses.empty())
    lines.push_back("lost: " + losses);
  for (const Damage& stretch : damage_) lines.push_back("damaged, skipped: " + describe(stretch));
  if (first_chunk_number_ > 1)
    lines.push_back(fmt::format("the trace begins at its chunk {}: the {} before were removed (record --max-size)",
                                first_chunk_number_, first_chunk_number_ - 1));
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

}  // namespace chronicle::reader
