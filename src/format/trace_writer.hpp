// Writes a chronicle trace directory from events given after the fact, each with its own ticks:
// for events that no recorder wrote (spans of other services, read from OTLP/JSON). The files are
// the ones `record` leaves: a stream file per thread, the definitions ("strings") and the metadata
// (make_metadata). Every payload is laid out by the event catalogue, field by field.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

#include "format/catalogue.hpp"
#include "format/metadata.hpp"

namespace chronicle::format {

// One field's value, in the order the catalogue declares the event's fields.
using FieldValue = std::variant<uint64_t, std::string_view>;

class TraceWriter {
 public:
  explicit TraceWriter(TraceDescription description);

  // A site for spans, instants or notes; returns its id (1, 2, ...). The same category, name and
  // kind give the same id.
  uint32_t define_site(SiteKind kind, std::string_view category, std::string_view name);
  void define_thread(uint32_t thread_id, std::string_view name);

  // Appends an event to thread `thread_id`'s stream. Ticks must not go backwards in a stream;
  // throws std::logic_error when they do, or when `fields` do not match the catalogue's.
  void add(uint32_t thread_id, EventId id, uint64_t ticks, std::initializer_list<FieldValue> fields);

  // The most bytes a packet of a thread's stream holds (1 MiB by default); less makes a trace of
  // many packets out of few events, for the readers' tests.
  void set_packet_bytes(size_t bytes) { packet_bytes_ = bytes; }

  // Writes the trace into `directory`, which must not exist (it is made with mode 0700).
  void write(const std::string& directory);

  const TraceDescription& description() const { return description_; }

 private:
  struct Stream {
    std::vector<uint8_t> bytes;  // closed packets, then the open one
    size_t open_packet = 0;      // where the open packet begins in bytes
    bool has_open_packet = false;
    uint64_t packet_begin = 0;
    uint64_t last_ticks = 0;
    uint64_t packets = 0;
  };
  void open_packet(Stream& stream, uint32_t stream_id, uint64_t instance, uint32_t thread_id, uint64_t ticks);
  void close_packet(Stream& stream);
  void append_event(Stream& stream, uint32_t id, uint64_t ticks, const std::string& payload);

  TraceDescription description_;
  size_t packet_bytes_;
  std::map<uint32_t, Stream> threads_;
  Stream strings_;
  std::map<std::tuple<uint8_t, std::string, std::string>, uint32_t> sites_;
  std::vector<std::string> definitions_;  // encoded, with their event ids
  std::vector<uint32_t> definition_ids_;
};

}  // namespace chronicle::format
