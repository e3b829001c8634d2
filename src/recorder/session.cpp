// A tracing session: the shared mapping, channel registration, packet switching, interning.
// Everything here is off the hot path (see chronicle/detail/writer.hpp for that).
//
// ---- Trace points and stop() ---------------------------------------------------------------
// Each thread has one state byte, ThreadWriter::state (writer.hpp):
//
//   outside --(enter_trace_point: store 1, signal fence, reload g_generation)--> writing
//   writing --(leave_trace_point: signal fence, store 0 release)--> outside
//   outside --(a slow path that takes the registry lock)--> in slow path --> outside
//
// * A signal handler that finds its own thread's byte non-zero drops its event and counts it
//   with an atomic add (count_nested_drop), so it never interleaves with the event it
//   interrupted and never waits for a lock that thread holds. It counts under the handlers'
//   guard (HandlerMappingAccess: in, seq_cst, before it loads the session, seq_cst; out,
//   release), which stop() waits for before it unmaps: the thread it interrupted may be in a
//   slow path, which stop() does not wait for.
// * stop() stores g_generation = 0, then runs membarrier(PRIVATE_EXPEDITED): every thread of the
//   process has then passed a full barrier. A writer whose store of 1 came before that barrier
//   is seen by stop(), which waits until it stores 0 (release; stop() loads with acquire, so all
//   its writes to the mapping happen before the unmap). A writer whose store came after it
//   reloads g_generation after its store, sees the change and writes nothing. Only the heavy
//   side pays for the store->load ordering; the trace point has a compiler fence only.
// * Threads in a slow path (state 2) may wait for the registry lock that stop() holds while it
//   waits: stop() does not wait for them, because a slow path revalidates the session under the
//   lock before it touches the mapping. A signal handler on such a thread touches the mapping
//   only under the handlers' guard (above).
// * An EventGroup (writer.hpp: events of one instant, e.g. a task hand-over) is one trace point:
//   one entry, its events written one after another, one commit (commit_events: the end time,
//   then the content size with release, as for one event), one exit. A reader never sees part of
//   a group; a signal handler during it drops its events as during any trace point. Nothing in
//   a group takes a lock or blocks, so stop() waits for it as for one event.
// * Without membarrier (old kernel, seccomp), or when a writer stays inside a trace point for
//   longer than kQuiescenceLimit (stopped by a debugger, blocked in a signal handler), the
//   mapping is kept mapped, as every mapping was before: leaking is safe, unmapping is not.
//
// ---- Channels --------------------------------------------------------------------------------
// A channel (one ring) belongs to one thread at a time, under the registry lock:
//   unused --attach--> active --thread exit (pthread key destructor) or stop--> closed
//   closed --attach of another thread: epoch + 1--> active
// A reused channel keeps its packet sequence: the new thread's packets queue behind the old
// one's in the same ring, so nothing needs to be drained first. Each packet's
// stream_instance_id is (epoch << 32 | channel), so readers split the ring into one stream per
// thread; events_discarded starts again from 0 for each epoch (it is cumulative per stream).
// A ring's memory is reserved (posix_fallocate) when its channel is first used: a full
// /dev/shm refuses the thread a channel, and its events are counted in events_no_channel,
// instead of a SIGBUS at an arbitrary store.
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "chronicle/config.hpp"
#include "chronicle/detail/context_state.hpp"
#include "chronicle/detail/writer.hpp"
#include "collector/collector.hpp"
#include "compression/ctfz.hpp"
#include "format/category_rules.hpp"
#include "format/clock.hpp"
#include "recorder/event_cost.hpp"
#include "recorder/modules.hpp"
#include "recorder/test_pause.hpp"
#include "sampler/perf_sampler.hpp"
#include "sampler/timer_sampler.hpp"
#include "settings/settings.hpp"
#include "shm/shm_file.hpp"
#include "shm/trace_source.hpp"

namespace chronicle {
namespace recorder {
std::atomic<void (*)(TestPoint)> g_test_pause{nullptr};
}  // namespace recorder

namespace detail {

std::atomic<uint32_t> g_generation{0};
std::atomic<bool> g_clock_is_tsc{false};
// In process memory, not in the mapping: a trace point reads its category's state before it
// enters the trace point, when the mapping of a session being stopped may be going away. Each
// session's mapping holds a copy for outside readers. Only the program writes either: `chronicle
// ctl` asks its control thread (layout.hpp, "The control block").
std::atomic<uint8_t> g_category_state[format::kMaxCategories];
thread_local constinit ThreadWriter t_writer{};

uint64_t read_monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace detail

namespace {

using detail::Site;
using detail::ThreadWriter;
using format::ChannelDescriptor;
using format::PacketHeader;
using format::ShmHeader;

constexpr uint32_t kNoChannel = ~uint32_t{0};
constexpr size_t kStringsRegionSize = size_t{4} << 20;
constexpr auto kQuiescenceLimit = std::chrono::milliseconds(200);

struct Session {
  Config config;
  uint32_t generation = 0;
  shm::WriterFile file;
  ShmHeader* header = nullptr;
  uint64_t strings_last_ticks = 0;
  format::CategoryRules rules;  // under the registry mutex
  // Bumped when a channel closes, so threads that found none try again (writer.hpp).
  std::atomic<uint32_t> channel_releases{0};

  // The in-process collector, when config.output is set.
  std::thread collector_thread;
  // With Config::compress: warmed by start() before the program goes on writing (see
  // compression::UnitWriter::warm_up), then the collector thread's.
  std::shared_ptr<compression::UnitWriter> unit_writer;
  std::mutex collector_mutex;
  bool collector_stop = false;
  std::string collector_error;

  // A fatal signal's handler asks the in-process collector to finish the trace, and waits for
  // crash_flushed (a futex word) for a bounded time before the signal goes on.
  std::atomic<int> crash_signal{0};
  std::atomic<uint32_t> crash_flushed{0};
  // Bumped by the snapshot signal's handler; the control thread takes the snapshot.
  std::atomic<uint32_t> snapshot_requests{0};
  uint32_t snapshots_taken = 0;  // control thread only

