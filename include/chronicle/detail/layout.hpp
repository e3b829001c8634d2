// The binary layout shared by the recorder (writer), the collector and the reader.
// Every magic number of the format lives here, once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace chronicle::format {

// ---- CTF packets ---------------------------------------------------------------------------
inline constexpr uint32_t kPacketMagic = 0xC1FC1FC1;

inline constexpr uint32_t kStreamThread = 0;   // one stream per thread: the trace points
inline constexpr uint32_t kStreamStrings = 1;  // one per trace: site and thread definitions

// Packet header and context in one struct; offsets match the TSDL in metadata.cpp.
// Fields a concurrent reader (another process) looks at while the writer runs are atomics; who
// stores and loads each, in which order and why: ring_protocol.md beside this file.
struct PacketHeader {
  uint32_t magic;
  uint8_t uuid[16];
  uint32_t stream_id;
  uint64_t stream_instance_id;
  // packet context
  uint64_t timestamp_begin;
  std::atomic<uint64_t> timestamp_end;
  std::atomic<uint64_t> content_size_bits;
  uint64_t packet_size_bits;
  std::atomic<uint64_t> packet_seq_num;    // kSeqRewriting while a flight-recorder slot is reused
  std::atomic<uint64_t> events_discarded;  // cumulative for the stream, as CTF wants
  uint32_t thread_id;
  uint32_t pid;
};
static_assert(sizeof(std::atomic<uint64_t>) == 8);
static_assert(offsetof(PacketHeader, timestamp_begin) == 32);
static_assert(offsetof(PacketHeader, content_size_bits) == 48);
static_assert(offsetof(PacketHeader, events_discarded) == 72);
inline constexpr size_t kPacketHeaderSize = 88;
static_assert(sizeof(PacketHeader) == kPacketHeaderSize);

inline constexpr uint64_t kSeqRewriting = ~uint64_t{0};

// Fences (the flight recorder's seqlock, publishing a mapping header). ThreadSanitizer does
// not model fences (GCC refuses them under -fsanitize=thread); a sequentially consistent
// read-modify-write of a shared word orders the same accesses in a way it understands.
inline void memory_fence(std::memory_order order) {
#if defined(__SANITIZE_THREAD__)
  static std::atomic<uint32_t> ordering_word{0};
  ordering_word.fetch_add(0, std::memory_order_seq_cst);
  (void)order;
#else
  std::atomic_thread_fence(order);
#endif
}

// Packets on disk are trimmed to their content and padded to this many bytes, so that every
// packet header in a file stays 8-byte aligned (CTF allows packet_size > content_size).
inline constexpr uint64_t kPacketAlignment = 8;
inline constexpr uint64_t padded_packet_size(uint64_t content_bytes) {
  return (content_bytes + kPacketAlignment - 1) / kPacketAlignment * kPacketAlignment;
}

// ---- event header (LTTng-style compact header) ---------------------------------------------
// compact:  one little-endian u32 = id | (timestamp & (2^27-1)) << 5
// extended: a byte holding 31, then u32 id and u64 full timestamp (13 bytes)
inline constexpr unsigned kCompactIdBits = 5;
inline constexpr uint32_t kExtendedId = 31;
inline constexpr unsigned kCompactTimestampBits = 27;
inline constexpr uint64_t kCompactTimestampMask = (uint64_t{1} << kCompactTimestampBits) - 1;
inline constexpr size_t kCompactHeaderSize = 4;
inline constexpr size_t kExtendedHeaderSize = 13;

// The one rule for which header an event takes: compact when its id fits and the time moved by
// at most the 27-bit field's span since the stream's previous event (babeltrace2 rebuilds full
// times assuming at most one wrap of the field between two events), else extended.
inline constexpr bool takes_compact_header(uint32_t id, uint64_t ticks_since_previous) {
  return id < kExtendedId && ticks_since_previous <= kCompactTimestampMask;
}

// Writes the header at `out` (kCompactHeaderSize or kExtendedHeaderSize bytes) and returns where
// the payload goes.
[[gnu::always_inline]] inline uint8_t* write_event_header(uint8_t* out, bool compact, uint32_t id, uint64_t ticks) {
  if (compact) {
    const uint32_t header = id | static_cast<uint32_t>(ticks & kCompactTimestampMask) << kCompactIdBits;
    std::memcpy(out, &header, kCompactHeaderSize);
    return out + kCompactHeaderSize;
  }
  out[0] = static_cast<uint8_t>(kExtendedId);
  std::memcpy(out + 1, &id, 4);
  std::memcpy(out + 5, &ticks, 8);
  return out + kExtendedHeaderSize;
}

