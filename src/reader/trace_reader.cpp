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
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <span>

#include "compression/ctfz.hpp"
#include "reader/run_on_threads.hpp"
#include "reader/trace_directory.hpp"
#include "shm/trace_source.hpp"

namespace chronicle::reader {

TraceError::TraceError(std::string file, uint64_t offset, const std::string& reason)
    : format::InputError(fmt::format("{}: offset {}: {}", file, offset, reason)),
      file_(std::move(file)),
      offset_(offset) {}

// A read-only mapping of a whole file.
class MappedFile {
 public:
  // At most `limit` bytes from the file's start, a file of the trace owned by `owner`
  // (open_readable_file: a regular file of the trace's owner, never through a link).
  // A file past `cap` bytes is refused before it is mapped.
  MappedFile(const std::string& path, uid_t owner, uint64_t limit = UINT64_MAX,
             const std::function<void(uint64_t)>& cap = nullptr)
      : path_(path) {
    const ReadableFile file = open_readable_file(path, owner);
    if (!file) throw TraceError(path, 0, file.problem());
    if (cap) cap(file.size());
    size_ = std::min(file.size(), limit);
    if (size_ > 0) {
      void* mapped = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
      if (mapped == MAP_FAILED) throw TraceError(path, 0, fmt::format("cannot map: {}", std::strerror(errno)));
      data_ = static_cast<const uint8_t*>(mapped);
      madvise(mapped, size_, MADV_SEQUENTIAL);
    }
  }
  ~MappedFile() {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
  }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // Lets go of the whole pages of [from, to): they leave the process's resident memory, and a
  // later read maps them again from the page cache or the file. Nothing else changes (the
  // mapping is private and never written), so any thread may call it for any range.
  void release(uint64_t from, uint64_t to) const {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t first = (from + page - 1) / page * page;
    const uint64_t end = std::min(to, size_) / page * page;
    if (end > first) madvise(const_cast<uint8_t*>(data_) + first, end - first, MADV_DONTNEED);
  }
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

// One of a stream's files (a stream has one per chunk that has one, oldest first), and how many
// bytes of it may be read (UINT64_MAX: all).
struct Trace::ListedFile {
  std::string path;
  uint64_t limit = UINT64_MAX;
};

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

// A stream file as the reader maps it. A compressed one has its seek table.
struct Trace::StreamFile {
  std::unique_ptr<MappedFile> mapped;
  bool compressed = false;
  std::vector<compression::UnitPlace> units;

  std::span<const uint8_t> bytes() const { return {mapped->data(), mapped->size()}; }
  // Its size as a plain file.
  uint64_t decoded_size() const {
    if (!compressed) return mapped->size();
    return units.empty() ? 0 : units.back().raw_offset + units.back().entry.raw_size;
  }
};

// How far a reader of a stream's files has gone: the pages behind it are let go every
// kReleaseStep bytes (of the mapped file: the compressed bytes of a .ctfz).
constexpr uint64_t kReleaseStep = 4 << 20;

struct ReleasedBehind {
  const MappedFile* file = nullptr;
  uint64_t released = 0;  // the pages from where the reader came into the file up to here were let go