  // The control thread, which answers `chronicle ctl` (layout.hpp, "The control block").
  std::thread control_thread;
  std::atomic<bool> has_control_thread{false};
  // Channels kept for the session's own threads (the control thread, the sampler's), so that they
  // never take a ring from a thread of the program: max_channels - max_threads of them.
  uint32_t own_channels_taken = 0;  // under the registry mutex
  std::atomic<bool> control_stop{false};
  // stop() asks the control thread for a last sample of the monitor's figures: 0 none, 1 asked,
  // 2 written (a private futex word).
  std::atomic<uint32_t> final_sample{0};
  // The sampling profiler (docs/profiling.md): its events are written by a thread of its own.
  std::unique_ptr<sampler::Sampler> stack_sampler;  // perf events, or the timers where they are refused
  std::thread sampler_thread;
  std::mutex sampler_mutex;
  std::condition_variable sampler_wake;
  bool sampler_stop = false;     // under sampler_mutex
  bool sampler_ready = false;    // under sampler_mutex: the events are on
  bool sampler_started = false;  // set by start() only
  std::atomic<bool> sampler_ended{false};
  // Armed with no collector in this process nor `chronicle record`'s: no one else removes the
  // mapping, so stop() does.
  bool remove_mapping_at_stop = false;
  // Started by the environment with no `chronicle record` to tell the user: the first ring that
  // finds no memory is said on stderr (record says it otherwise).
  bool tell_no_memory = false;
  // Started from the environment (CHRONICLE_OUTPUT, `chronicle record`): a child forked without
  // exec starts a session of its own, as an exec'd child would (start_forked_child_session).
  bool from_environment = false;
};

// Set while the session that CHRONICLE_OUTPUT asks for starts (start_from_environment), on the
// thread that starts it.
thread_local constinit bool t_starting_from_environment = false;

// g_generation in a child forked without exec from a process whose session the environment
// started: its trace points go to attach_thread, whose first call starts the child's session.
constexpr uint32_t kForkedChildPending = ~uint32_t{0};
uint32_t start_forked_child_session();
// In a forked child, the parent's session: never used, never freed (its mapping is the
// parent's), kept reachable here rather than lost.
Session* g_forked_from = nullptr;

// Process-wide state. Leaked on purpose: threads may still write while static destructors run.
// Session objects are never freed (a few hundred bytes each); their mappings are, once stop()
// knows no thread can write (see the protocol above).
struct Registry {
  std::mutex mutex;
  std::unique_ptr<Session> session;
  std::atomic<Session*> current{nullptr};  // the running session, for lock-free slow paths
  std::vector<std::unique_ptr<Session>> retired;
  std::vector<Site*> sites;             // by id - 1
  std::vector<std::string> categories;  // by category index
  // The state byte of every thread that ever attached and has not exited, for stop().
  std::vector<std::atomic<uint8_t>*> thread_states;
  uint32_t next_generation = 1;
  std::string last_error;
  bool exit_hook_registered = false;
  bool membarrier_ready = false;
  bool fatal_handlers_installed = false;
  pthread_key_t thread_exit_key{};
};

void hold_registry_across_fork();
void release_registry_in_parent();
void forget_sessions_after_fork();

// The fork handlers are registered with the registry, before any thread can take its lock.
Registry& registry() {
  static Registry* instance = [] {
    auto* made = new Registry;
    pthread_atfork(hold_registry_across_fork, release_registry_in_parent, forget_sessions_after_fork);
    return made;
  }();
  return *instance;
}

// Marks the calling thread as inside a slow path for the scope: a signal handler arriving now
// drops its event instead of waiting for the lock this thread holds.
class SlowPathScope {
 public:
  SlowPathScope() : state_(detail::t_writer.state) {
    entered_ = state_.load(std::memory_order_relaxed) == detail::kOutsideTracePoint;
    if (entered_) state_.store(detail::kInSlowPath, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  ~SlowPathScope() {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (entered_) state_.store(detail::kOutsideTracePoint, std::memory_order_release);
  }
  SlowPathScope(const SlowPathScope&) = delete;
  SlowPathScope& operator=(const SlowPathScope&) = delete;
  // False when the thread was already inside a trace point or slow path (a nested call).
  bool entered() const { return entered_; }

 private:
  std::atomic<uint8_t>& state_;
  bool entered_;
};

// Whether the calling thread's state byte is in Registry::thread_states.
thread_local constinit bool t_state_listed = false;
// Whether the calling thread is one of a session's own threads, the control thread or the
// sampler's (it has a channel kept for it).
thread_local constinit bool t_is_session_thread = false;

// Forgets the writer's session, keeping its state byte.
void reset_writer(ThreadWriter& writer) {
  writer.pos = nullptr;
  writer.end = nullptr;
  writer.packet = nullptr;
  writer.last_ticks = 0;
  writer.generation = 0;
  writer.channel = kNoChannel;
  writer.events_in_packet = 0;
  writer.releases_seen = 0;
  writer.discarded_published = 0;
  writer.category_counts = nullptr;
}

format::CategoryCounts* category_counts_row(Session& session, uint32_t index) {
  return reinterpret_cast<format::CategoryCounts*>(session.file.base + session.header->category_counts_offset +
                                                   uint64_t{index} * format::kCategoryCountsRowSize);
}

ChannelDescriptor& channel(Session& session, uint32_t index) {
  return format::channel_table(session.file.base, *session.header)[index];
}

// Appends one definition event (extended header) to the strings packet. Registry mutex held.
void write_definition(Session& session, format::DefinitionId id, const std::string& payload) {
  auto* packet = reinterpret_cast<PacketHeader*>(session.file.base + session.header->strings_offset);
  const uint64_t used = packet->content_size_bits.load(std::memory_order_relaxed) / 8;
  const size_t size = format::kExtendedHeaderSize + payload.size();
  if (used + size > session.header->strings_size) {
    session.header->strings_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t ticks = std::max(detail::read_ticks(), session.strings_last_ticks);
  session.strings_last_ticks = ticks;
  uint8_t* out = session.file.base + session.header->strings_offset + used;
  const uint32_t event_id = static_cast<uint32_t>(id);
  out[0] = static_cast<uint8_t>(format::kExtendedId);
  std::memcpy(out + 1, &event_id, 4);
  std::memcpy(out + 5, &ticks, 8);
  std::memcpy(out + format::kExtendedHeaderSize, payload.data(), payload.size());
  packet->timestamp_end.store(ticks, std::memory_order_relaxed);
  packet->content_size_bits.store((used + size) * 8, std::memory_order_release);
}

template <typename T>
void append_value(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void append_string(std::string& out, std::string_view text) {
  out.append(text.data(), text.size());
  out.push_back('\0');
}

void define_site(Session& session, const Site& site, uint32_t id) {
  std::string payload;
  append_value(payload, id);
  append_value(payload, site.kind);
  append_string(payload, site.category);
  append_string(payload, site.name);
  append_string(payload, site.file ? site.file : "");
  append_value(payload, site.line);
  write_definition(session, format::DefinitionId::site, payload);
}

void define_thread(Session& session, int32_t thread_id, std::string_view name) {
  std::string payload;
  append_value(payload, static_cast<uint32_t>(thread_id));
  append_string(payload, name);
  write_definition(session, format::DefinitionId::thread, payload);
}

uint16_t category_index(Registry& reg, std::string_view category) {
  for (size_t i = 0; i < reg.categories.size(); ++i)
    if (reg.categories[i] == category) return static_cast<uint16_t>(i);
  if (reg.categories.size() >= format::kMaxCategories) return format::kMaxCategories - 1;  // shares the last
  reg.categories.emplace_back(category);
  return static_cast<uint16_t>(reg.categories.size() - 1);
}

// Registry mutex held. Category `index` takes the state the session's rules give it; the first
// time, its name goes into the mapping's category table.
void set_category_state(Session& session, Registry& reg, uint16_t index) {
  const uint8_t state = session.rules.state_of(reg.categories[index]);
  ShmHeader& header = *session.header;
  header.category_enabled[index].store(state, std::memory_order_relaxed);
  detail::g_category_state[index].store(state, std::memory_order_relaxed);
  if (index < header.category_count.load(std::memory_order_relaxed)) return;
  auto* table = reinterpret_cast<format::CategoryEntry*>(session.file.base + header.categories_offset);
  const std::string& name = reg.categories[index];
  const size_t length = std::min(name.size(), format::kCategoryNameSize - 1);
  std::memcpy(table[index].name, name.data(), length);
  table[index].name[length] = '\0';
  header.category_count.store(index + 1u, std::memory_order_release);
}

// Starts packet `seq` of the writer's channel in its ring slot. A reader copying that slot
// checks packet_seq_num before and after: it is set to kSeqRewriting first, then to the new
// sequence number once the header is whole (the flight recorder's seqlock).
void open_packet(Session& session, ThreadWriter& writer, uint64_t seq, uint64_t ticks) {
  ChannelDescriptor& desc = channel(session, writer.channel);
  uint8_t* slot = format::ring_slot(session.file.base, *session.header, writer.channel, seq);
  auto* packet = reinterpret_cast<PacketHeader*>(slot);
  packet->packet_seq_num.store(format::kSeqRewriting, std::memory_order_relaxed);
  format::memory_fence(std::memory_order_release);
  packet->magic = format::kPacketMagic;
  std::memcpy(packet->uuid, session.header->uuid, 16);
  packet->stream_id = format::kStreamThread;
  packet->stream_instance_id = format::stream_instance(writer.channel, desc.epoch.load(std::memory_order_relaxed));
  // Atomic (a plain store on x86): the collector reads the open packet's start under the seqlock.
  std::atomic_ref<uint64_t>(packet->timestamp_begin).store(ticks, std::memory_order_relaxed);
  packet->timestamp_end.store(ticks, std::memory_order_relaxed);
  packet->content_size_bits.store(format::kPacketHeaderSize * 8, std::memory_order_relaxed);
  packet->packet_size_bits = uint64_t{session.header->packet_size} * 8;
  packet->events_discarded.store(desc.events_discarded.load(std::memory_order_relaxed), std::memory_order_relaxed);
  packet->thread_id = static_cast<uint32_t>(desc.thread_id);
  packet->pid = static_cast<uint32_t>(session.header->pid);
  packet->packet_seq_num.store(seq, std::memory_order_release);
  writer.packet = packet;
  writer.pos = slot + format::kPacketHeaderSize;
  writer.end = slot + session.header->packet_size;
  writer.last_ticks = ticks;
  writer.events_in_packet = 0;
}

// Closes the writer's open packet `seq`: its event count and final discard count first (a
// signal handler may have counted drops in the channel only), then the release store that
// hands it to the collector.
void close_packet(Session& session, ThreadWriter& writer, uint64_t seq) {
  ChannelDescriptor& desc = channel(session, writer.channel);
  format::packet_event_count(session.file.base, *session.header, writer.channel, seq)
      ->store(writer.events_in_packet, std::memory_order_relaxed);
  writer.discarded_published = desc.events_discarded.load(std::memory_order_relaxed);
  writer.packet->events_discarded.store(writer.discarded_published, std::memory_order_relaxed);
  desc.packets_committed.store(seq + 1, std::memory_order_release);
  writer.packet = nullptr;
  writer.pos = writer.end = nullptr;
}

// `events` more events of `category` lost by the writer's channel, in its row (an atomic add: a
// signal handler on this thread may count too). Nothing when the category is not known yet.
void count_category_discard(ThreadWriter& writer, uint16_t category, uint32_t events = 1) {
  if (category < format::kMaxCategories && writer.category_counts)
    writer.category_counts[category].discarded.fetch_add(events, std::memory_order_relaxed);
}

// Counts `events` lost events of the writer's channel. The open packet (if any) keeps the count
// current, so it is right even if the process dies now. An atomic add: a signal handler on
// this thread may count a nested drop in between.
void note_discarded(ChannelDescriptor& desc, ThreadWriter& writer, uint64_t ticks, uint16_t category,
                    uint32_t events = 1) {
  const uint64_t discarded = desc.events_discarded.fetch_add(events, std::memory_order_relaxed) + events;
  count_category_discard(writer, category, events);
  if (!writer.packet) return;
  writer.packet->events_discarded.store(discarded, std::memory_order_relaxed);
  writer.packet->timestamp_end.store(std::max(ticks, writer.last_ticks), std::memory_order_release);
}

// Signal handlers that may touch a session's mapping, on any thread, whether it ever traced or
// not, and whatever state the thread they interrupted is in (a slow path, for which stop() does
// not wait, included): a handler counts itself in (seq_cst) before it loads the current session
// (seq_cst); stop() clears the current session (seq_cst) and, before it unmaps, waits for the
// count to reach 0 (seq_cst load). Both sides are seq_cst so that each store comes before the
// other side's load in one total order: either the handler sees no session, or stop() sees the
// handler and waits. The handler leaves with release, so its writes into the mapping happen
// before stop()'s unmap.
std::atomic<int> g_handlers_in_mapping{0};

class HandlerMappingAccess {
 public:
  HandlerMappingAccess() {
    g_handlers_in_mapping.fetch_add(1, std::memory_order_seq_cst);
    session_ = registry().current.load(std::memory_order_seq_cst);
    if (session_ && !session_->header) session_ = nullptr;
  }
  ~HandlerMappingAccess() { g_handlers_in_mapping.fetch_sub(1, std::memory_order_release); }
  HandlerMappingAccess(const HandlerMappingAccess&) = delete;
  HandlerMappingAccess& operator=(const HandlerMappingAccess&) = delete;
  Session* session() const { return session_; }

 private:
  Session* session_;
};

// The session a writer of `generation` writes to, if it is still the running one.
Session* session_of(uint32_t generation) {
  Session* session = registry().current.load(std::memory_order_acquire);
  return session && session->generation == generation ? session : nullptr;
}

bool open_next_packet(Session& session, ThreadWriter& writer, uint64_t ticks);

// Registry mutex held. Closes the calling thread's channel in `session`: its open packet is
// handed to the collector, and the channel may go to the next thread that attaches. Discards
// that no packet carries yet (the thread had none open) go into an empty packet, or, with no
// free slot for one, into the session's count of events that had no room.
void close_channel(Session& session, ThreadWriter& writer) {
  if (writer.channel == kNoChannel) return;
  ChannelDescriptor& desc = channel(session, writer.channel);
  if (!writer.packet && desc.events_discarded.load(std::memory_order_relaxed) > writer.discarded_published &&
      !open_next_packet(session, writer, std::max(detail::read_ticks(), writer.last_ticks)))
    session.header->events_no_channel.fetch_add(
        desc.events_discarded.load(std::memory_order_relaxed) - writer.discarded_published, std::memory_order_relaxed);
  if (writer.packet) close_packet(session, writer, desc.packets_committed.load(std::memory_order_relaxed));
  desc.state.store(static_cast<uint32_t>(format::ChannelState::closed), std::memory_order_release);
  session.channel_releases.fetch_add(1, std::memory_order_relaxed);
  // The collector frees the ring for the next thread sooner if it is told now.
  if (session.header->policy == format::BufferPolicy::stream &&
      session.header->collector_waiting.load(std::memory_order_relaxed) != 0)
    collector::request_drain(*session.header);
}

void forget_thread_state(Registry& reg, std::atomic<uint8_t>* state) {
  auto& states = reg.thread_states;
  states.erase(std::remove(states.begin(), states.end(), state), states.end());
}

// The pthread key destructor: runs after the thread's C++ thread_local destructors (glibc calls
// those first), so their trace points are still recorded. One that traces after this runs
// attaches again and sets the key again, and glibc calls this once more.
void close_thread_channel(void*) {
  ThreadWriter& writer = detail::t_writer;
  SlowPathScope scope;
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  if (Session* session = session_of(writer.generation)) close_channel(*session, writer);
  forget_thread_state(reg, &writer.state);
  t_state_listed = false;
  reset_writer(writer);
}

void fill_random(uint8_t* out, size_t size) {
  std::random_device device;
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<uint8_t>(device());
}

// The trace names the mapping it is collected from until it is finished, so that a reader of a
// trace this process did not live to finish says so, and `chronicle recover` finds the rest
// (shm/trace_source.hpp). Without it the trace is still written; it just cannot be recovered.
void name_trace_source(const Session& session) {
  try {
    shm::write_trace_source(session.config.output, session.file.path);
  } catch (const std::exception& error) {
    fmt::print(stderr, "chronicle: warning: {}: a trace cut by this process's death could not be recovered\n",
               error.what());
  }
}

void run_collector(Session* session) {
  try {
    collector::SessionMapping mapping(session->file.base, session->file.size);
    collector::CollectorOptions layout;
    layout.compress = session->config.compress;
    layout.unit_writer = session->unit_writer;
    collector::Collector collector(mapping, session->config.output, layout);
    name_trace_source(*session);
    // Idle polls back off from 0.5 ms to the configured interval, so a busy program is drained
    // promptly and an idle one costs next to nothing.
    const std::chrono::microseconds shortest(500);
    const std::chrono::microseconds longest = session->config.drain_interval;
    std::chrono::microseconds idle_sleep = std::min(shortest, longest);
    std::unique_lock lock(session->collector_mutex);
    while (!session->collector_stop && session->crash_signal.load(std::memory_order_acquire) == 0) {
      lock.unlock();
      const size_t drained = collector.drain();
      if (drained == 0) {
        collector.wait_for_work(idle_sleep);
        idle_sleep = std::min(idle_sleep * 2, longest);
      } else {
        idle_sleep = std::min(shortest, longest);
      }
      lock.lock();
    }
    lock.unlock();
    collector.finish();
    shm::remove_trace_source(session->config.output);
    if (session->crash_signal.load(std::memory_order_acquire) != 0) {
      session->crash_flushed.store(1, std::memory_order_release);
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&session->crash_flushed), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr,
              nullptr, 0);
    }
  } catch (const std::exception& error) {
    std::lock_guard lock(session->collector_mutex);
    session->collector_error = error.what();
    fmt::print(stderr, "chronicle: collector: {}\n", error.what());
  }
}

bool fail(Registry& reg, std::string message) {
  reg.last_error = std::move(message);
  return false;
}

uint64_t round_up(uint64_t value, uint64_t to) {
  return (value + to - 1) / to * to;
}

// Whether packet `seq` of the channel can be opened now: always in flight mode; in stream mode
// once the collector has consumed what its slot held.
bool slot_free(const ShmHeader& header, const ChannelDescriptor& desc, uint64_t seq) {
  return header.policy != format::BufferPolicy::stream ||
         seq - desc.packets_consumed.load(std::memory_order_acquire) < header.packets_per_channel;
}

// Registry mutex held. Makes channel `index` the next thread's: a new epoch, whose discard count
// starts from 0 (the previous thread's last packet carries its own).
uint32_t reuse_channel(Session& session, uint32_t index) {
  ChannelDescriptor& desc = channel(session, index);
  desc.epoch.store(desc.epoch.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  desc.events_discarded.store(0, std::memory_order_relaxed);
  return index;
}

// Registry mutex held. A closed channel whose ring has room for a packet now; or, in flight
// mode, none (new channels go first there, so dead threads' windows stay readable longest).
uint32_t closed_channel_with_room(Session& session, bool any_closed) {
  const ShmHeader& header = *session.header;
  const uint32_t used = header.channel_count.load(std::memory_order_relaxed);
  for (uint32_t index = 0; index < used; ++index) {
    const ChannelDescriptor& desc = channel(session, index);
    if (desc.state.load(std::memory_order_relaxed) != static_cast<uint32_t>(format::ChannelState::closed)) continue;
    if (any_closed || slot_free(header, desc, desc.packets_committed.load(std::memory_order_relaxed))) return index;
  }
  return kNoChannel;
}

// Registry mutex held. A new channel whose ring memory can be reserved, or kNoChannel. The last
// max_channels - max_threads are kept for the session's own threads, so that the session's own
// figures and samples never take a ring from a thread of the program.
uint32_t new_channel(Session& session, bool for_session_thread) {
  ShmHeader& header = *session.header;
  const uint32_t used = header.channel_count.load(std::memory_order_relaxed);
  const uint32_t own = header.max_channels - session.config.max_threads;
  const uint32_t kept = own > session.own_channels_taken ? own - session.own_channels_taken : 0;
  const uint32_t limit = for_session_thread ? header.max_channels : header.max_channels - kept;
  if (used >= limit) return kNoChannel;
  const uint64_t ring_offset = header.rings_offset + uint64_t{used} * format::ring_bytes(header);
  const uint64_t row_offset = header.category_counts_offset + uint64_t{used} * format::kCategoryCountsRowSize;
  if (!shm::reserve(session.file.fd, ring_offset, format::ring_bytes(header)) ||
      !shm::reserve(session.file.fd, row_offset, format::kCategoryCountsRowSize)) {
    if (header.channels_without_memory.fetch_add(1, std::memory_order_relaxed) == 0 && session.tell_no_memory)
      fmt::print(stderr, "chronicle: warning: {}\n",
                 recorder::no_memory_for_rings(session.config.shm_dir, format::ring_bytes(header)));
    return kNoChannel;
  }
  ChannelDescriptor& desc = channel(session, used);
  desc.packets_committed.store(0, std::memory_order_relaxed);
  desc.events_discarded.store(0, std::memory_order_relaxed);
  desc.packets_consumed.store(0, std::memory_order_relaxed);
  desc.epoch.store(0, std::memory_order_relaxed);
  header.channel_count.store(used + 1, std::memory_order_release);
  if (for_session_thread) ++session.own_channels_taken;
  return used;
}

// Registry mutex held. A channel for a new thread: in stream mode a closed one that has room (no
// new memory), else a new one, else any closed one (its thread then waits for a free slot,
// counting its events as discarded). kNoChannel when there is none.
uint32_t claim_channel(Session& session) {
  if (t_is_session_thread) return new_channel(session, true);
  const bool stream = session.header->policy == format::BufferPolicy::stream;
  if (stream) {
    if (uint32_t index = closed_channel_with_room(session, false); index != kNoChannel)
      return reuse_channel(session, index);
  }
  if (uint32_t index = new_channel(session, false); index != kNoChannel) return index;
  if (uint32_t index = closed_channel_with_room(session, true); index != kNoChannel)
    return reuse_channel(session, index);
  return kNoChannel;
}

// Opens the next packet of the writer's channel if its ring slot is free. Returns whether it did.
bool open_next_packet(Session& session, ThreadWriter& writer, uint64_t ticks) {
  ChannelDescriptor& desc = channel(session, writer.channel);
  const uint64_t seq = desc.packets_committed.load(std::memory_order_relaxed);
  if (!slot_free(*session.header, desc, seq)) return false;
  open_packet(session, writer, seq, ticks);
  return true;
}

}  // namespace

namespace detail {

bool attach_thread(ThreadWriter& writer, uint32_t generation) {
  if (generation == kForkedChildPending && (generation = start_forked_child_session()) == 0) return false;
  SlowPathScope scope;
  if (!scope.entered()) {
    count_nested_drop(writer, format::kNoCategory);
    return false;
  }
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  Session* session = session_of(generation);
  if (!session) return false;
  if (!t_state_listed) reg.thread_states.push_back(&writer.state);
  t_state_listed = true;
  pthread_setspecific(reg.thread_exit_key, &writer);
  // Nested drops count as "no channel" until the channel is whole.
  reset_writer(writer);
  writer.generation = generation;
  const uint32_t index = claim_channel(*session);
  if (index == kNoChannel) {
    // Events of this thread are counted as lost in switch_packet (pos == end == nullptr) until
    // a channel is released.
    writer.releases_seen = session->channel_releases.load(std::memory_order_relaxed);
    return true;
  }
  ChannelDescriptor& desc = channel(*session, index);
  desc.thread_id = static_cast<int32_t>(syscall(SYS_gettid));
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  std::memcpy(desc.thread_name, name, sizeof name);
  define_thread(*session, desc.thread_id, name);
  desc.state.store(static_cast<uint32_t>(format::ChannelState::active), std::memory_order_release);
  writer.channel = index;
  writer.category_counts = category_counts_row(*session, index);
  // A reused ring may still be full of the previous thread's packets: then this thread starts
  // without a packet and counts its events as discarded until a slot is free.
  open_next_packet(*session, writer, std::max(read_ticks(), session->header->clock.ticks_at_start));
  return true;
}

bool switch_packet(ThreadWriter& writer, uint16_t category, uint64_t ticks, size_t needed) {
  Session* session = session_of(writer.generation);
  if (!session) return false;
  if (writer.channel == kNoChannel) {
    session->header->events_no_channel.fetch_add(1, std::memory_order_relaxed);
    // A channel was released since this thread found none: attach again at the next event.
    if (session->channel_releases.load(std::memory_order_relaxed) != writer.releases_seen) writer.generation = 0;
    return false;
  }
  ChannelDescriptor& desc = channel(*session, writer.channel);
  const bool fits_a_packet = needed <= session->header->packet_size - format::kPacketHeaderSize;
  if (!fits_a_packet) {
    note_discarded(desc, writer, ticks, category);
    return false;
  }
  const uint64_t seq = desc.packets_committed.load(std::memory_order_relaxed);
  if (writer.packet) {
    const bool must_wait =
        session->header->policy == format::BufferPolicy::stream &&
        seq + 1 - desc.packets_consumed.load(std::memory_order_acquire) >= session->header->packets_per_channel;
    if (must_wait) {
      note_discarded(desc, writer, ticks, category);
      return false;
    }
    close_packet(*session, writer, seq);
  }
  if (!open_next_packet(*session, writer, ticks)) {
    note_discarded(desc, writer, ticks, category);
    return false;
  }
  // Past a quarter full, a sleeping collector is woken rather than left to its timer: one syscall
  // per packet, and only while the ring is filling.
  const uint64_t open_seq = desc.packets_committed.load(std::memory_order_relaxed);
  if (session->header->policy == format::BufferPolicy::stream &&
      session->header->collector_waiting.load(std::memory_order_relaxed) != 0 &&
      4 * (open_seq + 1 - desc.packets_consumed.load(std::memory_order_relaxed)) >=
          session->header->packets_per_channel)
    collector::request_drain(*session->header);
  return true;
}

// `events` lost by a signal handler on a thread inside a trace point or a slow path. stop() waits
// for the first (state kWritingEvents, which cannot end before this handler returns) but not for
// the second, so the count is made under the handlers' guard, which stop() waits for before it
// unmaps. Atomic adds: the interrupted writer owns the open packet and may be counting too.
void count_nested_drops(ThreadWriter& writer, uint32_t generation, uint16_t category, uint32_t events) {
  HandlerMappingAccess access;
  Session* session = access.session();
  if (!session || session->generation != generation) return;
  recorder::test_pause(recorder::TestPoint::nested_drop_counting);
  if (writer.channel == kNoChannel) {
    session->header->events_no_channel.fetch_add(events, std::memory_order_relaxed);
    return;
  }
  channel(*session, writer.channel).events_discarded.fetch_add(events, std::memory_order_relaxed);
  count_category_discard(writer, category, events);
}

void count_nested_drop(ThreadWriter& writer, uint16_t category) {
  count_nested_drops(writer, writer.generation, category, 1);
}

void count_group_drops(ThreadWriter& writer, uint32_t generation, uint16_t category, uint32_t events, bool nested) {
  if (nested) return count_nested_drops(writer, generation, category, events);
  // Inside the writer's own trace point, which stop() waits for: no guard (a group that finds no
  // room while the collector is behind is counted here, for every group of an overloaded thread).
  Session* session = session_of(generation);
  if (!session) return;
  if (writer.channel == kNoChannel) {
    session->header->events_no_channel.fetch_add(events, std::memory_order_relaxed);
    return;
  }
  note_discarded(channel(*session, writer.channel), writer, writer.last_ticks, category, events);
}

void count_discarded(uint32_t generation, uint16_t category) {
  ThreadWriter& writer = t_writer;
  if (writer.generation != generation) return;
  if (!enter_trace_point(writer, category)) return;
  Session* session = session_of(generation);
  if (session && writer.channel != kNoChannel)
    note_discarded(channel(*session, writer.channel), writer, read_ticks(), category);
  leave_trace_point(writer);
}

uint32_t intern_site_locked(Registry& reg, Site& site);

uint32_t intern_site(Site& site) {
  SlowPathScope scope;
  if (!scope.entered()) {
    count_nested_drop(t_writer, format::kNoCategory);
    return 0;
  }
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  return intern_site_locked(reg, site);
}

// Registry mutex held.
uint32_t intern_site_locked(Registry& reg, Site& site) {
  uint32_t id = site.id.load(std::memory_order_relaxed);
  if (id != 0) return id;
  site.category_index = category_index(reg, site.category);
  reg.sites.push_back(&site);
  id = static_cast<uint32_t>(reg.sites.size());
  recorder::test_pause(recorder::TestPoint::site_interning);
  if (Session* session = reg.session.get()) {
    set_category_state(*session, reg, site.category_index);
    define_site(*session, site, id);
  }
  site.id.store(id, std::memory_order_release);
  return id;
}

void emit_note(Site& site, uint32_t generation, const char* text, size_t length) {
  ThreadWriter* writer = writer_for(site, generation);
  if (!writer) return;
  const format::NotePrefix fixed{site.id.load(std::memory_order_relaxed)};
  emit_with_text(*writer, site.category_index, format::EventId::note, &fixed, sizeof fixed, text, length);
}

void emit_text_at(ThreadWriter& writer, uint16_t category, format::EventId event, const void* fixed, size_t fixed_size,
                  const char* text, size_t length, uint64_t ticks);

void emit_with_text(ThreadWriter& writer, uint16_t category, format::EventId event, const void* fixed,
                    size_t fixed_size, const char* text, size_t length) {
  emit_text_at(writer, category, event, fixed, fixed_size, text, length, read_ticks());
}

// emit_with_text for an event whose time was taken earlier.
void emit_text_at(ThreadWriter& writer, uint16_t category, format::EventId event, const void* fixed, size_t fixed_size,
                  const char* text, size_t length, uint64_t ticks) {
  // Session objects are never freed, and their config is not in the mapping: safe to read
  // before the trace point is entered.
  Session* session = session_of(writer.generation);
  if (!session) return;
  // An event never spans packets: longer text is cut to what one packet holds.
  const size_t room =
      session->config.packet_size - format::kPacketHeaderSize - format::kExtendedHeaderSize - fixed_size - 1;
  length = std::min(length, room);
  uint8_t* out = begin_event(writer, category, static_cast<uint32_t>(event), fixed_size + length + 1, ticks);
  if (!out) return;
  std::memcpy(out, fixed, fixed_size);
  uint8_t* text_out = out + fixed_size;
  if (length > 0) std::memcpy(text_out, text, length);
  text_out[length] = '\0';
  // An embedded NUL would end the CTF string early; keep the event's size honest.
  std::replace(text_out, text_out + length, uint8_t{'\0'}, uint8_t{' '});
  commit_event(writer, category, text_out + length + 1, ticks);
}

}  // namespace detail

namespace {

// ---- fork --------------------------------------------------------------------------------------
// The forking thread takes the registry lock before fork (prepare) and gives it back on both
// sides (parent, child), so the child's copy of the registry (its vectors, a site's id) is never
// one taken while another thread was halfway through an update; the child's lock is the
// forking thread's, which is the child's only thread. A fork waits for a slow path that holds the
// lock (at most stop()'s wait for writers, kQuiescenceLimit). Nothing under the lock forks.
void hold_registry_across_fork() {
  registry().mutex.lock();
}

void release_registry_in_parent() {
  registry().mutex.unlock();
}

// In a child forked without exec: it must not write into its parent's rings, nor keep the
// parent's lock on the session file (readers would think the writer alive after the parent
// died). Only this thread exists in the child, so unmapping is safe.
void forget_sessions_after_fork() {
  const bool session_of_its_own = registry().session && registry().session->from_environment;
  g_forked_from = registry().session.get();
  detail::g_generation.store(0, std::memory_order_relaxed);
  reset_writer(detail::t_writer);
  t_state_listed = false;
  Registry& child = registry();
  child.current.store(nullptr, std::memory_order_relaxed);
  if (child.session) {
    shm::forget_in_forked_child(child.session->file);
    child.session->header = nullptr;
  }
  (void)child.session.release();
  // The other threads of the parent do not exist here. The list is whole (the registry's lock was
  // held across fork): emptied, not made anew, so that its memory is not lost.
  child.thread_states.clear();
  // Not at once: a child that execs (or never traces) must leave no session behind.
  if (session_of_its_own) detail::g_generation.store(kForkedChildPending, std::memory_order_relaxed);
  child.mutex.unlock();  // taken by hold_registry_across_fork
}

// Registry mutex held; once per process.
void register_process_hooks(Registry& reg) {
  reg.exit_hook_registered = true;
  std::atexit([] { stop(); });
  pthread_key_create(&reg.thread_exit_key, close_thread_channel);
  // stop() unmaps a session only once it knows no thread writes into it (see the protocol).
  const long commands = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  reg.membarrier_ready = commands > 0 && (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
                         syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

// Registry mutex held, g_generation already 0. Waits until no thread is inside a trace point of
// the stopped session; false when that cannot be known (no membarrier) or takes too long.
bool wait_until_no_thread_writes(Registry& reg) {
  if (!reg.membarrier_ready || syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + kQuiescenceLimit;
  for (std::atomic<uint8_t>* state : reg.thread_states) {
    while (state->load(std::memory_order_acquire) == detail::kWritingEvents) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      sched_yield();
    }
  }
  return true;
}

// ---- Fatal signals: the trace says how the program ended, and keeps what came before ---------
//
// The handler does only async-signal-safe work: it writes a note on its own thread's channel
// (lock-free, as any trace point in a signal handler), stores the signal in the mapping, and,
// when this process has the collector, wakes it and waits (a futex, at most kCrashFlushLimit)
// for it to finish the trace. The collector finishes on its own thread, outside the handler; if
// the crash left it unable to (the heap broken, a lock held by the dead thread), the wait ends
// and the mapping is still there for `chronicle snapshot`. Then the previous action is put back
// and the signal goes on to it: a fault the kernel raised happens again when the handler returns
// (so a sanitizer or the core dump sees the real one), a signal sent by a process is raised again.

// Signal handlers that may touch a session's mapping are counted in g_handlers_in_mapping
// (HandlerMappingAccess, above the slow paths): the fatal and snapshot signals' handlers, and a
// trace point's nested drop (count_nested_drop).
// stop(), after it cleared the current session: false when a handler stays in the mapping
// longer than kQuiescenceLimit (it is then left mapped).
bool wait_until_no_handler_in_mapping() {
  const auto deadline = std::chrono::steady_clock::now() + kQuiescenceLimit;
  while (g_handlers_in_mapping.load(std::memory_order_seq_cst) != 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    sched_yield();
  }
  return true;
}

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr long kCrashFlushLimitNs = 2'000'000'000;
struct sigaction g_previous_actions[std::size(kFatalSignals)];
constinit Site g_fatal_site{"chronicle", "fatal signal", __FILE__, __LINE__,
                            static_cast<uint8_t>(format::SiteKind::note)};

// "SIGSEGV (address 0x0)" into `out` without a library call that could allocate or lock.
size_t describe_fatal_signal(int signal, const siginfo_t* info, char* out, size_t size) {
  const char* name = signal == SIGSEGV   ? "SIGSEGV"
                     : signal == SIGBUS  ? "SIGBUS"
                     : signal == SIGILL  ? "SIGILL"
                     : signal == SIGFPE  ? "SIGFPE"
                     : signal == SIGABRT ? "SIGABRT"
                                         : "signal";
  size_t n = 0;
  auto put = [&](char c) {
    if (n + 1 < size) out[n++] = c;
  };
  for (const char* c = name; *c; ++c) put(*c);
  if (info && info->si_code > 0 && signal != SIGABRT) {  // raised by the kernel for a fault
    for (const char* c = " (address 0x"; *c; ++c) put(*c);
    const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
    bool leading = true;
    for (int shift = 60; shift >= 0; shift -= 4) {
      const unsigned digit = (address >> shift) & 0xf;
      if (digit == 0 && leading && shift > 0) continue;
      leading = false;
      put("0123456789abcdef"[digit]);
    }
    put(')');
  }
  out[n] = '\0';
  return n;
}

void flush_after_fatal_signal(Session& session, int signal) {
  if (session.config.output.empty()) return;  // another process collects: it reads the mapping
  int expected = 0;
  if (!session.crash_signal.compare_exchange_strong(expected, signal)) return;  // another thread asked first
  collector::request_drain(*session.header);
  timespec limit{};
  clock_gettime(CLOCK_MONOTONIC, &limit);
  limit.tv_nsec += kCrashFlushLimitNs % 1'000'000'000;
  limit.tv_sec += kCrashFlushLimitNs / 1'000'000'000 + limit.tv_nsec / 1'000'000'000;
  limit.tv_nsec %= 1'000'000'000;
  while (session.crash_flushed.load(std::memory_order_acquire) == 0) {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > limit.tv_sec || (now.tv_sec == limit.tv_sec && now.tv_nsec >= limit.tv_nsec)) return;
    const timespec slice{0, 10'000'000};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&session.crash_flushed), FUTEX_WAIT_PRIVATE, 0, &slice, nullptr, 0);
  }
}

void on_fatal_signal(int signal, siginfo_t* info, void*) {
  const int saved_errno = errno;
  ThreadWriter& writer = detail::t_writer;
  if (HandlerMappingAccess access; Session* session = access.session()) {
    session->header->ended_by_signal.store(signal, std::memory_order_relaxed);
    const uint32_t id = g_fatal_site.id.load(std::memory_order_acquire);
    if (id != 0 && writer.generation == session->generation && writer.channel != kNoChannel) {
      char text[64];
      const size_t length = describe_fatal_signal(signal, info, text, sizeof text);
      const format::NotePrefix fixed{id};
      detail::emit_text_at(writer, g_fatal_site.category_index, format::EventId::note, &fixed, sizeof fixed, text,
                           length, detail::read_ticks());
    }
    flush_after_fatal_signal(*session, signal);
  }
  // Every earlier handler back, not only this signal's: the program is ending, and what comes
  // next (a sanitizer's report that aborts, say) is not a second crash to record.
  for (size_t k = 0; k < std::size(kFatalSignals); ++k) sigaction(kFatalSignals[k], &g_previous_actions[k], nullptr);
  if (!info || info->si_code <= 0) raise(signal);  // sent by a process (kill, abort): send it on
  errno = saved_errno;
}

// The snapshot signal (Config::snapshot_signal): the control thread takes the snapshot.
void on_snapshot_signal(int) {
  const int saved_errno = errno;
  if (HandlerMappingAccess access; Session* session = access.session()) {
    session->snapshot_requests.fetch_add(1, std::memory_order_release);
    // The bell's new value makes a FUTEX_WAIT about to start return at once.
    session->header->control_requests.fetch_add(1, std::memory_order_release);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&session->header->control_requests), FUTEX_WAKE, INT32_MAX, nullptr,
            nullptr, 0);
  }
  errno = saved_errno;
}

// Registry mutex held; for every session that asks (a later session may name another signal).
void install_snapshot_signal_handler(int signal) {
  struct sigaction action {};
  action.sa_handler = on_snapshot_signal;
  action.sa_flags = SA_RESTART | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(signal, &action, nullptr);
}

// Registry mutex held; once per process, at the first session that wants it.
void install_fatal_signal_handlers(Registry& reg) {
  if (reg.fatal_handlers_installed) return;
  reg.fatal_handlers_installed = true;
  struct sigaction action {};
  action.sa_sigaction = on_fatal_signal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (size_t k = 0; k < std::size(kFatalSignals); ++k) sigaction(kFatalSignals[k], &action, &g_previous_actions[k]);
}

// ---- The control thread: answers `chronicle ctl` (layout.hpp, "The control block") ----------

// The futex words of the control block are shared with other processes: no FUTEX_PRIVATE_FLAG.
// Returns after `limit` at the latest.
void wait_for_change(std::atomic<uint32_t>& word, uint32_t seen, std::chrono::nanoseconds limit) {
  const timespec relative{static_cast<time_t>(limit.count() / 1'000'000'000),
                          static_cast<long>(limit.count() % 1'000'000'000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, seen, &relative, nullptr, 0);
}

void wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

// What a request changed, for the answer and for the trace.
struct ControlOutcome {
  format::ControlStatus status = format::ControlStatus::ok;
  std::string answer;
  std::string note;  // the event that records the change; empty when nothing changed
};

// Registry mutex held. What `request` would change, or why it is refused; nothing is changed yet.
ControlOutcome check_category_request(const Session& session, const Registry& reg,
                                      const format::ControlRequest& request) {
  const std::string_view pattern = request.pattern;
  if (pattern.empty()) return {format::ControlStatus::refused, "an empty pattern matches no category", {}};
  if (request.state > format::category_state_for_level(format::kMaxLevel))
    return {
        format::ControlStatus::refused, fmt::format("level {} is above {}", request.state - 1, format::kMaxLevel), {}};
  const auto state = static_cast<uint8_t>(request.state);
  if (!session.rules.would_accept(pattern))
    return {format::ControlStatus::refused,
            fmt::format("already {} patterns set: reuse one of them", format::CategoryRules::kMaxRules),
            {}};
  ControlOutcome outcome;
  std::string matched;
  for (const std::string& category : reg.categories)
    if (format::glob_matches(pattern, category)) matched += (matched.empty() ? "" : ", ") + category;
  const std::string described = format::describe_category_state(state);
  outcome.note = fmt::format("ctl: '{}' {} ({})", pattern, described, matched.empty() ? "no category yet" : matched);
  outcome.answer = matched.empty() ? fmt::format("'{}' matches no category yet: those that appear later start {}",
                                                 pattern, described)
                                   : fmt::format("{}: {}", matched, described);
  return outcome;
}

// Registry mutex held. The request, checked, takes effect: every category's new state.
void apply_category_request(Session& session, Registry& reg, const format::ControlRequest& request) {
  session.rules.add(request.pattern, static_cast<uint8_t>(request.state));
  for (size_t i = 0; i < reg.categories.size(); ++i) set_category_state(session, reg, static_cast<uint16_t>(i));
}

// A change as an event of the control thread. Written whatever the state of its category: the
// trace always says what was switched, and when.
void record_control_note(uint32_t generation, const std::string& text) {
  static constinit Site site{"chronicle", "ctl", __FILE__, __LINE__, static_cast<uint8_t>(format::SiteKind::note)};
  if (site.id.load(std::memory_order_acquire) == 0 && detail::intern_site(site) == 0) return;
  ThreadWriter& writer = detail::t_writer;
  if (writer.generation != generation && !detail::attach_thread(writer, generation)) return;
  const format::NotePrefix fixed{site.id.load(std::memory_order_relaxed)};
  detail::emit_with_text(writer, site.category_index, format::EventId::note, &fixed, sizeof fixed, text.data(),
                         text.size());
}

// Answers ctl's request, if one waits (its number is not 0). Taking it sets the number to 0
// (layout.hpp, "The control block"), so another ring of the bell never answers it twice, and a
// request ctl withdrew or rewrote meanwhile is never taken.
void answer_request(Session& session) {
  ShmHeader& header = *session.header;
  std::atomic_ref<uint32_t> waiting(header.control_request.number);
  // ctl stores the number last (release): seeing it, the rest of the request is whole.
  const uint32_t number = waiting.load(std::memory_order_acquire);
  if (number == 0) return;
  // Another process's bytes: copied once, then checked; never read again from the mapping.
  format::ControlRequest request;
  std::memcpy(&request, &header.control_request, sizeof request);
  std::atomic_thread_fence(std::memory_order_acquire);  // the copy's loads before the take
  uint32_t expected = number;
  if (!waiting.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) return;
  request.number = number;
  request.pattern[sizeof request.pattern - 1] = '\0';
  recorder::test_pause(recorder::TestPoint::control_request_taken);
  ControlOutcome outcome;
  Registry& reg = registry();
  if (request.command != format::ControlCommand::set_category_state) {
    outcome = {
        format::ControlStatus::refused, fmt::format("unknown request {}", static_cast<uint32_t>(request.command)), {}};
  } else {
    SlowPathScope scope;
    std::lock_guard lock(reg.mutex);
    outcome = check_category_request(session, reg, request);
  }
  if (outcome.status == format::ControlStatus::ok) {
    // The note first: its time (taken once this thread has its channel, which the first note
    // attaches) comes before any event the change lets through.
    record_control_note(session.generation, outcome.note);
    SlowPathScope scope;
    std::lock_guard lock(reg.mutex);
    apply_category_request(session, reg, request);
  }
  const size_t length = std::min(outcome.answer.size(), sizeof header.control_answer - 1);
  std::memcpy(header.control_answer, outcome.answer.data(), length);
  header.control_answer[length] = '\0';
  header.control_status.store(outcome.status, std::memory_order_relaxed);
  header.control_answered.store(number, std::memory_order_release);
  wake_all(header.control_answered);
}

// A snapshot of this session's rings into Config::snapshot_dir, asked for by the snapshot signal.
// Written under a temporary name and renamed when whole, so a reader never finds half of one.
void take_snapshot(Session& session) {
  const std::string name = fmt::format("chronicle-snapshot-{}-{}", getpid(), ++session.snapshots_taken);
  const std::string directory = session.config.snapshot_dir.empty() ? "." : session.config.snapshot_dir;
  const std::string partial = fmt::format("{}/.{}.partial", directory, name);
  const std::string whole = fmt::format("{}/{}", directory, name);
  record_control_note(session.generation,
                      fmt::format("snapshot to {} (SIG{})", whole, sigabbrev_np(session.config.snapshot_signal)));
  try {
    collector::SessionMapping mapping(session.file.base, session.file.size);
    collector::Collector collector(mapping, partial);
    collector.snapshot();
    if (::rename(partial.c_str(), whole.c_str()) != 0)
      throw std::runtime_error(fmt::format("cannot rename {} to {}: {}", partial, whole, std::strerror(errno)));
    fmt::print(stderr, "chronicle: snapshot in {}: {} events\n", whole, collector.stats().events);
  } catch (const std::exception& error) {
    fmt::print(stderr, "chronicle: snapshot not written: {}\n", error.what());
  }
}

// ---- The monitor's own figures (docs/control.md): counters of category "chronicle" --------------

// Counter sites made at run time, one per name: they live as long as the process (the registry
// keeps pointers to its sites). Control thread only. Leaked, as the registry is: the last sample
// is taken by stop() at exit, after static destructors ran.
Site& self_counter_site(const std::string& name) {
  static auto* sites = new std::map<std::string, Site*>;
  const auto [entry, added] = sites->try_emplace(name, nullptr);
  // The site's name is the map's key: a map's nodes never move, and the map is never freed.
  if (added)
    entry->second = new Site{"chronicle", entry->first.c_str(), __FILE__, __LINE__,
                             static_cast<uint8_t>(format::SiteKind::counter)};
  return *entry->second;
}

// Writes the session's figures as counters, each a total since the session began: per category
// "events/C", "bytes/C", "discarded/C" (when they changed since the last sample), and for the
// process "events", "bytes", "discarded", "event cost ns" (measured at start) and "CPU overhead %"
// (the events since the last sample x
// the per-event cost measured at start, over the time since it: % of one core). They obey the
// "chronicle" category like any trace point.
class SelfSampler {
 public:
  explicit SelfSampler(Session& session) : session_(session), last_ns_(recorder::read_monotonic_ns()) {}
  void write() {
    const uint32_t generation = session_.generation;
    collector::SessionMapping mapping(session_.file.base, session_.file.size);
    const std::vector<collector::CategoryView> categories = mapping.categories();
    for (const collector::CategoryView& category : categories) {
      const std::array<uint64_t, 3> values{category.events, category.bytes, category.discarded};
      auto [last, first] = written_.try_emplace(category.name, values);
      if (!first && last->second == values) continue;
      last->second = values;
      detail::emit_counter(self_counter_site("events/" + category.name), generation, category.events);
      detail::emit_counter(self_counter_site("bytes/" + category.name), generation, category.bytes);
      detail::emit_counter(self_counter_site("discarded/" + category.name), generation, category.discarded);
    }
    const uint64_t now_ns = recorder::read_monotonic_ns();
    const double elapsed_ps = static_cast<double>(std::max<uint64_t>(now_ns - last_ns_, 1)) * 1000.0;
    const collector::SessionTotals totals = collector::session_totals(categories, *session_.header);
    const double busy_ps =
        static_cast<double>(totals.events - last_events_) * static_cast<double>(session_.header->event_cost_ps);
    last_events_ = totals.events;
    last_ns_ = now_ns;
    detail::emit_counter(self_counter_site("events"), generation, totals.events);
    detail::emit_counter(self_counter_site("bytes"), generation, totals.bytes);
    detail::emit_counter(self_counter_site("discarded"), generation, totals.discarded);
    detail::emit_counter(self_counter_site("CPU overhead %"), generation, 100.0 * busy_ps / elapsed_ps);
    detail::emit_counter(self_counter_site("event cost ns"), generation,
                         static_cast<double>(session_.header->event_cost_ps) / 1000.0);
  }

 private:
  Session& session_;
  std::map<std::string, std::array<uint64_t, 3>> written_;
  uint64_t last_events_ = 0;
  uint64_t last_ns_;
};

// Asks the control thread for a last sample and waits for it (a bounded time: a control thread
// that hangs must not hang stop()). Called by stop() before it retires the session, so the sample
// counts every event written until then.
void take_final_sample(Session& session) {
  if (!session.has_control_thread.load(std::memory_order_acquire) || session.config.self_stats_interval.count() == 0)
    return;
  session.final_sample.store(1, std::memory_order_release);
  session.header->control_requests.fetch_add(1, std::memory_order_release);
  wake_all(session.header->control_requests);
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (session.final_sample.load(std::memory_order_acquire) != 2 && std::chrono::steady_clock::now() < limit) {
    const timespec slice{0, 10'000'000};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&session.final_sample), FUTEX_WAIT_PRIVATE, 1, &slice, nullptr, 0);
  }
}

// Stream policy, with a collector draining the rings: the control thread hands its packet over
// after each sample. It writes a few events a second, so its open packet would take minutes to
// fill, and the start of an open packet is the time below which the collector says the trace is
// complete (collector::Collector::complete_bound): what `record --otlp-endpoint` pushes while the
// program runs would stop at the first sample. (The flight policy keeps its packets: its ring is
// a window of the latest ones. With no collector, a packet a sample would fill its ring in
// seconds.) In a slow path of its own, as switch_packet is, so that a signal handler tracing on
// this thread meanwhile is counted as a nested drop.
void hand_over_control_packet(Session& session) {
  if (session.header->policy != format::BufferPolicy::stream ||
      session.header->collector_pid.load(std::memory_order_relaxed) == 0)
    return;
  ThreadWriter& writer = detail::t_writer;
  SlowPathScope scope;
  if (!scope.entered() || !writer.packet || session_of(writer.generation) != &session) return;
  close_packet(session, writer, channel(session, writer.channel).packets_committed.load(std::memory_order_relaxed));
}

void run_control(Session* session) {
  pthread_setname_np(pthread_self(), "chronicle-ctl");
  t_is_session_thread = true;
  ShmHeader& header = *session->header;
  const auto interval = session->config.self_stats_interval;
  SelfSampler sampler(*session);
  auto next_sample = std::chrono::steady_clock::now() + interval;
  uint32_t seen = header.control_requests.load(std::memory_order_acquire);
  // What rang the bell before that load (the snapshot signal as soon as start() returned, a ctl
  // request as soon as the mapping was there): the wait below returns only for later rings.
  // The load acquired the handler's or ctl's ring, which comes after its request.
  if (session->snapshot_requests.exchange(0, std::memory_order_acquire) != 0) take_snapshot(*session);
  answer_request(*session);
  for (;;) {
    // Both checked after `seen` was loaded: a stop() that stored its flag (or asked for the last
    // sample) and bumped the word before that load is seen here, since its store comes before its
    // bump; one that bumps later changes the word this thread waits on, so the wait returns.
    if (session->control_stop.load(std::memory_order_acquire)) return;
    if (session->final_sample.load(std::memory_order_acquire) == 1) {
      sampler.write();
      hand_over_control_packet(*session);
      session->final_sample.store(2, std::memory_order_release);
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&session->final_sample), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr,
              0);
    } else if (interval.count() != 0 && std::chrono::steady_clock::now() >= next_sample) {
      sampler.write();
      hand_over_control_packet(*session);
      next_sample = std::chrono::steady_clock::now() + interval;
    }
    const auto until_sample =
        interval.count() == 0 ? std::chrono::nanoseconds(std::chrono::hours(1))
                              : std::max<std::chrono::nanoseconds>(next_sample - std::chrono::steady_clock::now(), {});
    wait_for_change(header.control_requests, seen, until_sample);
    const uint32_t now = header.control_requests.load(std::memory_order_acquire);
    if (now == seen) continue;  // woken for nothing, or for a sample (or FUTEX_WAIT interrupted)
    seen = now;
    if (session->snapshot_requests.exchange(0, std::memory_order_acquire) != 0) take_snapshot(*session);
    answer_request(*session);
  }
}

// After stop() retired the session (the thread writes nothing more into it) and before it is
// unmapped.
void end_control_thread(Session& session) {
  if (!session.control_thread.joinable()) return;
  session.control_stop.store(true, std::memory_order_release);
  session.header->control_requests.fetch_add(1, std::memory_order_release);
  wake_all(session.header->control_requests);
  session.control_thread.join();
}

// ---- The sampling profiler (docs/profiling.md) ---------------------------------------------------
// The perf events are opened by start() on the thread that calls it (the kernel then follows the
// threads it starts), or where they are refused the timers (sampler/timer_sampler.hpp); the
// sampler thread drains their rings every kSamplerPeriod and writes each record as an event of
// its own channel, in time order. Records newer than the watermark (now less
// kSamplerHoldBack) wait for the next round: another CPU's ring may still get an older one, and a
// stream's times never go back. Samples obey category "profile", switches "sched".

// At most this long between two rounds; sooner when a ring is a quarter full (a burst of switches).
constexpr auto kSamplerPeriod = std::chrono::milliseconds(100);
constexpr uint64_t kSamplerHoldBackNs = 2'000'000;
using sampler::kMaxFrames;

Site g_sample_site{"profile", "cpu_sample", __FILE__, __LINE__, static_cast<uint8_t>(format::SiteKind::instant)};
Site g_switch_site{"sched", "cpu_switch", __FILE__, __LINE__, static_cast<uint8_t>(format::SiteKind::instant)};

// Maps a CLOCK_MONOTONIC time to the session's ticks: from a pair read now, so that the error of
// the frequency estimate applies to milliseconds only.
class TickConverter {
 public:
  explicit TickConverter(const format::ClockCalibration& clock) : clock_(clock) {}
  void refresh() {
    if (!clock_.is_tsc) return;
    frequency_ = static_cast<double>(recorder::refined_frequency(clock_));
    pair_ticks_ = detail::read_ticks();
    pair_ns_ = recorder::read_monotonic_ns();
  }
  uint64_t ticks(uint64_t monotonic_ns) const {
    if (!clock_.is_tsc) return monotonic_ns;
    const double offset_ns = static_cast<double>(static_cast<int64_t>(monotonic_ns - pair_ns_));
    return pair_ticks_ + static_cast<uint64_t>(static_cast<int64_t>(offset_ns * frequency_ / 1e9));
  }