// Ids of the events of thread streams. Ids below 31 fit the compact header; keep the frequent
// ones there.
enum class EventId : uint32_t {
  span_begin = 0,
  span_end = 1,
  instant = 2,
  note = 3,
  counter = 4,
  counter_float = 5,
  // The task layer (chronicle/task.hpp). Task ids are u64s made by the writing thread.
  task_create = 6,
  task_run_begin = 7,
  task_run_end = 8,
  task_wait = 9,
  task_resolve = 10,
  task_label = 11,
  loop_suspend = 12,
  loop_resume = 13,
  // Distributed trace context (chronicle/context.hpp): format version 3.
  context_send = 14,
  context_receive = 15,
  context_receive_end = 16,
  task_context = 17,
  // The sampling profiler and scheduler data (src/sampler/): format version 4. Written by the
  // session's control thread about other threads, so each names the thread it is about.
  cpu_sample = 18,
  cpu_switch = 19,
  // Attributes and status of spans and instants (chronicle.hpp): format version 5. Each names the
  // span it belongs to by its site (`span_site`): the innermost open span of that site's name in
  // the thread's owner (its running task, else the thread), as an end pairs; for an instant's
  // site, the instant just before it on the thread (written in one group with it); 0: the
  // innermost open span, whatever its name (fail_current_span).
  attribute_int = 20,
  attribute_uint = 21,
  attribute_float = 22,
  attribute_bool = 23,
  attribute_string = 24,
  span_status = 25,
  // context_tracestate: the W3C tracestate a receive got with its traceparent (format version 5).
  context_tracestate = 26,
  // span_context: the identity of the span_begin that follows it on the thread, at the same time:
  // a span of another service, as its OTLP/JSON had it (format version 5; written by `merge`,
  // never by the recorder). SpanPairing gives it to that span instead of the ids it derives.
  span_context = 27,
  // task_invoke: a task resolved without text and its run began, at one instant (an Asio handler
  // invoked with its operation's result, a resumption): one event where the two took 34 bytes
  // (format version 6). Every chronicle tool reads it back as the task_resolve and then the
  // task_run_begin it stands for (the catalogue's stands_for), and counts it as those two.
  task_invoke = 28,
  // task_hand_over: `task` waits on `next` and its run ends, and `next`'s run begins (a coroutine
  // starting the child it awaits): task_wait, task_run_end, task_run_begin (format version 6).
  task_hand_over = 29,
  // task_return: `task` resolved itself ok and its run ended, and `next`'s run begins (a coroutine
  // ending into the one that awaited it): task_resolve, task_run_end, task_run_begin (version 6).
  task_return = 30,
};
// The events a task_invoke, a task_hand_over and a task_return count as (the catalogue checks them
// against what each stands for).
inline constexpr uint32_t kTaskInvokeEvents = 2;
inline constexpr uint32_t kTaskHandOverEvents = 3;
inline constexpr uint32_t kTaskReturnEvents = 3;

// What a thread did at a context switch (cpu_switch): it came onto a CPU, or it left one while
// still runnable (preempted) or because it waited for something (blocked: sleep, I/O, a lock).
enum class CpuState : uint8_t { running = 0, preempted = 1, blocked = 2 };
inline constexpr uint8_t kCpuStateCount = 3;

// How a span ended (span_status); a span with none ended ok.
enum class SpanStatus : uint8_t { ok = 0, error = 1 };
inline constexpr uint8_t kSpanStatusCount = 2;

// What a task is; stored as a u8 in task_create (a CTF enum in the metadata).
enum class TaskKind : uint8_t { unknown = 0, coroutine = 1, promise = 2, handler = 3, timer = 4, io = 5 };
inline constexpr uint8_t kTaskKindCount = 6;

// How a task ended; stored as a u8 in task_resolve (a CTF enum in the metadata).
enum class TaskOutcome : uint8_t { ok = 0, failed = 1, cancelled = 2 };
inline constexpr uint8_t kTaskOutcomeCount = 3;

