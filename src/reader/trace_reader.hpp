// Reads a chronicle trace directory (CTF 1.8 as chronicle writes it): metadata, definitions,
// and the thread streams' events, per stream or merged in time order.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "format/catalogue.hpp"
#include "format/input_error.hpp"
#include "format/metadata.hpp"
#include "format/packet_decoder.hpp"
#include "reader/span_pairing.hpp"
#include "shm/trace_source.hpp"

namespace chronicle::reader {

// Bad input: which file, at which byte offset, and what is wrong.
class TraceError : public format::InputError {
 public:
  TraceError(std::string file, uint64_t offset, const std::string& reason);
  const std::string& file() const { return file_; }
  uint64_t offset() const { return offset_; }

 private:
  std::string file_;
  uint64_t offset_;
};

struct Site {
  uint32_t id = 0;
  format::SiteKind kind = format::SiteKind::span;
  std::string category;
  std::string name;
  std::string file;
  uint32_t line = 0;
};

struct Event {
  format::EventId type = format::EventId::instant;
  uint64_t ticks = 0;
  uint32_t thread_id = 0;
  uint32_t stream = 0;      // index into Trace::streams()
  uint32_t name_id = 0;     // the site; for span_end, in for_each_event, the begin's it pairs with (else
                            // the end's own); for task_create, the task's name; for an attribute, its
                            // key's; 0 for other task events
  uint32_t depth = 0;       // for_each_event: spans open in the event's task (or thread) before it
  int64_t value = 0;        // counter, attribute_int, attribute_bool (0, 1)
  uint64_t value_uint = 0;  // attribute_uint
  double value_float = 0;   // counter_float, attribute_float
  std::string_view text;    // note, task_resolve, task_label, attribute_string, span_status, context_tracestate
  // attribute_*, span_status: the site of the span (or instant) they belong to; 0: the innermost
  // open span (layout.hpp). For_each_event sets `span` to it when it is open.
  uint32_t span_site = 0;
  format::SpanStatus status = format::SpanStatus::ok;  // span_status
  // Task events (chronicle/task.hpp).
  uint64_t task = 0;
  uint64_t related_task = 0;  // task_create: parent; task_wait: awaited; task_resolve: resolver
  format::TaskKind task_kind = format::TaskKind::unknown;  // task_create
  format::TaskOutcome outcome = format::TaskOutcome::ok;   // task_resolve
  // Context events (chronicle/context.hpp): context_send, context_receive(_end), task_context.
  uint64_t trace_high = 0;  // the W3C trace id, as two big-endian halves
  uint64_t trace_low = 0;
  uint64_t context_span = 0;    // send: the send's span id; receive, receive_end: the receive's
  uint64_t context_parent = 0;  // receive: the sender's span id (0: the message carried none);
                                // span_context: the span's parent
  uint8_t context_flags = 0;
  uint8_t span_kind = 0;  // span_context: OTLP's SpanKind
  // The sampler's events (written by the session's control thread about other threads):
  // cpu_sample, cpu_switch name the thread they are about.
  uint32_t sampled_pid = 0;
  uint32_t sampled_tid = 0;
  format::CpuState cpu_state = format::CpuState::running;  // cpu_switch
  uint32_t frame_count = 0;                                // cpu_sample: frame(0) innermost
  const uint8_t* frames = nullptr;                         // unaligned u64s in the trace's bytes
  uint64_t frame(size_t index) const { return unaligned_u64(frames, index); }
  uint32_t stack_word_count = 0;  // cpu_sample: words of the stack from its pointer
  const uint8_t* stack_words = nullptr;
  uint64_t stack_word(size_t index) const { return unaligned_u64(stack_words, index); }
  static uint64_t unaligned_u64(const uint8_t* words, size_t index) {
    uint64_t word;
    std::memcpy(&word, words + index * sizeof word, sizeof word);
    return word;
  }
  // for_each_event: the span a span_begin opens or a span_end closes (span_pairing.hpp); null for
  // other events, an end that pairs with nothing, and in per-stream iteration.
  const PairedSpan* span = nullptr;
};

// An ELF object of the traced process (a module definition), to symbolise its samples with.
struct ModuleMap {
  uint64_t base = 0;   // load bias
  uint64_t start = 0;  // code mapped at [start, end)
  uint64_t end = 0;
  std::string build_id;  // hex; "" when none
  std::string path;
};

struct StreamInfo {
  std::string path;  // its first file (a rotated trace has one per chunk: `files`)
  std::vector<std::string> files;
  uint32_t thread_id = 0;
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t events_discarded = 0;  // the stream's cumulative count (its last packet's)
};

// A stretch of a stream file the reader could not use and skipped: one damaged packet, or the
// rest of the file from a packet whose size frames nothing.
// What a trace's small files may cost: each is read whole into memory (decoded, for a .ctfz), so
// a larger one (a sparse 4 GiB file costs no disk) is refused before it is read
// (docs/guarantees.md).
inline constexpr uint64_t kMaxMetadataBytes = uint64_t{16} << 20;
inline constexpr uint64_t kMaxDefinitionsBytes = uint64_t{256} << 20;

struct Damage {
  std::string file;
  uint64_t offset = 0;                  // where the skipped bytes begin: a packet's start
  uint64_t bytes = 0;                   // how many were skipped
  std::optional<uint64_t> events_lost;  // when the skipped packet could still be counted
  std::string reason;                   // what was wrong (with the offset of the fault when it is inside the packet)
};

// "FILE: offset N: skipped B bytes (E events lost): reason".
std::string describe(const Damage& damage);

class MappedFile;

// A compressed (.ctfz) stream file is read a unit at a time: open() decodes each unit to check
// its packets, and keeps where each unit and packet is; a cursor decodes a unit again when it
// comes to its packets and keeps that unit only. A reader holds, beyond the index, one decoded
// unit per cursor (about 1 MiB) and nothing on disk.
//
// A trace whose stream files total this many bytes has its streams checked on several threads
// when it is opened (one stream per thread at a time); a smaller one on the caller's.
inline constexpr uint64_t kBytesForThreadedOpen = 16 << 20;

// A trace whose stream files total more than this many bytes has their pages let go behind the
// reader, a few MiB at a time, when it checks them at open and when a cursor reads them: its
// resident memory does not grow with the trace. Mapping the pages again costs the read pass about
// a quarter more CPU (on this VM), so a smaller trace stays mapped while the Trace lives.
inline constexpr uint64_t kBytesKeptMapped = uint64_t{256} << 20;

struct OpenOptions {
  uint64_t bytes_kept_mapped = kBytesKeptMapped;
};

// What the collector of a trace still being written has written whole (collector::Collector::
// committed_sizes, writing_chunk): what a reader may map while it writes.
struct CommittedFiles {
  // By path under the trace's directory ("thread-7", "chunk-000003/thread-7.ctfz"): the bytes of
  // whole packets (or units) in the stream files of the chunk being written.
  std::map<std::string, uint64_t> sizes;
  // A rotated trace: the chunk being written ("chunk-000003"). The files of the chunks before it
  // are whole; the chunks after it had not begun.
  std::string writing_chunk;
};

// Where an event is in its stream, for Trace::StreamCursor::seek: 24 bytes, so that a pass can
// come back later to a few of a stream's events and pass over the rest without decoding them.
struct EventMark {
  uint64_t ticks = 0;   // its raw event's time: a compact header read with it as the time before gives it again
  uint32_t packet = 0;  // of the stream's readable packets
  uint32_t offset = 0;  // of its raw event in the packet
  uint32_t part = 0;    // of a compound event, which of the events it stands for
};

class Trace {
 public:
  // Opens and checks the directory: metadata, definitions and every packet of the streams. A
  // damaged packet is skipped and listed in damage(); a stream with no readable packet is left
  // out of streams(). Throws TraceError on malformed metadata or definitions, and when the
  // streams hold damage and nothing readable.
  explicit Trace(const std::string& directory);
  Trace(const std::string& directory, const OpenOptions& options);
  // The same for a trace still being written, read again in rounds: a stream whose file `starts`
  // names is read from the offset it gives (the start of a packet) in that file, its files in
  // earlier chunks left out; a stream it does not name, from its first file's start. A packet
  // not yet whole at a file's end is left for the next round, not taken as damage.
  Trace(const std::string& directory, const std::map<std::string, uint64_t>& starts);
  // The same, reading no stream file past what its writer has committed: a file of the chunk
  // being written that `committed` does not name (created since), and the chunks begun since,
  // are not read. The collector may cut back a packet it failed to write past that size, and a
  // mapping of the cut pages would fault (SIGBUS) when read. A chunk or file removed meanwhile
  // (record --max-size) is left out, not taken as an error.
  Trace(const std::string& directory, const std::map<std::string, uint64_t>& starts, const CommittedFiles& committed);
  ~Trace();
  Trace(Trace&&) noexcept;