 private:
  format::ClockCalibration clock_;
  double frequency_ = 1e9;
  uint64_t pair_ticks_ = 0;
  uint64_t pair_ns_ = 0;
};

class SampleWriter {
 public:
  explicit SampleWriter(Session& session) : session_(session), ticks_(session.header->clock) {}

  // One round; `last`: everything left (the events are disabled).
  void drain(bool last) {
    ticks_.refresh();
    const uint64_t watermark = last ? UINT64_MAX : recorder::read_monotonic_ns() - kSamplerHoldBackNs;
    session_.stack_sampler->read(pending_);
    define_new_modules();
    std::vector<uint32_t> ready;
    for (uint32_t i = 0; i < pending_.records.size(); ++i)
      if (pending_.records[i].time_ns <= watermark) ready.push_back(i);
    std::stable_sort(ready.begin(), ready.end(), [this](uint32_t a, uint32_t b) {
      return pending_.records[a].time_ns < pending_.records[b].time_ns;
    });
    name_new_threads(ready);
    for (const uint32_t index : ready) write(pending_.records[index]);
    for (uint64_t lost = 0; lost < pending_.lost; ++lost)
      detail::count_discarded(session_.generation, g_sample_site.category_index);
    keep_the_rest(ready);
  }

 private:
  void write(const sampler::Record& record) {
    const bool sample = record.type == sampler::RecordType::sample;
    Site& site = sample ? g_sample_site : g_switch_site;
    ThreadWriter* writer = detail::writer_for(site, session_.generation);
    if (!writer) return;
    uint64_t ticks = ticks_.ticks(record.time_ns);
    if (sample) {
      const uint32_t frames = std::min(record.frame_count, kMaxFrames);
      const format::CpuSamplePrefix prefix{record.pid, record.tid, frames};
      const uint32_t words = record.stack_word_count;
      const size_t frames_size = frames * sizeof(uint64_t);
      const size_t size = sizeof prefix + frames_size + sizeof words + words * sizeof(uint64_t);
      uint8_t* out = detail::begin_event(*writer, site.category_index,
                                         static_cast<uint32_t>(format::EventId::cpu_sample), size, ticks);
      if (!out) return;
      uint8_t* at = out;
      std::memcpy(at, &prefix, sizeof prefix);
      at += sizeof prefix;
      std::memcpy(at, pending_.frames.data() + record.first_frame, frames_size);
      at += frames_size;
      std::memcpy(at, &words, sizeof words);
      at += sizeof words;
      std::memcpy(at, pending_.stack_words.data() + record.first_stack_word, words * sizeof(uint64_t));
      detail::commit_event(*writer, site.category_index, out + size, ticks);
      return;
    }
    const format::CpuState state = record.type == sampler::RecordType::switch_in ? format::CpuState::running
                                   : record.type == sampler::RecordType::switch_out_preempted
                                       ? format::CpuState::preempted
                                       : format::CpuState::blocked;
    const format::CpuSwitchPayload payload{record.pid, record.tid, static_cast<uint8_t>(state)};
    uint8_t* out = detail::begin_event(*writer, site.category_index, static_cast<uint32_t>(format::EventId::cpu_switch),
                                       sizeof payload, ticks);
    if (!out) return;
    std::memcpy(out, &payload, sizeof payload);
    detail::commit_event(*writer, site.category_index, out + sizeof payload, ticks);
  }