// ---- event payloads ------------------------------------------------------------------------
// The fixed fields of each thread-stream event, packed, in the order the catalogue
// (src/format/catalogue.cpp) declares them to CTF readers. The writer fills these structs and
// the reader copies them out; the catalogue static_asserts every field's offset and the size
// against its own declaration, so the three cannot drift apart. Events with text carry it after
// the fixed part (a "Prefix" struct), NUL-terminated.
#pragma pack(push, 1)
// span_begin, span_end (the site of the span it closes), instant.
struct NamePayload {
  uint32_t name_id;
};
struct NotePrefix {  // + the text
  uint32_t name_id;
};
struct CounterPayload {
  uint32_t name_id;
  int64_t value;
};
struct CounterFloatPayload {
  uint32_t name_id;
  double value;
};
struct TaskCreatePayload {
  uint64_t task;
  uint64_t parent;
  uint8_t kind;  // TaskKind
  uint32_t name_id;
};
struct TaskPayload {  // task_run_begin, task_run_end
  uint64_t task;
};
struct TaskWaitPayload {
  uint64_t task;
  uint64_t awaited;
};
struct TaskResolvePrefix {  // + the text (empty for most)
  uint64_t task;
  uint64_t resolver;
  uint8_t outcome;  // TaskOutcome
};
struct TaskInvokePayload {  // task_resolve's fields without the text, then the run begins
  uint64_t task;
  uint64_t resolver;
  uint8_t outcome;  // TaskOutcome
};
struct TaskSwitchPayload {  // task_hand_over, task_return: a task's run ends into `next`'s
  uint64_t task;
  uint64_t next;
};
struct TaskLabelPrefix {  // + the label
  uint64_t task;
};
// attribute_*: `key_id` is the key's site (SiteKind::attribute, named by the key, of the span's
// category); the value follows (attribute_string: a NUL-terminated text, cut visibly, see
// kMaxAttributeText).
struct AttributeIntPayload {
  uint32_t span_site;
  uint32_t key_id;
  int64_t value;
};
struct AttributeUintPayload {
  uint32_t span_site;
  uint32_t key_id;
  uint64_t value;
};
struct AttributeFloatPayload {
  uint32_t span_site;
  uint32_t key_id;
  double value;
};
struct AttributeBoolPayload {
  uint32_t span_site;
  uint32_t key_id;
  uint8_t value;
};
struct AttributeStringPrefix {  // + the text
  uint32_t span_site;
  uint32_t key_id;
};
struct SpanStatusPrefix {  // + the message
  uint32_t span_site;
  uint8_t status;  // SpanStatus
};
// A W3C trace id is 16 bytes; it is stored as two u64 whose big-endian bytes, high first, are the
// id's bytes (so a CTF reader prints the numbers of the hex text).
// context_send: a message leaves with `span` (this send's own span, a child of the sender's
// current span or task) as the traceparent's parent-id.
struct ContextSendPayload {
  uint64_t trace_high;
  uint64_t trace_low;
  uint64_t span;
  uint8_t flags;
};
// context_receive: work on a message begins as span `span`, a child of the sender's span
// `parent` (0: the message carried no valid traceparent, so `trace` is a new trace).
struct ContextReceivePayload {
  uint64_t trace_high;
  uint64_t trace_low;
  uint64_t span;
  uint64_t parent;
  uint8_t flags;
};
// span_context: the next span_begin of the thread is span `span` (0: the id the reader derives) of
// trace `trace`, a child of `parent` (0: a root), of OTLP's SpanKind `kind` (0: unspecified). A
// span whose id is that of the receive open around it is that receive, named; a send inside a
// span of its own id is that span's (a CLIENT span).
enum class OtlpSpanKind : uint8_t { unspecified = 0, internal = 1, server = 2, client = 3, producer = 4, consumer = 5 };
struct SpanContextPayload {
  uint64_t trace_high;
  uint64_t trace_low;
  uint64_t span;
  uint64_t parent;
  uint8_t kind;
};
// context_tracestate: right after the context_receive of span `span`: the tracestate its message
// carried (+ the text), which every span of that trace carries on.
struct ContextTracestatePrefix {
  uint64_t span;
};
// context_receive_end: the receive span `span` ends.
struct ContextReceiveEndPayload {
  uint64_t span;
};
// task_context: `task`, just created, belongs to trace `trace` (the context in scope where it was
// created) rather than to the trace its id derives (see derived_task_trace_id).
struct TaskContextPayload {
  uint64_t task;
  uint64_t trace_high;
  uint64_t trace_low;
  uint8_t flags;
};
// cpu_sample: thread `tid` of process `pid` was found running this call stack; + frame_count
// u64 addresses, innermost first (the interrupted instruction, then return addresses by the frame
// pointers), + a u32 stack_count and as many u64 words of the stack from its pointer (where a
// function without a frame pointer keeps its return address: the caller the chain skips).
struct CpuSamplePrefix {
  uint32_t pid;
  uint32_t tid;
  uint32_t frame_count;
};
// cpu_switch: thread `tid` of process `pid` came onto a CPU or left it (`state`: CpuState).
struct CpuSwitchPayload {
  uint32_t pid;
  uint32_t tid;
  uint8_t state;
};
// module (a definition): an ELF object of the process, for symbolising its samples later: loaded at bias
// `base` (0 for a fixed-address executable), code mapped at [start, end). + two strings: its GNU
// build id in hex ("" when it has none), and its path.
struct ModuleDefinitionPrefix {
  uint64_t base;
  uint64_t start;
  uint64_t end;
};
#pragma pack(pop)

