#include "format/trace_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace chronicle::format {
namespace {

// Packets are cut at this size, as the recorder's ring slots cut them (readers map a packet at
// a time; babeltrace2 is happier with many small ones than one large).
constexpr size_t kPacketBytes = 1 << 20;

// The payload of `spec` with `values`, field by field as the catalogue declares them (the byte
// order of the metadata: little-endian).
std::string encode_payload(const EventSpec& spec, std::initializer_list<FieldValue> values) {
  if (values.size() != spec.fields.size())
    throw std::logic_error(fmt::format("{}: {} values for {} fields", spec.name, values.size(), spec.fields.size()));
  std::string out;
  const FieldValue* value = values.begin();
  for (const FieldSpec& field : spec.fields) {
    const FieldValue& given = *value++;
    if (field.type == FieldType::string) {
      const auto* text = std::get_if<std::string_view>(&given);
      if (!text) throw std::logic_error(fmt::format("{}.{} is a string", spec.name, field.name));
      for (char c : *text) out.push_back(c == '\0' ? ' ' : c);  // a NUL would end the field
      out.push_back('\0');
      continue;
    }
    const auto* number = std::get_if<uint64_t>(&given);
    if (!number) throw std::logic_error(fmt::format("{}.{} is an integer", spec.name, field.name));
    for (size_t byte = 0; byte < field_size(field.type); ++byte)
      out.push_back(static_cast<char>(*number >> (8 * byte)));
  }
  return out;
}

void write_file(const std::string& path, const void* data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd, bytes, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      const int error = errno;
      ::close(fd);
      throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(error)));
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
  if (::close(fd) != 0) throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
}

}  // namespace

TraceWriter::TraceWriter(TraceDescription description)
    : description_(std::move(description)), packet_bytes_(kPacketBytes) {
  open_packet(strings_, kStreamStrings, 0, 0, description_.clock.ticks_at_start);
}

void TraceWriter::open_packet(Stream& stream, uint32_t stream_id, uint64_t instance, uint32_t thread_id,
                              uint64_t ticks) {
  PacketHeader header{};
  header.magic = kPacketMagic;
  std::memcpy(header.uuid, description_.uuid.data(), 16);
  header.stream_id = stream_id;
  header.stream_instance_id = instance;
  header.timestamp_begin = ticks;
  header.timestamp_end.store(ticks, std::memory_order_relaxed);
  header.packet_seq_num.store(stream.packets, std::memory_order_relaxed);
  header.thread_id = thread_id;
  header.pid = static_cast<uint32_t>(description_.pid);
  stream.open_packet = stream.bytes.size();
  stream.bytes.resize(stream.bytes.size() + kPacketHeaderSize);
  std::memcpy(stream.bytes.data() + stream.open_packet, static_cast<const void*>(&header), sizeof header);
  stream.has_open_packet = true;
  stream.packet_begin = ticks;
  stream.last_ticks = ticks;
}

// Sets the open packet's sizes and end time (in bits, as CTF wants) and pads it to the packet
// alignment.
void TraceWriter::close_packet(Stream& stream) {
  if (!stream.has_open_packet) return;
  const uint64_t content = stream.bytes.size() - stream.open_packet;
  const uint64_t padded = padded_packet_size(content);
  stream.bytes.resize(stream.open_packet + padded, 0);
  auto* header = reinterpret_cast<PacketHeader*>(stream.bytes.data() + stream.open_packet);
  header->timestamp_end.store(stream.last_ticks, std::memory_order_relaxed);
  header->content_size_bits.store(content * 8, std::memory_order_relaxed);
  header->packet_size_bits = padded * 8;
  stream.has_open_packet = false;
  ++stream.packets;
}

void TraceWriter::append_event(Stream& stream, uint32_t id, uint64_t ticks, const std::string& payload) {
  const bool compact = takes_compact_header(id, ticks - stream.last_ticks);
  std::vector<uint8_t>& bytes = stream.bytes;
  const size_t at = bytes.size();
  bytes.resize(at + (compact ? kCompactHeaderSize : kExtendedHeaderSize));
  write_event_header(bytes.data() + at, compact, id, ticks);
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  stream.last_ticks = ticks;
}

uint32_t TraceWriter::define_site(SiteKind kind, std::string_view category, std::string_view name) {
  const auto [found, added] = sites_.try_emplace({static_cast<uint8_t>(kind), std::string(category), std::string(name)},
                                                 static_cast<uint32_t>(sites_.size() + 1));
  if (!added) return found->second;
  const EventSpec* spec = find_event(kStreamStrings, static_cast<uint32_t>(DefinitionId::site));
  append_event(strings_, spec->id, description_.clock.ticks_at_start,
               encode_payload(*spec, {uint64_t{found->second}, uint64_t{static_cast<uint8_t>(kind)}, category, name,
                                      std::string_view(), uint64_t{0}}));
  return found->second;
}

void TraceWriter::define_thread(uint32_t thread_id, std::string_view name) {
  const EventSpec* spec = find_event(kStreamStrings, static_cast<uint32_t>(DefinitionId::thread));
  append_event(strings_, spec->id, description_.clock.ticks_at_start,
               encode_payload(*spec, {uint64_t{thread_id}, name}));
}

void TraceWriter::add(uint32_t thread_id, EventId id, uint64_t ticks, std::initializer_list<FieldValue> fields) {
  const EventSpec* spec = find_event(kStreamThread, static_cast<uint32_t>(id));
  if (!spec) throw std::logic_error(fmt::format("event id {} is not in the catalogue", static_cast<uint32_t>(id)));
  const std::string payload = encode_payload(*spec, fields);
  Stream& stream = threads_[thread_id];
  if (stream.has_open_packet && ticks < stream.last_ticks)
    throw std::logic_error(
        fmt::format("thread {}: {} at tick {} after tick {}", thread_id, spec->name, ticks, stream.last_ticks));
  if (stream.has_open_packet &&
      stream.bytes.size() - stream.open_packet + kExtendedHeaderSize + payload.size() > packet_bytes_)
    close_packet(stream);
  if (!stream.has_open_packet)
    open_packet(stream, kStreamThread, thread_id, thread_id, std::max(ticks, stream.last_ticks));
  append_event(stream, spec->id, ticks, payload);
}

void TraceWriter::write(const std::string& directory) {
  if (::mkdir(directory.c_str(), 0700) != 0)
    throw std::runtime_error(fmt::format("cannot create {}: {}", directory, std::strerror(errno)));
  close_packet(strings_);
  write_file(directory + "/strings", strings_.bytes.data(), strings_.bytes.size());
  for (auto& [thread_id, stream] : threads_) {
    close_packet(stream);
    write_file(fmt::format("{}/thread-{}", directory, thread_id), stream.bytes.data(), stream.bytes.size());
  }
  const std::string metadata = make_metadata(description_);
  write_file(directory + "/metadata", metadata.data(), metadata.size());
}

}  // namespace chronicle::format