  // Threads that never wrote a trace point have no definition yet: named from /proc, so that the
  // profile names them (a thread of a child process keeps its number).
  void name_new_threads(const std::vector<uint32_t>& ready) {
    std::vector<std::pair<uint32_t, std::string>> names;
    for (const uint32_t index : ready) {
      const sampler::Record& record = pending_.records[index];
      if (!named_threads_.insert(record.tid).second || record.pid != static_cast<uint32_t>(getpid())) continue;
      std::string name = read_small_file(fmt::format("/proc/self/task/{}/comm", record.tid));
      if (!name.empty() && name.back() == '\n') name.pop_back();
      if (!name.empty()) names.emplace_back(record.tid, std::move(name));
    }
    if (names.empty()) return;
    Registry& reg = registry();
    SlowPathScope scope;
    std::lock_guard lock(reg.mutex);
    if (reg.session.get() != &session_) return;
    for (const auto& [tid, name] : names) define_thread(session_, static_cast<int32_t>(tid), name);
  }

  void define_new_modules() {
    const uint64_t loads = recorder::module_load_count();
    if (loads == module_loads_) return;
    module_loads_ = loads;
    std::vector<recorder::LoadedModule> fresh;
    for (recorder::LoadedModule& module : recorder::loaded_modules())
      if (defined_modules_.insert({module.base, module.path}).second) fresh.push_back(std::move(module));
    if (fresh.empty()) return;
    Registry& reg = registry();
    SlowPathScope scope;
    std::lock_guard lock(reg.mutex);
    if (reg.session.get() != &session_) return;
    for (const recorder::LoadedModule& module : fresh) {
      std::string payload;
      append_value(payload, format::ModuleDefinitionPrefix{module.base, module.start, module.end});
      append_string(payload, module.build_id);
      append_string(payload, module.path);
      write_definition(session_, format::DefinitionId::module, payload);
    }
  }