  const std::string& directory() const { return directory_; }
  // Whose the trace is (its directory's owner): every file read of it is a regular file of theirs.
  uid_t owner() const { return owner_; }
  const format::TraceDescription& description() const { return description_; }
  const std::vector<StreamInfo>& streams() const { return streams_; }
  // The packets of stream `stream` that cursors read (those that decoded when it was opened).
  size_t readable_packet_count(size_t stream) const { return readable_packets_[stream].size(); }
  const Site* site(uint32_t id) const;
  const std::vector<Site>& sites() const { return sites_; }
  std::string thread_name(uint32_t thread_id) const;
  // The process's modules, in the order they were defined (the sampler's, docs/profiling.md).
  const std::vector<ModuleMap>& modules() const { return modules_; }
  uint64_t events_discarded() const;
  // What the reader skipped, by file and offset.
  const std::vector<Damage>& damage() const { return damage_; }
  // What a reader must be told before trusting the picture, one line each: the trace was cut
  // (cut()), events discarded, events lost before any packet counted them, stretches skipped as
  // damaged, the oldest chunks of a rotated trace removed. Empty when the trace is whole.
  std::vector<std::string> warnings() const;
  // Its writer died before it finished it (shm/trace_source.hpp), as found when it was opened.
  const std::optional<shm::CutTrace>& cut() const { return cut_; }

