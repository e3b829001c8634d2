// CollectorOptions::append (`chronicle recover`): reopening the stream files of a trace whose
// collector died, each cut back to its last whole packet (plain) or unit (compressed), to go on
// from there.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <vector>

#include "collector/collector.hpp"
#include "compression/ctfz.hpp"
#include "format/input_error.hpp"

namespace chronicle::collector {
namespace {

using format::PacketHeader;

// What a stream's last whole packet says.
struct LastPacket {
  uint64_t stream_instance = 0;
  uint64_t seq = 0;
  uint64_t discarded = 0;
};

// Walks the packet headers of `size` bytes, `read(offset, header)` reading the header at an
// offset (false when it cannot); `whole` gets the bytes up to the last whole packet's end (what
// follows was cut short by the death of the collector that wrote it).
template <typename ReadHeader>
std::optional<LastPacket> last_whole_packet(uint64_t size, uint64_t& whole, ReadHeader read) {
  std::optional<LastPacket> last;
  whole = 0;
  alignas(PacketHeader) uint8_t bytes[sizeof(PacketHeader)];
  while (size - whole >= sizeof bytes) {
    if (!read(whole, bytes)) break;
    const auto& header = *reinterpret_cast<const PacketHeader*>(bytes);
    const uint64_t packet_size = header.packet_size_bits / 8;
    if (header.magic != format::kPacketMagic || packet_size < sizeof bytes || packet_size > size - whole) break;
    last = LastPacket{header.stream_instance_id, header.packet_seq_num.load(std::memory_order_relaxed),
                      header.events_discarded.load(std::memory_order_relaxed)};
    whole += packet_size;
  }
  return last;
}

std::optional<LastPacket> last_whole_packet_in_file(int fd, uint64_t size, uint64_t& whole) {
  return last_whole_packet(size, whole, [fd](uint64_t offset, uint8_t* header) {
    return ::pread(fd, header, sizeof(PacketHeader), static_cast<off_t>(offset)) ==
           static_cast<ssize_t>(sizeof(PacketHeader));
  });
}

std::optional<LastPacket> last_whole_packet_in(std::span<const uint8_t> raw) {
  uint64_t whole = 0;
  return last_whole_packet(raw.size(), whole, [raw](uint64_t offset, uint8_t* header) {
    std::memcpy(header, raw.data() + offset, sizeof(PacketHeader));
    return true;
  });
}

// A compressed stream file: `whole` gets the bytes up to the end of its last unit that decodes
// (a unit cut short, or one that does not decode, at the end is dropped), and the last packet in
// that unit is returned.
std::optional<LastPacket> last_whole_unit(int fd, uint64_t size, uint64_t& whole, const std::string& path) {
  whole = 0;
  if (size == 0) return std::nullopt;
  void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (mapped == MAP_FAILED) throw std::runtime_error(fmt::format("cannot map {}: {}", path, std::strerror(errno)));
  const std::span<const uint8_t> file(static_cast<const uint8_t*>(mapped), size);
  std::vector<compression::UnitProblem> problems;
  std::vector<compression::UnitPlace> units = compression::list_units(file, problems);
  compression::UnitDecoder decoder;
  std::optional<LastPacket> last;
  while (!units.empty() && !last) {
    const compression::UnitPlace& unit = units.back();
    try {
      if (unit.entry.content == compression::UnitContent::packets)
        last = last_whole_packet_in(decoder.decode(file, unit));
    } catch (const compression::UnitError&) {
    }
    if (last) whole = unit.offset + unit.bytes;
    units.pop_back();
  }
  ::munmap(mapped, size);
  return last;
}

}  // namespace

void Collector::reopen_stream_files() {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(files_dir_, error)) {
    const std::string name = entry.path().filename().string();
    const std::string plain = compression::plain_name(name);
    if (plain == "metadata" || plain == "strings" || plain == format::kNoChannelStreamName || name.starts_with("."))
      continue;
    const int fd = ::open(entry.path().c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat info {};
    if (fd < 0 || ::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_uid != ::geteuid() ||
        compression::has_compressed_name(name) != options_.compress) {
      if (fd >= 0) ::close(fd);
      throw format::InputError(fmt::format("{}: not a stream file of this user's trace", entry.path().string()));
    }
    uint64_t whole = 0;
    const uint64_t size = static_cast<uint64_t>(info.st_size);
    const std::optional<LastPacket> last = options_.compress ? last_whole_unit(fd, size, whole, entry.path().string())
                                                             : last_whole_packet_in_file(fd, size, whole);
    if (::ftruncate(fd, static_cast<off_t>(whole)) != 0 || ::lseek(fd, static_cast<off_t>(whole), SEEK_SET) < 0) {
      const int failure = errno;
      ::close(fd);
      throw std::runtime_error(fmt::format("cannot cut back {}: {}", entry.path().string(), std::strerror(failure)));
    }
    names_taken_.insert(name);
    if (!last || streams_.contains(last->stream_instance)) {
      ::close(fd);
      continue;
    }
    StreamFile& stream = streams_[last->stream_instance];
    stream.fd = fd;
    stream.name = name;
    stream.size = whole;
    stream.last_discarded = stream.seen_discarded = last->discarded;
    stream.last_seq_written = last->seq;
    stream.written_before = stream.last_seq_written;
  }
  if (error) throw std::runtime_error(fmt::format("cannot list {}: {}", files_dir_, error.message()));
}

}  // namespace chronicle::collector