  // The reader is at `offset` of `next`. What it lets go of in a file starts where it came in: a
  // reader of a later piece of the file (a cursor over a packet range, a window of the check) must
  // not take the pages another is reading before it.
  void at(const MappedFile* next, uint64_t offset) {
    if (next != file) {
      if (file) file->release(released, file->size());
      file = next;
      released = offset;
    }
    if (offset >= released + kReleaseStep) {
      file->release(released, offset);
      released = offset;
    }
  }
  // The reader is done with the file.
  void finish() {
    if (file) file->release(released, file->size());
    file = nullptr;
  }
};

// Where a cursor is: the unit it reads, decoded (a .ctfz), and the pages it has let go.
struct Trace::ReadPosition {
  compression::UnitDecoder decoder;
  uint32_t file = UINT32_MAX;
  uint32_t unit = UINT32_MAX;
  const uint8_t* raw = nullptr;
  ReleasedBehind behind;
};

namespace {

std::string unit_damage(const std::string& reason) {
  return fmt::format("compressed unit: {} (offsets in this file's compressed bytes)", reason);
}

}  // namespace

// A stream file mapped for reading; for a compressed one, its units are listed (those that cannot
// be framed are damage).
std::unique_ptr<Trace::StreamFile> Trace::open_stream_file(const std::string& path, uint64_t committed,
                                                           std::vector<Damage>& damage) const {
  auto file = std::make_unique<StreamFile>();
  file->mapped = std::make_unique<MappedFile>(path, owner_, committed);
  file->compressed = compression::has_compressed_name(path) ||
                     compression::looks_compressed(file->mapped->data(), file->mapped->size());
  if (!file->compressed) return file;
  std::vector<compression::UnitProblem> problems;
  file->units = compression::list_units(file->bytes(), problems);
  for (const compression::UnitProblem& problem : problems)
    damage.push_back({path, problem.offset, problem.bytes, std::nullopt, unit_damage(problem.reason)});
  return file;
}

// One stream's files opened and every packet checked: what open() keeps of it.
struct Trace::IndexedStream {
  StreamInfo info;
  std::vector<std::unique_ptr<StreamFile>> files;
  std::vector<PacketPlace> readable;
  std::vector<uint32_t> event_types;
  std::vector<Damage> damage;
  uint64_t last_discarded = 0;  // the cumulative count of the last packet kept
};

// Bytes of a stream file being indexed: a plain file's mapping, or a unit of a .ctfz decoded.
struct Trace::PacketBytes {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  uint64_t base = 0;                   // where data[0] is in the file's (decoded) bytes
  uint32_t file = 0;                   // in the stream's files
  uint32_t unit = 0;                   // in a .ctfz file's units (0 for a plain file)
  const MappedFile* mapped = nullptr;  // the mapping `data` is, whose pages are let go behind the
                                       // check (null for a decoded unit)
};

// Each stream is checked apart from the others (on a thread of its own when the trace is large),
// and the results are kept in the order of the stream names, as one thread would.
void Trace::index_streams(const std::map<std::string, StreamFiles>& stream_files,
                          const std::map<std::string, uint64_t>* starts, bool live) {
  struct Job {
    StreamFiles files;
    uint64_t start = 0;
    uint64_t bytes = 0;
  };
  std::vector<Job> jobs;
  uint64_t total_bytes = 0;
  for (const auto& [name, files] : stream_files) {
    Job job{files};
    // Read again from where `starts` says: the files before are read already.
    for (size_t k = files.size(); starts && k-- > 0;)
      if (const auto found = starts->find(files[k].path); found != starts->end()) {
        job.files.erase(job.files.begin(), job.files.begin() + static_cast<ptrdiff_t>(k));
        job.start = found->second;
        break;
      }
    for (const ListedFile& listed : job.files) {
      std::error_code size_error;
      const uint64_t size = fs::file_size(listed.path, size_error);
      job.bytes += size_error ? 0 : size;
    }
    total_bytes += job.bytes;
    jobs.push_back(std::move(job));
  }
  std::vector<std::optional<IndexedStream>> results(jobs.size());
  release_pages_ = total_bytes > options_.bytes_kept_mapped;
  // Threads pay for themselves on large traces only. A stream that holds more of the trace than
  // one thread's share has its packets checked on as many threads as its share (a program's main
  // thread often writes a few bytes beside one busy thread).
  const size_t threads = total_bytes < kBytesForThreadedOpen ? 1 : default_thread_count();
  const auto threads_for = [&](const Job& job) -> size_t {
    if (threads == 1) return 1;
    const double share =
        static_cast<double>(threads) * static_cast<double>(job.bytes) / static_cast<double>(total_bytes);
    return std::clamp<size_t>(static_cast<size_t>(share + 0.5), 1, threads);
  };
  const std::vector<std::exception_ptr> failures = run_on_threads(jobs.size(), threads, [&](size_t index) {
    const Job& job = jobs[index];
    results[index] = index_stream(job.files, job.start, starts != nullptr, live, threads_for(job));
  });
  for (size_t index = 0; index < jobs.size(); ++index) {
    if (failures[index]) std::rethrow_exception(failures[index]);
    IndexedStream& stream = *results[index];
    damage_.insert(damage_.end(), stream.damage.begin(), stream.damage.end());
    if (stream.readable.empty()) continue;  // nothing of this stream to show; damage() says why
    streams_.push_back(std::move(stream.info));
    files_.push_back(std::move(stream.files));
    readable_packets_.push_back(std::move(stream.readable));
    packet_event_types_.push_back(std::move(stream.event_types));
  }
}

Trace::IndexedStream Trace::index_stream(const StreamFiles& stream_files, uint64_t start, bool growing, bool live,
                                         size_t threads) const {
  IndexedStream indexed;
  StreamInfo& info = indexed.info;
  std::vector<std::unique_ptr<StreamFile>>& files = indexed.files;
  for (size_t k = 0; k < stream_files.size(); ++k) {
    const std::string& path = stream_files[k].path;
    std::unique_ptr<StreamFile> file;
    try {
      file = open_stream_file(path, stream_files[k].limit, indexed.damage);
    } catch (const TraceError&) {
      std::error_code ignored;
      if (live && !fs::exists(path, ignored)) continue;  // its chunk removed since it was listed
      throw;
    }
    info.files.push_back(path);
    info.bytes += file->decoded_size();
    const uint64_t first = k == 0 ? start : 0;
    const auto file_index = static_cast<uint32_t>(files.size());
    if (!file->compressed) {
      const PacketBytes bytes{
          file->mapped->data(), file->mapped->size(), 0, file_index, 0, release_pages_ ? file->mapped.get() : nullptr};
      index_packets(bytes, first, growing, indexed, threads);
    } else {
      index_units(*file, first, file_index, indexed);
    }
    files.push_back(std::move(file));
  }
  info.path = info.files.empty() ? stream_files.front().path : info.files.front();
  info.events_discarded = indexed.last_discarded;
  return indexed;
}

// Checks the packets of a compressed file's units from the decoded offset `first` on.
void Trace::index_units(const StreamFile& file, uint64_t first, uint32_t file_index, IndexedStream& indexed) const {
  const std::string& path = indexed.info.files[file_index];
  compression::UnitDecoder decoder;
  ReleasedBehind behind;
  for (size_t k = 0; k < file.units.size(); ++k) {
    const compression::UnitPlace& unit = file.units[k];
    if (unit.raw_offset + unit.entry.raw_size <= first) continue;  // read in an earlier round
    if (release_pages_) behind.at(file.mapped.get(), unit.offset);
    if (unit.entry.content != compression::UnitContent::packets) {
      indexed.damage.push_back(
          {path, unit.offset, unit.bytes, std::nullopt, unit_damage("a unit of bytes where packets were expected")});
      continue;
    }
    std::span<const uint8_t> raw;
    try {
      raw = decoder.decode(file.bytes(), unit);
    } catch (const compression::UnitError& failure) {
      indexed.damage.push_back({path, unit.offset, unit.bytes, std::nullopt, unit_damage(failure.what())});
      continue;
    }
    // The collector writes whole packets in a unit: none is being written in one.
    const PacketBytes bytes{raw.data(), raw.size(), unit.raw_offset, file_index, static_cast<uint32_t>(k), nullptr};
    index_packets(bytes, first > unit.raw_offset ? first - unit.raw_offset : 0, false, indexed, 1);
  }
  behind.finish();
}

// How much of a file the check frames, then checks (on threads, packet by packet), then keeps
// at a time: the pages it holds.
constexpr uint64_t kCheckWindow = 16 << 20;

// A framed packet of a window being checked, and what the check found.
struct Trace::CheckedPacket {
  uint64_t offset = 0;  // in `data`
  uint64_t bytes = 0;
  std::string header_problem;   // its header's, but for the discard count (which needs the packet before)
  std::string content_problem;  // its events'
  uint32_t types = 0;
};

// Checks the packets of `bytes` from offset `first` of its data on, and keeps the sound ones. The
// packets of a window are checked on `threads` threads, apart; what they found is taken in order.
void Trace::index_packets(const PacketBytes& bytes, uint64_t first, bool growing, IndexedStream& indexed,
                          size_t threads) const {
  // Named apart, not as a structured binding: clang before 16 cannot capture one in a lambda.
  const uint8_t* const data = bytes.data;
  const uint64_t size = bytes.size;
  const uint64_t base = bytes.base;
  const std::string& path = indexed.info.files[bytes.file];
  ReleasedBehind behind;
  std::vector<CheckedPacket> window;
  uint64_t offset = first;
  while (offset < size) {
    if (bytes.mapped) behind.at(bytes.mapped, offset);
    // Framing: where each packet of the window ends, from its header.
    window.clear();
    std::optional<Damage> unframed;
    for (const uint64_t end = offset + kCheckWindow; offset < size && offset < end;) {
      const uint64_t left = size - offset;
      const std::optional<uint64_t> packet_bytes = format::framed_packet_size(data + offset, left);
      if (!packet_bytes) {
        // The collector appends whole packets: one that ends short is being written now.
        // Else where this packet ends, and so where the next one starts, is unknown: the rest is lost.
        if (!growing)
          unframed = Damage{path, base + offset, left, std::nullopt, format::check_packet_header(data + offset, left)};
        offset = size;
        break;
      }
      window.push_back({offset, *packet_bytes, {}, {}, 0});
      offset += *packet_bytes;
    }
    const auto check = [&](size_t k) {
      CheckedPacket& packet = window[k];
      packet.header_problem = header_problem(data + packet.offset, base + packet.offset);
      if (packet.header_problem.empty())
        packet.content_problem = content_problem(data + packet.offset, base + packet.offset, packet.types);
    };
    const std::vector<std::exception_ptr> failures = run_on_threads(window.size(), threads, check);
    for (const std::exception_ptr& failure : failures)
      if (failure) std::rethrow_exception(failure);
    for (const CheckedPacket& packet : window) keep_checked(bytes, packet, indexed);
    if (unframed) indexed.damage.push_back(std::move(*unframed));
  }
  behind.finish();
}

// A checked packet taken into the index in its stream's order: readable, or damage and why.
void Trace::keep_checked(const PacketBytes& bytes, const CheckedPacket& checked, IndexedStream& indexed) const {
  const uint8_t* packet = bytes.data + checked.offset;
  const auto& header = *reinterpret_cast<const format::PacketHeader*>(packet);
  const uint64_t offset = bytes.base + checked.offset;
  std::string problem = checked.header_problem;
  if (problem.empty() && header.events_discarded.load(std::memory_order_relaxed) < indexed.last_discarded)
    problem = fmt::format("events_discarded decreases (it is cumulative) (at offset {})",
                          offset + offsetof(format::PacketHeader, events_discarded));
  if (problem.empty()) problem = checked.content_problem;
  if (problem.empty()) {
    indexed.readable.push_back({bytes.file, bytes.unit, offset});
    indexed.event_types.push_back(checked.types);
    indexed.last_discarded = header.events_discarded.load(std::memory_order_relaxed);
    indexed.info.thread_id = header.thread_id;
    ++indexed.info.packets;
    return;
  }
  // Its events can still be counted when only the header's other fields are wrong.
  const uint64_t content = format::content_bytes(header);
  std::optional<uint64_t> events;
  if (content >= format::kPacketHeaderSize && content <= checked.bytes) events = format::count_events(packet, content);
  indexed.damage.push_back({indexed.info.files[bytes.file], offset, checked.bytes, events, problem});
}

const uint8_t* Trace::packet_at(size_t stream, size_t packet, std::shared_ptr<ReadPosition>& position) const {
  const PacketPlace& place = readable_packets_[stream][packet];
  const StreamFile& file = *files_[stream][place.file];
  if (!position) position = std::make_shared<ReadPosition>();
  if (!file.compressed) {
    if (release_pages_) position->behind.at(file.mapped.get(), place.offset);
    return file.mapped->data() + place.offset;
  }
  const compression::UnitPlace& unit = file.units[place.unit];
  if (release_pages_) position->behind.at(file.mapped.get(), unit.offset);
  if (position->file != place.file || position->unit != place.unit) {
    position->file = position->unit = UINT32_MAX;
    try {
      position->raw = position->decoder.decode(file.bytes(), unit).data();
    } catch (const compression::UnitError& failure) {
      throw TraceError(streams_[stream].files[place.file], unit.offset,
                       unit_damage(fmt::format("{}, where it decoded when the trace was opened (the file changed)",
                                               failure.what())));
    }
    position->file = place.file;
    position->unit = place.unit;
  }
  return position->raw + (place.offset - unit.raw_offset);
}

// What makes a framed packet's header unreadable (but for its discard count, which needs the
// packet before), or an empty string.
std::string Trace::header_problem(const uint8_t* packet, uint64_t offset) const {
  const std::string problem = format::check_packet_header(packet, std::numeric_limits<size_t>::max());
  if (!problem.empty()) return problem;
  const auto& header = *reinterpret_cast<const format::PacketHeader*>(packet);
  if (header.stream_id != format::kStreamThread)
    return fmt::format("stream id {} where thread events were expected", header.stream_id);
  if (std::memcmp(header.uuid, description_.uuid.data(), 16) != 0)
    return fmt::format("packet uuid differs from the metadata's (at offset {})",
                       offset + offsetof(format::PacketHeader, uuid));
  return {};
}

// What makes a packet's events unreadable, or an empty string. Walks every event as the decoder
// would, so that the cursors never meet a fault after they have handed out part of a packet, and
// notes the packet's event types.
std::string Trace::content_problem(const uint8_t* packet, uint64_t offset, uint32_t& event_types) const {
  const auto& header = *reinterpret_cast<const format::PacketHeader*>(packet);
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

Trace::StreamCursor::StreamCursor(const Trace& trace, size_t index, uint32_t event_types)
    : trace_(trace),
      index_(index),
      packets_(trace.readable_packets_[index]),
      packet_event_types_(trace.packet_event_types_[index]),
      event_types_(event_types),
      end_packet_(packets_.size()) {}

Trace::StreamCursor::StreamCursor(const Trace& trace, size_t index, size_t first_packet, size_t end_packet)
    : StreamCursor(trace, index) {
  end_packet_ = std::min(end_packet, packets_.size());
  next_packet_ = std::min(first_packet, end_packet_);
}

bool Trace::StreamCursor::next_packet() {
  // All types (the default) read every packet, without looking at what the check noted.
  if (event_types_ != ~uint32_t{0})
    while (next_packet_ < end_packet_ && (packet_event_types_[next_packet_] & event_types_) == 0) ++next_packet_;
  if (next_packet_ >= end_packet_) return false;
  const PacketPlace& place = packets_[next_packet_];
  packet_offset_ = place.offset;
  packet_file_ = place.file;
  const uint8_t* packet = trace_.packet_at(index_, next_packet_++, position_);
  const auto& header = *reinterpret_cast<const format::PacketHeader*>(packet);
  packet_.emplace(packet, format::content_bytes(header));
  return true;
}

bool Trace::StreamCursor::next(Event& event) {
  format::RawEvent raw;
  while (true) {
    if (packet_) {
      try {
        if (packet_->next(raw)) break;
      } catch (const format::DecodeError& error) {
        throw TraceError(trace_.streams_[index_].files[packet_file_], packet_offset_ + error.offset(), error.what());
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