  // A rotated trace (record --rotate): its chunk directories, oldest first, and the number of the
  // first (chunks before it were removed under --max-size). Else the trace's directory, and 1.
  const std::vector<std::string>& chunks() const { return chunks_; }
  uint64_t first_chunk_number() const { return first_chunk_number_; }
  // The metadata's text and the definitions' bytes, as the files hold them (decompressed): for
  // `chronicle convert`.
  const std::string& metadata_text() const { return metadata_text_; }
  const std::vector<uint8_t>& definitions_bytes() const { return definitions_bytes_; }
  // Calls `visit(const uint8_t* packet, uint64_t bytes)` for each sound packet of stream `index`,
  // in order, as its file holds it.
  template <typename Visitor>
  void for_each_packet(size_t index, Visitor&& visit) const;

  int64_t to_unix_ns(uint64_t ticks) const;
  // Wall time as "YYYY-MM-DD HH:MM:SS.nnnnnnnnn" (UTC).
  std::string format_time(uint64_t ticks) const;

  // Calls `visit(const Event&)` for each event of stream `index` in order; stops when it
  // returns false.
  template <typename Visitor>
  void for_each_in_stream(size_t index, Visitor&& visit) const;
  // The same, over only the packets that hold an event of one of `event_types` (bits
  // format::event_type_bit of format::EventId), known since the trace was opened: the other
  // events of those packets are visited too. For a pass that looks for rare events.
  template <typename Visitor>
  void for_each_in_stream_packets_holding(size_t index, uint32_t event_types, Visitor&& visit) const;
  // The event types stream `index` holds (bits format::event_type_bit), known since the trace was
  // opened.
  uint32_t event_types(size_t index) const;

  // Every thread-stream event in time order (ties: stream order), with its span pairing (Event::span,
  // name_id and depth of span events). Stops when `visit` returns false.
  template <typename Visitor>
  void for_each_event(Visitor&& visit) const;
  // The same with the caller's pairing, to ask it afterwards what stayed open or unpaired.
  template <typename Visitor>
  void for_each_event(SpanPairing& pairing, Visitor&& visit) const;
  // The events [first, end) of each stream's `ranges[stream]` (by their place in the stream: 0,
  // 1, ...; ranges in order, apart), merged and paired as for_each_event merges and pairs all:
  // the pairing follows only these. A range's `mark` is where its first event is
  // (StreamCursor::mark() when it was read): the events between ranges are passed over without
  // being decoded. Calls `visit(event, place)`.
  struct EventRange {
    uint64_t first = 0;
    uint64_t end = 0;
    EventMark mark;
  };
  using EventRanges = std::vector<EventRange>;
  template <typename Visitor>
  void for_each_event_in(SpanPairing& pairing, const std::vector<EventRanges>& ranges, Visitor&& visit) const;

  class StreamCursor;

 private:
  // The merge of for_each_event and for_each_event_in: `sources[stream].next(event)` gives each
  // stream's events, `visit(event, source)` is called after the pairing followed the event.
  template <typename Source, typename Visitor>
  static void merge_streams(std::vector<Source>& sources, SpanPairing& pairing, Visitor&& visit);
  void open(const std::map<std::string, uint64_t>* starts, const CommittedFiles* committed);
  struct ListedFile;
  using StreamFiles = std::vector<ListedFile>;
  bool rotated() const;
  // Files that are not the trace's own (open_readable_file) are left out, each added to `skipped`.
  std::map<std::string, StreamFiles> list_stream_files(const CommittedFiles* committed,
                                                       std::vector<Damage>& skipped) const;
  void read_metadata();
  void read_definitions();
  void load_definitions(const std::string& path, const uint8_t* data, uint64_t size);
  struct IndexedStream;
  void index_streams(const std::map<std::string, StreamFiles>& stream_files,
                     const std::map<std::string, uint64_t>* starts, bool live);
  IndexedStream index_stream(const StreamFiles& files, uint64_t start, bool growing, bool live, size_t threads) const;
  struct StreamFile;
  struct ReadPosition;
  std::unique_ptr<StreamFile> open_stream_file(const std::string& path, uint64_t committed,
                                               std::vector<Damage>& damage) const;
  void index_units(const StreamFile& file, uint64_t first, uint32_t file_index, IndexedStream& indexed) const;
  struct PacketBytes;
  void index_packets(const PacketBytes& bytes, uint64_t first, bool growing, IndexedStream& indexed,
                     size_t threads) const;
  // Where packet `packet` of stream `stream` starts: in its file's mapping, or for a .ctfz in its
  // unit as `position` holds it decoded (decoding it there first when it holds another). The
  // packets of a stream are asked for in order: the pages of its files behind them are let go.
  const uint8_t* packet_at(size_t stream, size_t packet, std::shared_ptr<ReadPosition>& position) const;
  struct CheckedPacket;
  void keep_checked(const PacketBytes& bytes, const CheckedPacket& checked, IndexedStream& indexed) const;
  std::string header_problem(const uint8_t* packet, uint64_t offset) const;
  std::string content_problem(const uint8_t* packet, uint64_t offset, uint32_t& event_types) const;