  void keep_the_rest(const std::vector<uint32_t>& written) {
    sampler::Batch rest;
    std::vector<bool> done(pending_.records.size(), false);
    for (const uint32_t index : written) done[index] = true;
    for (uint32_t i = 0; i < pending_.records.size(); ++i) {
      if (done[i]) continue;
      sampler::Record record = pending_.records[i];
      const auto first = pending_.frames.begin() + record.first_frame;
      record.first_frame = static_cast<uint32_t>(rest.frames.size());
      rest.frames.insert(rest.frames.end(), first, first + record.frame_count);
      const auto first_word = pending_.stack_words.begin() + record.first_stack_word;
      record.first_stack_word = static_cast<uint32_t>(rest.stack_words.size());
      rest.stack_words.insert(rest.stack_words.end(), first_word, first_word + record.stack_word_count);
      rest.records.push_back(record);
    }
    pending_ = std::move(rest);
  }

  static std::string read_small_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    char buffer[64];
    const ssize_t length = ::read(fd, buffer, sizeof buffer);
    ::close(fd);
    return length > 0 ? std::string(buffer, static_cast<size_t>(length)) : std::string();
  }

  Session& session_;
  TickConverter ticks_;
  sampler::Batch pending_;
  std::set<uint32_t> named_threads_;
  std::set<std::pair<uint64_t, std::string>> defined_modules_;
  uint64_t module_loads_ = ~uint64_t{0};
};

void run_sampler(Session* session) {
  pthread_setname_np(pthread_self(), "chronicle-smp");
  t_is_session_thread = true;
  // The channel first, so that its first packet begins before the first record it will hold.
  detail::attach_thread(detail::t_writer, session->generation);
  session->stack_sampler->enable();
  SampleWriter writer(*session);
  std::unique_lock lock(session->sampler_mutex);
  session->sampler_ready = true;
  session->sampler_wake.notify_all();
  while (!session->sampler_stop) {
    lock.unlock();
    writer.drain(false);
    session->stack_sampler->wait(kSamplerPeriod);
    lock.lock();
  }
  lock.unlock();
  session->stack_sampler->disable();
  writer.drain(true);
}

// Where the session's perf events are refused, the timers (docs/profiling.md): stacks only.
std::unique_ptr<sampler::Sampler> open_timer_sampler(const sampler::SamplerOptions& options) {
  std::string error;
  std::unique_ptr<sampler::Sampler> timers = sampler::TimerSampler::open(options, error);
  if (!timers) {
    fmt::print(stderr, "chronicle: no samples: {}\n", error);
    return nullptr;
  }
  if (options.context_switches)
    fmt::print(stderr, "chronicle: no context switches: only perf events see them, not the timer sampler\n");
  return timers;
}

// Opens the perf events on the calling thread (start()'s), before the session's own threads exist:
// they are followed too, so the tracer's own CPU time shows in the profile. Where the kernel
// refuses them, Config::sample_method (automatic) falls back to the timers, if there is a rate.
void open_sampler(Session& session) {
  sampler::SamplerOptions options;
  options.frequency = session.config.sample_frequency;
  options.context_switches = session.config.context_switches;
  const SampleMethod method = session.config.sample_method;
  std::string refused;
  if (method != SampleMethod::timer) session.stack_sampler = sampler::PerfSampler::open(options, refused);
  if (!session.stack_sampler && method != SampleMethod::timer) {
    if (method == SampleMethod::perf || options.frequency == 0) {
      fmt::print(stderr, "chronicle: no samples nor context switches: {}\n", refused);
      return;
    }
    fmt::print(stderr, "chronicle: {}: sampling with timer_create and {} instead\n", refused,
               sampler::TimerSampler::kSignalName);
  }
  if (!session.stack_sampler) session.stack_sampler = open_timer_sampler(options);
  if (!session.stack_sampler) return;
  if (const uint32_t missed = session.stack_sampler->threads_missed())
    fmt::print(stderr, "chronicle: {} thread(s) running before the session are not sampled\n", missed);
}

// The program's threads started after start() returns are then followed from their first
// instruction (by perf events; the timers find them at the sampler's next round). Bounded: a
// sampler thread that is slow to run costs samples, not the program.
void wait_for_sampler(Session& session) {
  if (!session.sampler_started) return;
  std::unique_lock lock(session.sampler_mutex);
  session.sampler_wake.wait_for(lock, std::chrono::seconds(1), [&session] { return session.sampler_ready; });
}

// Before stop() retires the session: the sampler's last round is written into it.
void end_sampler_thread(Session& session) {
  if (!session.stack_sampler || session.sampler_ended.exchange(true)) return;
  if (session.sampler_thread.joinable()) {
    {
      std::lock_guard lock(session.sampler_mutex);
      session.sampler_stop = true;
    }
    session.stack_sampler->interrupt();
    session.sampler_thread.join();
  }
  session.stack_sampler.reset();  // its rings, descriptors, timers: a retired session keeps nothing
}

// A compressing session's unit writer, its memory touched now rather than while the program's
// first ring fills (compression::UnitWriter::warm_up); null when there is none to make.
std::shared_ptr<compression::UnitWriter> warmed_unit_writer(const Config& config) {
  if (!config.compress || config.output.empty()) return nullptr;
  try {
    return collector::warmed_unit_writer(config.packet_size, 1);
  } catch (const std::exception&) {
    return nullptr;  // the collector makes its own
  }
}

}  // namespace