// The path a module definition gives the kernel's vDSO, which is in no file (the name the memory
// map shows): its symbols are read from the reading process's own vDSO when the build ids agree.
inline constexpr char kVdsoModulePath[] = "[vdso]";

// The ids a task gets without anything recorded, from the session's uuid (128 random bits) and the
// task id (unique in the process): the writer and the reader compute the same. A bijective 64-bit
// mix (SplitMix64's finalizer) keeps distinct tasks distinct; an all-zero id (W3C: invalid) is
// never given.
constexpr uint64_t mix_id(uint64_t key, uint64_t salt) {
  uint64_t x = key ^ salt;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x == 0 ? 1 : x;
}
constexpr uint64_t load_big_endian_u64(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = value << 8 | bytes[i];
  return value;
}
// The salt is the session's uuid.
struct ContextSalt {
  uint64_t high = 0;  // the uuid's first 8 bytes, big-endian
  uint64_t low = 0;   // its last 8
};
constexpr uint64_t derived_task_span_id(const ContextSalt& salt, uint64_t task) {
  return mix_id(task, salt.high);
}
// A task with no parent and no context in scope starts its own trace.
constexpr void derived_task_trace_id(const ContextSalt& salt, uint64_t task, uint64_t& high, uint64_t& low) {
  high = mix_id(task ^ 0x5bd1e9955bd1e995ULL, salt.low);
  low = mix_id(task, salt.low ^ salt.high);
}

// A thread's outermost span begun outside any task and context starts a trace: the trace of the
// sends, tasks and receives' replies inside it. The writer derives it at the first send from the
// thread id and the span's begin time (as written in the span_begin), the reader from the same
// event, so that nothing more is recorded and the ids agree. Its span id is the span's own.
constexpr uint64_t root_span_key(uint32_t thread_id, uint64_t begin_ticks) {
  return mix_id(begin_ticks, 0x9e3779b97f4a7c15ULL * (uint64_t{thread_id} + 1));
}
constexpr uint64_t derived_root_span_id(const ContextSalt& salt, uint32_t thread_id, uint64_t begin_ticks) {
  return mix_id(root_span_key(thread_id, begin_ticks) ^ 0x3c6ef372fe94f82bULL, salt.high);
}
constexpr void derived_root_trace_id(const ContextSalt& salt, uint32_t thread_id, uint64_t begin_ticks, uint64_t& high,
                                     uint64_t& low) {
  const uint64_t key = root_span_key(thread_id, begin_ticks);
  high = mix_id(key ^ 0xa54ff53a5f1d36f1ULL, salt.low);
  low = mix_id(key, salt.low ^ salt.high ^ 0x510e527fade682d1ULL);
}

// Ids of the events of the strings stream.
enum class DefinitionId : uint32_t {
  site = 0,
  thread = 1,
  module = 2,  // format version 4
};

