// Private to the session's files (src/recorder/session*.cpp): the state and helpers they share.
// These were one file's anonymous namespace; the using-directive at the end keeps their names
// unqualified, as they were. Include it from nowhere else.
#pragma once

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "chronicle/config.hpp"
#include "chronicle/detail/writer.hpp"
#include "compression/ctfz.hpp"
#include "format/category_rules.hpp"
#include "sampler/sampler.hpp"
#include "shm/shm_file.hpp"

namespace chronicle {
namespace session_internal {

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
  // Under collector_mutex: the collector thread wrote the trace's directory, metadata and the name
  // of its mapping, or failed to (start() waits for it, so that a program killed once start()
  // returned leaves a trace `chronicle recover` completes).
  bool collector_ready = false;
  std::condition_variable collector_wake;

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
extern thread_local constinit bool t_starting_from_environment;

// g_generation in a child forked without exec from a process whose session the environment
// started: its trace points go to attach_thread, whose first call starts the child's session.
constexpr uint32_t kForkedChildPending = ~uint32_t{0};
uint32_t start_forked_child_session();
// g_generation in a child forked without exec from a process whose session was started in code
// (chronicle::start): the child has no session of its own (its parent's configuration may name
// no output for it), so its events are counted in its parent's events_no_channel, through a
// mapping of the parent's header that holds none of its locks (docs/guarantees.md). Counted
// while the parent's session runs: its collector reads the count when it finishes.
constexpr uint32_t kForkedChildCounted = ~uint32_t{0} - 1;
extern format::ShmHeader* g_forked_from_header;

// Process-wide state. Leaked on purpose: threads may still write while static destructors run.
// Session objects are never freed (a few hundred bytes each); their mappings are, once stop()
// knows no thread can write (session.cpp, "Trace points and stop()").
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

Registry& registry();  // session.cpp, as g_handlers_in_mapping

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
extern thread_local constinit bool t_state_listed;
// Whether the calling thread is one of a session's own threads, the control thread or the
// sampler's (it has a channel kept for it).
extern thread_local constinit bool t_is_session_thread;

// Signal handlers that may touch a session's mapping, on any thread, whether it ever traced or
// not, and whatever state the thread they interrupted is in (a slow path, for which stop() does
// not wait, included): a handler counts itself in (seq_cst) before it loads the current session
// (seq_cst); stop() clears the current session (seq_cst) and, before it unmaps, waits for the
// count to reach 0 (seq_cst load). Both sides are seq_cst so that each store comes before the
// other side's load in one total order: either the handler sees no session, or stop() sees the
// handler and waits. The handler leaves with release, so its writes into the mapping happen
// before stop()'s unmap.
extern std::atomic<int> g_handlers_in_mapping;

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

// session_channels.cpp
void reset_writer(ThreadWriter& writer);
ChannelDescriptor& channel(Session& session, uint32_t index);
void close_packet(Session& session, ThreadWriter& writer, uint64_t seq);
Session* session_of(uint32_t generation);
void close_channel(Session& session, ThreadWriter& writer);
void close_thread_channel(void*);

// exception_count.cpp
void probe_exception_count();
const unsigned* exception_count_of_this_thread();  // for ThreadWriter::exceptions_in_flight

// session_interning.cpp
void write_definition(Session& session, format::DefinitionId id, const std::string& payload);
template <typename T>
void append_value(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void append_string(std::string& out, std::string_view text);
void define_site(Session& session, const Site& site, uint32_t id);
void define_thread(Session& session, int32_t thread_id, std::string_view name);
void set_category_state(Session& session, Registry& reg, uint16_t index);

// session_signals.cpp
extern Site g_fatal_site;
void install_snapshot_signal_handler(int signal);
void install_fatal_signal_handlers(Registry& reg);

// session_control.cpp
void take_final_sample(Session& session);
void run_control(Session* session);
void end_control_thread(Session& session);

// session_sampler.cpp
void run_sampler(Session* session);
void open_sampler(Session& session);
void wait_for_sampler(Session& session);
void end_sampler_thread(Session& session);

}  // namespace session_internal

using namespace session_internal;

namespace detail {
uint32_t intern_site_locked(Registry& reg, Site& site);
void emit_text_at(ThreadWriter& writer, uint16_t category, format::EventId event, const void* fixed, size_t fixed_size,
                  const char* text, size_t length, uint64_t ticks);
}  // namespace detail

}  // namespace chronicle