  std::string directory_;
  uid_t owner_ = 0;
  OpenOptions options_;
  bool release_pages_ = false;  // the stream files are larger than options_.bytes_kept_mapped
  format::TraceDescription description_;
  std::vector<Site> sites_;  // by id - 1 (gaps have id 0)
  std::map<uint32_t, std::string> thread_names_;
  std::vector<ModuleMap> modules_;
  std::vector<StreamInfo> streams_;
  std::vector<std::string> chunks_;
  uint64_t first_chunk_number_ = 1;
  std::optional<shm::CutTrace> cut_;
  std::string metadata_text_;
  std::vector<uint8_t> definitions_bytes_;
  // A sound packet: which of its stream's files, and where in it (decompressed, for a .ctfz: in
  // which of its units).
  struct PacketPlace {
    uint32_t file = 0;
    uint32_t unit = 0;
    uint64_t offset = 0;
  };
  std::vector<std::vector<std::unique_ptr<StreamFile>>> files_;  // per stream
  std::vector<std::vector<PacketPlace>> readable_packets_;       // per stream: the sound packets
  std::vector<std::vector<uint32_t>> packet_event_types_;        // per stream, per sound packet: its event types
  std::vector<Damage> damage_;
  int64_t clock_base_ns_ = 0;
  int64_t clock_offset_ticks_ = 0;  // format::clock_offset's ticks: computed once, not per event
};

// Iterates one stream's events.
class Trace::StreamCursor {
 public:
  // Over the packets holding an event of one of `event_types` (format::event_type_bit), by
  // default all.
  StreamCursor(const Trace& trace, size_t index, uint32_t event_types = ~uint32_t{0});
  // Over the readable packets [first_packet, end_packet) only (readable_packet_count()), for
  // pieces of one stream read on several threads: each lets go of the pages of its own packets.
  StreamCursor(const Trace& trace, size_t index, size_t first_packet, size_t end_packet);
  // A cursor owns its place (and a .ctfz's decoded unit): it moves, a copy would share it.
  StreamCursor(const StreamCursor&) = delete;
  StreamCursor& operator=(const StreamCursor&) = delete;
  StreamCursor(StreamCursor&&) noexcept = default;
  // Reads the next event into `event`; false at the end. Only packets that decoded when the
  // trace was opened are read; throws TraceError if one no longer does (the file changed).
  bool next(Event& event);
  // Where the event read last is (EventMark).
  using Mark = EventMark;
  Mark mark() const;  // after next() gave an event
  // The next next() reads again the event `mark` was taken at, by a cursor over all the packets
  // of the same stream.
  void seek(const Mark& mark);
  // Where the packet of the event read last starts in the stream's file (decoded, for a .ctfz),
  // and that file (of StreamInfo::files: one per chunk of a rotated trace).
  uint64_t packet_offset() const { return packet_offset_; }
  const std::string& packet_path() const { return trace_.streams_[index_].files[packet_file_]; }

 private:
  bool next_packet();
  bool load_packet();
  bool next_raw(format::RawEvent& raw);
  const Trace& trace_;
  size_t index_;
  uint32_t thread_id_;
  const std::vector<PacketPlace>& packets_;
  const std::vector<uint32_t>& packet_event_types_;
  uint32_t event_types_;
  size_t next_packet_ = 0;
  size_t end_packet_;
  uint64_t packet_offset_ = 0;
  uint32_t packet_file_ = 0;
  std::optional<format::PacketDecoder> packet_;
  std::shared_ptr<ReadPosition> position_;  // the unit being read (a .ctfz), the pages let go
  // A compound event being read back as the events it stands for: the next one's index (0: none).
  format::RawEvent compound_;
  size_t compound_part_ = 0;
  size_t compound_packet_ = 0;
};

}  // namespace chronicle::reader

#include "reader/trace_reader_inl.hpp"