// What a call site is; stored with its definition so tools know how its events read.
// The metric kinds are sites built at run time for a metric (name and labels) by
// chronicle/metrics.hpp; their counter events carry, for metric_counter, the increment (sum them
// for the total), for metric_gauge the new value, for metric_histogram one observation.
// `task`: the name a task is created with (a coroutine's function, an Asio operation).
enum class SiteKind : uint8_t {
  span = 0,
  instant = 1,
  note = 2,
  counter = 3,
  metric_counter = 4,
  metric_gauge = 5,
  metric_histogram = 6,
  task = 7,
  attribute = 8,  // an attribute's key (format version 5)
};

// The longest text an attribute's string value keeps: a longer one is cut and ends in this
// marker, so that a reader sees that it was cut.
inline constexpr size_t kMaxAttributeText = 256;
inline constexpr char kTruncatedMarker[] = "…[cut]";

// ---- the shared-memory session file -------------------------------------------------------
inline constexpr uint64_t kShmMagic = 0x31304c434e524843ULL;  // "CHRNCL01"
// 2: channels are reused (epoch), rings reserved. 3: the category table and the control block.
// 4: counts per channel and category, and the measured cost of an event. 5: ctl's requests are
// numbered from control_numbers and taken by the program (its number compare-exchanged to 0);
// the control block and the rings' collector are held by locks on the file, not by pid.
inline constexpr uint32_t kShmVersion = 6;
inline constexpr size_t kShmHeaderSize = 4096;
inline constexpr size_t kMaxCategories = 256;

// A category's state, as trace points read it: 0 off; n > 0 on for trace points of level < n
// (level 0, the default, whenever the category is on; `chronicle ctl level C N` sets n = N + 1).
inline constexpr uint8_t kCategoryOff = 0;
inline constexpr uint8_t kMaxLevel = 254;
constexpr uint8_t category_state_for_level(uint8_t level) {
  return static_cast<uint8_t>(level + 1);
}

// The category table: entry i names category i (the index category_enabled uses).
inline constexpr size_t kCategoryNameSize = 64;  // NUL-terminated; longer names are cut
struct CategoryEntry {
  char name[kCategoryNameSize];
};
inline constexpr size_t kCategoryTableSize = kMaxCategories * sizeof(CategoryEntry);

// What one channel's threads wrote and lost in one category, since the session began: the monitor's
// own figures (`chronicle ctl status`, `chronicle top`, the "chronicle.*" counters).
//   events, bytes  the writer of the channel, inside its trace point, as a load and a store (it
//                  is their only writer: a signal handler on its thread enters no trace point
//                  while it is inside one). Readers load them relaxed: counts, not publication.
//   discarded      events lost by a thread holding the channel (full ring, too large, nested in a
//                  signal handler): an atomic add, since a handler may add while the writer does.
// Threads without a channel count their events in ShmHeader::events_no_channel only.
struct CategoryCounts {
  std::atomic<uint64_t> events;
  std::atomic<uint64_t> bytes;  // whole events: header and payload, not packet headers
  std::atomic<uint64_t> discarded;
  uint64_t reserved;
};
static_assert(sizeof(CategoryCounts) == 32);
// One row per channel, reserved with the channel's ring (a full /dev/shm refuses the channel, never
// faults a writer).
inline constexpr size_t kCategoryCountsRowSize = kMaxCategories * sizeof(CategoryCounts);
// A category index that names none: a drop counted before its trace point's category is known.
inline constexpr uint16_t kNoCategory = 0xffff;