bool start(const Config& config) {
  Registry& reg = registry();
  SlowPathScope scope;
  // Before the lock, which threads that start to trace take: on a VM this takes milliseconds.
  std::shared_ptr<compression::UnitWriter> unit_writer = warmed_unit_writer(config);
  std::unique_lock lock(reg.mutex);
  if (reg.session) return fail(reg, "a session is already running");
  if (std::string problem = recorder::ring_geometry_problem(config.buffer_size, config.packet_size); !problem.empty())
    return fail(reg, std::move(problem));
  if (config.max_threads == 0) return fail(reg, "max_threads must be at least 1");

  auto session = std::make_unique<Session>();
  session->unit_writer = std::move(unit_writer);
  session->config = config;
  session->rules = config.armed ? format::CategoryRules()
                                : format::CategoryRules::from_list(config.categories.empty() ? "*" : config.categories);
  const char* collector_kind = std::getenv(recorder::kEnvCollector);
  const bool external_collector = collector_kind && std::string_view(collector_kind) == "external";
  session->remove_mapping_at_stop = config.armed && config.output.empty() && !external_collector;
  session->tell_no_memory = t_starting_from_environment && !external_collector;
  session->from_environment = t_starting_from_environment;
  const uint32_t packets = static_cast<uint32_t>(config.buffer_size / config.packet_size);
  const uint64_t categories_offset = format::kShmHeaderSize;
  const uint64_t table_offset = categories_offset + format::kCategoryTableSize;
  const bool sampling = config.sample_frequency > 0 || config.context_switches;
  // One for the control thread, one for the sampler's (new_channel).
  const uint32_t max_channels = config.max_threads + 1 + (sampling ? 1 : 0);
  const uint64_t table_size = round_up(uint64_t{max_channels} * sizeof(ChannelDescriptor), 4096);
  const uint64_t strings_offset = table_offset + table_size;
  const uint64_t rings_offset = strings_offset + kStringsRegionSize;
  const uint64_t packet_events_offset = rings_offset + uint64_t{max_channels} * packets * config.packet_size;
  const uint64_t category_counts_offset =
      round_up(packet_events_offset + uint64_t{max_channels} * packets * sizeof(uint32_t), 64);
  const uint64_t file_size = category_counts_offset + uint64_t{max_channels} * format::kCategoryCountsRowSize;

  // What every session needs is reserved now; each ring when its channel is first used.
  auto create = [&](const std::string& path, std::string& error, int& error_number) {
    return shm::create_writer_file(
        path, file_size, {{0, rings_offset}, {packet_events_offset, category_counts_offset - packet_events_offset}},
        session->file, error, &error_number);
  };
  static std::atomic<unsigned> serial{0};
  const std::string usual = fmt::format("{}/chronicle-{}-{}.shm", config.shm_dir, getpid(), serial++);
  std::string error;
  int error_number = 0;
  bool created = create(usual, error, error_number);
  // The usual name is predictable: a file already there (left by an earlier process with our
  // pid, or put there by another user) must not turn tracing off. Readers find any
  // chronicle-PID-*.shm, so a name with a random part does as well.
  for (int attempt = 0; !created && error_number == EEXIST && attempt < 8; ++attempt) {
    uint64_t random = 0;
    fill_random(reinterpret_cast<uint8_t*>(&random), sizeof random);
    const std::string other = fmt::format("{}/chronicle-{}-{}-{:016x}.shm", config.shm_dir, getpid(), serial++, random);
    created = create(other, error, error_number);
    if (created)
      fmt::print(stderr, "chronicle: {} already exists (not made by this session); tracing into {} instead\n", usual,
                 other);
  }
  if (!created) return fail(reg, error);
  void* mapped = session->file.base;
  session->header = new (mapped) ShmHeader{};
  ShmHeader& header = *session->header;
  header.version = format::kShmVersion;
  header.header_size = format::kShmHeaderSize;
  fill_random(header.uuid, sizeof header.uuid);
  header.pid = getpid();
  header.policy = config.mode == Mode::flight ? format::BufferPolicy::flight : format::BufferPolicy::stream;
  std::string process_name = recorder::read_process_name();
  std::strncpy(header.process_name, process_name.c_str(), sizeof header.process_name - 1);
  gethostname(header.hostname, sizeof header.hostname - 1);
  const bool use_tsc = recorder::tsc_is_usable();
  detail::g_clock_is_tsc.store(use_tsc, std::memory_order_relaxed);
  header.clock = recorder::calibrate_clock(use_tsc);
  header.packet_size = static_cast<uint32_t>(config.packet_size);
  header.packets_per_channel = packets;
  header.max_channels = max_channels;
  header.channel_table_offset = table_offset;
  header.strings_offset = strings_offset;
  header.strings_size = kStringsRegionSize;
  header.rings_offset = rings_offset;
  header.packet_events_offset = packet_events_offset;
  header.categories_offset = categories_offset;
  header.category_counts_offset = category_counts_offset;
  header.event_cost_ps = recorder::measure_event_cost_ps();
  header.file_size = file_size;
  header.state.store(static_cast<uint32_t>(format::SessionState::running), std::memory_order_relaxed);
  if (!config.output.empty()) {  // the rings' collector is this process: it holds the role (shm::take_role)
    shm::take_role(session->file.fd, offsetof(ShmHeader, collector_pid));
    header.collector_pid.store(static_cast<uint32_t>(getpid()), std::memory_order_relaxed);
  }

  auto* strings = reinterpret_cast<PacketHeader*>(session->file.base + strings_offset);
  strings->magic = format::kPacketMagic;
  std::memcpy(strings->uuid, header.uuid, 16);
  strings->stream_id = format::kStreamStrings;
  strings->stream_instance_id = 0;
  strings->timestamp_begin = header.clock.ticks_at_start;
  strings->timestamp_end.store(header.clock.ticks_at_start, std::memory_order_relaxed);
  strings->content_size_bits.store(format::kPacketHeaderSize * 8, std::memory_order_relaxed);
  strings->packet_size_bits = kStringsRegionSize * 8;
  strings->packet_seq_num.store(0, std::memory_order_relaxed);
  strings->pid = static_cast<uint32_t>(header.pid);
  session->strings_last_ticks = header.clock.ticks_at_start;

  // The fatal signal's note is interned now: its handler cannot take the registry lock.
  if (config.crash_handler) detail::intern_site_locked(reg, g_fatal_site);
  for (size_t i = 0; i < reg.categories.size(); ++i) set_category_state(*session, reg, static_cast<uint16_t>(i));
  for (size_t i = 0; i < reg.sites.size(); ++i) define_site(*session, *reg.sites[i], static_cast<uint32_t>(i + 1));
  // Magic last: a reader that sees it sees a whole header.
  format::memory_fence(std::memory_order_release);
  header.magic = format::kShmMagic;

  session->generation = reg.next_generation++;
  if (reg.next_generation == 0 || reg.next_generation == kForkedChildPending) reg.next_generation = 1;
  if (!reg.exit_hook_registered) register_process_hooks(reg);
  if (config.crash_handler) install_fatal_signal_handlers(reg);
  if (config.snapshot_signal != 0) install_snapshot_signal_handler(config.snapshot_signal);
  // Before the session is published (stop() reads stack_sampler) and before its threads exist.
  if (sampling) open_sampler(*session);
  Session* raw = session.get();
  reg.session = std::move(session);
  reg.current.store(raw, std::memory_order_release);
  if (!config.output.empty()) raw->collector_thread = std::thread(run_collector, raw);
  if (raw->stack_sampler) {
    try {
      raw->sampler_thread = std::thread(run_sampler, raw);
      raw->sampler_started = true;
    } catch (const std::system_error& error) {
      fmt::print(stderr, "chronicle: no sampler thread ({}): no samples\n", error.what());
    }
  }
  try {
    raw->control_thread = std::thread(run_control, raw);
    raw->has_control_thread.store(true, std::memory_order_release);
  } catch (const std::system_error& error) {  // no thread to spare: tracing goes on, ctl gets no answer
    fmt::print(stderr, "chronicle: no control thread ({}): `chronicle ctl` cannot change this session\n", error.what());
  }
  detail::g_context_salt_high.store(format::load_big_endian_u64(header.uuid), std::memory_order_relaxed);
  detail::g_context_salt_low.store(format::load_big_endian_u64(header.uuid + 8), std::memory_order_relaxed);
  detail::g_generation.store(raw->generation, std::memory_order_release);
  lock.unlock();  // the sampler thread takes it to attach
  wait_for_sampler(*raw);
  return true;
}