// The control block: `chronicle ctl` asks, the program's control thread answers.
//
//   control_owner     0 -> ctl's pid       one ctl at a time: the block is held by an open-file-
//                                          description lock on these 4 bytes (shm::take_role),
//                                          which the kernel drops when ctl dies, so a dead ctl's
//                                          block is free whatever became of its pid; the word
//                                          names the holder (release), for messages only. The
//                                          program never reads or waits for it.
//   control_numbers   n -> n + 1           ctl, fetch_add (relaxed; 0 skipped): its request's
//                                          number, unique, so that an answer to an abandoned
//                                          request, however late, never matches a later one.
//   control_request   written by ctl       a seqlock: ctl stores number 0 (relaxed), a release
//                                          fence, the other bytes, then its number (release),
//                                          while it owns the block and before it rings. The
//                                          program copies them and checks every field (ctl is
//                                          another process).
//   control_requests  n -> n + 1           the doorbell. ctl, fetch_add (release: publishes the
//                                          request), then FUTEX_WAKE. The control thread sleeps
//                                          in FUTEX_WAIT on it and loads it with acquire. stop()
//                                          and the snapshot signal's handler ring it too (their
//                                          reason is in process memory).
//   request.number    X -> 0               the program takes the request: it loads X != 0
//                                          (acquire), copies the request, an acquire fence (the
//                                          copy's loads before what follows), then
//                                          compare-exchanges X to 0 (acq_rel). Success: the copy
//                                          is whole and X's, and no other ring answers it again.
//                                          Failure: ctl rewrote or withdrew it; nothing is done.
//                    ctl's number -> 0     ctl withdraws a request it gave up on (no answer in
//                                          5 s), by the same compare-exchange: exactly one of
//                                          the program and ctl wins, so ctl can say whether the
//                                          change will still happen.
//   control_answer,   written by program   before control_answered.
//   control_status
//   control_answered  -> X                 program, store of the number it took (release:
//                                          publishes the answer), then FUTEX_WAKE; ctl waits
//                                          until it holds its own number (acquire).
//   control_owner     ctl's pid -> 0       ctl, store (release), once it read the answer or
//                                          gave up; then it unlocks.
//
// A request's change is in effect when the answer is published: the program stores the new
// category states (in its own memory and here) before it answers.
enum class ControlCommand : uint32_t { none = 0, set_category_state = 1 };
inline constexpr size_t kControlPatternSize = 128;
inline constexpr size_t kControlAnswerSize = 2048;
struct ControlRequest {
  // ctl's number (from control_numbers), stored last by ctl (release), loaded first by the
  // program (acquire) and set to 0 when it takes the request, as std::atomic_ref; 0: none waits.
  alignas(4) uint32_t number;
  ControlCommand command;
  uint32_t state;                     // the categories' new state (kCategoryOff, or level + 1)
  char pattern[kControlPatternSize];  // a glob over category names: '*' any characters, '?' one
};
enum class ControlStatus : int32_t { ok = 0, refused = 1 };

enum class BufferPolicy : uint32_t { stream = 0, flight = 1 };

enum class SessionState : uint32_t { running = 1, finished = 2 };

struct ClockCalibration {
  uint64_t frequency_hz;  // ticks per second (an estimate made at start; collectors refine it)
  uint64_t ticks_at_start;
  uint64_t monotonic_ns_at_start;
  uint64_t realtime_ns_at_start;
  uint32_t is_tsc;  // 0: ticks are CLOCK_MONOTONIC nanoseconds
  uint32_t reserved;
};

struct ShmHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t header_size;
  uint8_t uuid[16];
  int32_t pid;
  BufferPolicy policy;
  char process_name[64];
  char hostname[64];
  ClockCalibration clock;
  uint32_t packet_size;          // bytes per ring slot
  uint32_t packets_per_channel;  // slots per ring
  uint32_t max_channels;
  uint32_t reserved0;
  uint64_t channel_table_offset;
  uint64_t strings_offset;  // one CTF packet of stream kStreamStrings, append only
  uint64_t strings_size;
  uint64_t rings_offset;
  // Per channel and ring slot, the number of events of the packet closed in that slot (u32),
  // written by the writer before it publishes the packet: the collector counts without decoding.
  uint64_t packet_events_offset;
  uint64_t categories_offset;  // the category table (kCategoryTableSize bytes)
  // max_channels rows of kCategoryCountsRowSize bytes: channel i's CategoryCounts per category.
  uint64_t category_counts_offset;
  // What writing one event cost this process's thread that started the session, measured then
  // (picoseconds; 0: not measured): events x this is the tracing's estimated CPU time
  // (docs/control.md, "The monitor's own figures").
  uint64_t event_cost_ps;
  uint64_t file_size;
  std::atomic<uint32_t> channel_count;
  std::atomic<uint32_t> state;              // SessionState
  std::atomic<uint64_t> events_no_channel;  // dropped: more threads than max_channels
  std::atomic<uint64_t> strings_dropped;    // definitions that did not fit the strings packet
  // Threads refused a channel because their ring's memory could not be reserved (a full
  // /dev/shm); their events are counted in events_no_channel.
  std::atomic<uint64_t> channels_without_memory;
  // A sleeping collector waits on drain_requests (a futex word, shared between processes); a
  // writer whose ring passes half full bumps it and wakes the collector, if one is waiting.
  std::atomic<uint32_t> drain_requests;
  std::atomic<uint32_t> collector_waiting;
  std::atomic<uint8_t> category_enabled[kMaxCategories];  // a copy of each category's state
  // The fatal signal the program died of, when its handler ran (0: none).
  std::atomic<int32_t> ended_by_signal;
  // The process that drains the rings (stream policy): the program itself when it has the
  // collector, else the `chronicle record` that claimed the session; 0: none. Two collectors
  // would each take half. The claim is an open-file-description lock on these 4 bytes
  // (shm::take_role), which the kernel drops when the claimant dies; the pid only names it.
  std::atomic<uint32_t> collector_pid;
  // Entries [0, category_count) of the category table are written (release after the name).
  std::atomic<uint32_t> category_count;
  // The control block (the protocol is above ControlCommand).
  std::atomic<uint32_t> control_owner;
  std::atomic<uint32_t> control_requests;
  std::atomic<uint32_t> control_answered;
  std::atomic<ControlStatus> control_status;
  ControlRequest control_request;
  char control_answer[kControlAnswerSize];
  std::atomic<uint32_t> control_numbers;  // the last request number ctl handed out
  // The CPU time the collector draining this session has taken since it began (the program's
  // collector thread's, or the whole `chronicle record` process's), as it last stored it after a
  // drain (relaxed: a figure for the monitor); 0: no collector yet, or the flight policy's.
  std::atomic<uint64_t> collector_cpu_ns;
};
static_assert(sizeof(ShmHeader) <= kShmHeaderSize);

enum class ChannelState : uint32_t { unused = 0, active = 1, closed = 2 };

// One per thread at a time: a closed channel goes to the next thread that needs one, with its
// epoch incremented (src/recorder/session_channels.cpp, "Channels"). The writer owns packets_committed
// and events_discarded (a signal handler on the writer's thread adds to events_discarded
// atomically); the stream-mode collector owns packets_consumed (the hand-off: ring_protocol.md).
// They sit on separate cache lines so neither slows the other.
struct alignas(64) ChannelDescriptor {
  std::atomic<uint32_t> state;  // ChannelState
  int32_t thread_id;
  char thread_name[16];
  std::atomic<uint32_t> epoch;  // how many threads had this channel before the current one
  // Packets [0, packets_committed) are closed; packet packets_committed is the one being filled
  // (or, when its writer has none open, the next one it opens).
  alignas(64) std::atomic<uint64_t> packets_committed;
  std::atomic<uint64_t> events_discarded;  // of the current epoch: cumulative per stream
  alignas(64) std::atomic<uint64_t> packets_consumed;
};
static_assert(sizeof(ChannelDescriptor) == 192);

// A packet's stream_instance_id: which channel, and which of the threads that used it in turn.
// Readers make one stream of each.
inline constexpr uint64_t stream_instance(uint32_t channel, uint32_t epoch) {
  return uint64_t{epoch} << 32 | channel;
}

inline size_t ring_bytes(const ShmHeader& header) {
  return size_t{header.packet_size} * header.packets_per_channel;
}

inline ChannelDescriptor* channel_table(void* base, const ShmHeader& header) {
  return reinterpret_cast<ChannelDescriptor*>(static_cast<uint8_t*>(base) + header.channel_table_offset);
}

inline std::atomic<uint32_t>* packet_event_count(void* base, const ShmHeader& header, uint32_t channel, uint64_t seq) {
  return reinterpret_cast<std::atomic<uint32_t>*>(static_cast<uint8_t*>(base) + header.packet_events_offset) +
         size_t{channel} * header.packets_per_channel + seq % header.packets_per_channel;
}

inline uint8_t* ring_slot(void* base, const ShmHeader& header, uint32_t channel, uint64_t seq) {
  return static_cast<uint8_t*>(base) + header.rings_offset + channel * ring_bytes(header) +
         (seq % header.packets_per_channel) * size_t{header.packet_size};
}

}  // namespace chronicle::format