void stop() {
  Registry& reg = registry();
  // Before the lock: the control thread may need it to write (its first event attaches it).
  if (Session* running = reg.current.load(std::memory_order_acquire)) {
    end_sampler_thread(*running);
    take_final_sample(*running);
  }
  SlowPathScope scope;
  std::unique_lock lock(reg.mutex);
  if (!reg.session) return;
  Session* session = reg.session.get();
  detail::g_generation.store(0, std::memory_order_release);
  reg.current.store(nullptr, std::memory_order_seq_cst);  // seq_cst: see HandlerMappingAccess
  // The calling thread's last packet is closed here; other threads' open packets are read as
  // they stand by the collector, once they can no longer change.
  ThreadWriter& writer = detail::t_writer;
  if (writer.generation == session->generation) close_channel(*session, writer);
  reset_writer(writer);
  const bool no_writer_left = wait_until_no_thread_writes(reg);
  session->header->state.store(static_cast<uint32_t>(format::SessionState::finished), std::memory_order_release);
  reg.retired.push_back(std::move(reg.session));
  lock.unlock();  // writers' slow paths may be waiting for it, and the control thread

  end_control_thread(*session);
  if (session->collector_thread.joinable()) {
    {
      std::lock_guard stop_lock(session->collector_mutex);
      session->collector_stop = true;
    }
    collector::request_drain(*session->header);
    session->collector_thread.join();
  }
  if (!session->config.keep_shm && (!session->config.output.empty() || session->remove_mapping_at_stop))
    ::unlink(session->file.path.c_str());
  // A mapping left mapped keeps the open file and its lock: the role is given up by hand.
  shm::give_up_role(session->file.fd, offsetof(ShmHeader, collector_pid));
  const bool no_handler_left = wait_until_no_handler_in_mapping();
  shm::release(session->file, no_writer_left && no_handler_left);
  if (no_writer_left && no_handler_left) session->header = nullptr;
}

bool active() {
  return detail::g_generation.load(std::memory_order_relaxed) != 0;
}

const std::string& last_error() {
  return registry().last_error;
}

std::string shm_path() {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  return reg.session ? reg.session->file.path : std::string();
}

void set_thread_name(std::string_view name) {
  std::string truncated(name.substr(0, 15));
  pthread_setname_np(pthread_self(), truncated.c_str());
  SlowPathScope scope;
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  ThreadWriter& writer = detail::t_writer;
  Session* session = reg.session.get();
  if (!session) return;
  if (writer.generation == session->generation && writer.channel != kNoChannel) {
    ChannelDescriptor& desc = channel(*session, writer.channel);
    std::memset(desc.thread_name, 0, sizeof desc.thread_name);
    std::memcpy(desc.thread_name, truncated.data(), truncated.size());
    define_thread(*session, desc.thread_id, truncated);
  }
}

}  // namespace chronicle

// Starts a session when CHRONICLE_OUTPUT is set, so `chronicle record` traces an unmodified
// program. It lives in this file because every trace point references g_generation, which
// makes the linker keep this object file, and with it this initializer.
namespace chronicle {
namespace {

std::string process_name_for_output() {
  std::string name = recorder::read_process_name();
  return name.empty() ? std::string("process") : name;
}

// Starts the session the environment asks for (CHRONICLE_OUTPUT, `chronicle record`): true when
// it started or none is asked for, else false with the reason in `why`.
bool start_from_environment(std::string& why) {
  try {
    Config config;
    if (!config_from_environment(config)) return true;
    if (!config.output.empty())
      config.output = recorder::claim_output_directory(config.output, process_name_for_output(), getpid());
    t_starting_from_environment = true;
    const bool started = start(config);
    t_starting_from_environment = false;
    if (!started) why = last_error();
    return started;
  } catch (const std::exception& error) {
    t_starting_from_environment = false;
    why = error.what();
    return false;
  }
}

// The session of a child forked without exec (kForkedChildPending), at its first trace point:
// the environment's, as an exec'd child would start (under `record` its own mapping and
// sub-trace; with CHRONICLE_OUTPUT its own directory in the trace). Returns its generation, or 0
// (tracing off in this child) when it cannot start. Not in a signal handler that interrupted a
// trace point or slow path: that event is dropped, the next one starts the session.
uint32_t start_forked_child_session() {
  if (detail::t_writer.state.load(std::memory_order_relaxed) != detail::kOutsideTracePoint) return 0;
  std::string why;
  const bool started = start_from_environment(why);
  const uint32_t generation = detail::g_generation.load(std::memory_order_acquire);
  if (generation != kForkedChildPending) return generation;  // this thread's session, or another's
  uint32_t pending = kForkedChildPending;
  detail::g_generation.compare_exchange_strong(pending, 0, std::memory_order_acq_rel);
  if (!started) fmt::print(stderr, "chronicle: forked child not traced: {}\n", why);
  return 0;
}

struct StartFromEnvironment {
  StartFromEnvironment() {
    if (std::string why; !start_from_environment(why)) fmt::print(stderr, "chronicle: not tracing: {}\n", why);
  }
};
StartFromEnvironment g_start_from_environment;

}  // namespace
}  // namespace chronicle
