// A tracing session: starting and stopping it, and knowing when no thread writes into it any more.
// The session's other rooms: session_channels.cpp (channels, packets, events), session_interning.cpp,
// session_signals.cpp, session_control.cpp, session_sampler.cpp, session_environment.cpp.
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
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>

#include "chronicle/config.hpp"
#include "chronicle/detail/context_state.hpp"
#include "chronicle/detail/writer.hpp"
#include "collector/collector.hpp"
#include "compression/ctfz.hpp"
#include "format/category_rules.hpp"
#include "format/clock.hpp"
#include "recorder/event_cost.hpp"
#include "recorder/fork_gate.hpp"
#include "recorder/session_internal.hpp"
#include "recorder/test_pause.hpp"
#include "settings/settings.hpp"
#include "shm/shm_file.hpp"
#include "shm/trace_source.hpp"

namespace chronicle {
namespace recorder {
std::atomic<void (*)(TestPoint)> g_test_pause{nullptr};
}  // namespace recorder

namespace detail {

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

void hold_registry_across_fork();
void release_registry_in_parent();
void forget_sessions_after_fork();

// In a forked child, the parent's session: never used, never freed (its mapping is the
// parent's), kept reachable here rather than lost.
Session* g_forked_from = nullptr;

}  // namespace

namespace session_internal {

format::ShmHeader* g_forked_from_header = nullptr;

// The fork handlers are registered with the registry, before any thread can take its lock.
Registry& registry() {
  static Registry* instance = [] {
    auto* made = new Registry;
    pthread_atfork(hold_registry_across_fork, release_registry_in_parent, forget_sessions_after_fork);
    return made;
  }();
  return *instance;
}

std::atomic<int> g_handlers_in_mapping{0};

}  // namespace session_internal

namespace {

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

// After an error the collector thread waits for stop(), as a working one does: a thread that
// ended by itself would leave forks waiting for its join (fork_gate.hpp, step 5).
void wait_until_told_to_stop(Session& session, recorder::ForkGateScope& gate) {
  gate.unlock();
  for (;;) {
    // Loaded before the flag: a stop() that sets it later bumps the word, and the wait returns.
    const uint32_t seen = session.header->drain_requests.load(std::memory_order_acquire);
    {
      std::lock_guard lock(session.collector_mutex);
      if (session.collector_stop) return;
    }
    shm::wait_for_drain_request(*session.header, seen, std::chrono::seconds(1));
  }
}

// The collector thread's first files are written (or could not be): start() may return.
void tell_collector_ready(Session& session) {
  std::lock_guard lock(session.collector_mutex);
  session.collector_ready = true;
  session.collector_wake.notify_all();
}

// Bounded: a collector thread that is slow to run (a loaded machine, a slow disk) delays the
// program's start by at most this, never stops it.
void wait_for_collector(Session& session) {
  if (!session.collector_thread.joinable()) return;
  std::unique_lock lock(session.collector_mutex);
  session.collector_wake.wait_for(lock, std::chrono::seconds(5), [&session] { return session.collector_ready; });
}

void run_collector(Session* session) {
  // Held while this thread works, let go while it waits (fork_gate.hpp).
  recorder::ForkGateScope gate;
  recorder::test_pause(recorder::TestPoint::collector_starting);
  try {
    collector::SessionMapping mapping(session->file.base, session->file.size);
    collector::CollectorOptions layout;
    layout.compress = session->config.compress;
    layout.unit_writer = session->unit_writer;
    collector::Collector collector(mapping, session->config.output, layout);
    name_trace_source(*session);
    tell_collector_ready(*session);
    // Idle polls back off from 0.5 ms to the configured interval, so that a program's first
    // events after a quiet spell are drained promptly and an idle program costs next to nothing.
    // A busy program is drained in batches: after a drain that found work the collector waits the
    // whole interval, woken early by a writer whose ring passes a quarter full (ring_protocol.md,
    // step 13), so that on a machine the program keeps busy it takes a core from the program's
    // threads a hundred times a second, not thousands.
    const std::chrono::microseconds shortest(500);
    const std::chrono::microseconds longest = session->config.drain_interval;
    std::chrono::microseconds idle_sleep = std::min(shortest, longest);
    std::unique_lock lock(session->collector_mutex);
    while (!session->collector_stop && session->crash_signal.load(std::memory_order_acquire) == 0) {
      lock.unlock();
      recorder::test_pause(recorder::TestPoint::collector_draining);
      const size_t drained = collector.drain();
      gate.unlock();  // a fork waiting for this drain goes first
      if (drained == 0) {
        collector.wait_for_work(idle_sleep);
        idle_sleep = std::min(idle_sleep * 2, longest);
      } else {
        collector.wait_for_work(longest);
        idle_sleep = std::min(shortest, longest);
      }
      gate.lock();
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
    if (!gate.held()) gate.lock();
    {
      std::lock_guard lock(session->collector_mutex);
      session->collector_error = error.what();
    }
    tell_collector_ready(*session);
    fmt::print(stderr, "chronicle: collector: {}\n", error.what());
    wait_until_told_to_stop(*session, gate);
  }
}

bool fail(Registry& reg, std::string message) {
  reg.last_error = std::move(message);
  return false;
}

uint64_t round_up(uint64_t value, uint64_t to) {
  return (value + to - 1) / to * to;
}

// ---- fork --------------------------------------------------------------------------------------
// The forking thread takes the registry lock before fork (prepare) and gives it back on both
// sides (parent, child), so the child's copy of the registry (its vectors, a site's id) is never
// one taken while another thread was halfway through an update; the child's lock is the
// forking thread's, which is the child's only thread. A fork waits for a slow path that holds the
// lock (at most stop()'s wait for writers, kQuiescenceLimit). Nothing under the lock forks.
// Before it, the fork closes the gate of the recorder's own threads (fork_gate.hpp): it waits for
// one drain of the collector or one sample of the control thread at most.
void hold_registry_across_fork() {
  recorder::fork_gate().close_for_fork();  // before the registry: fork_gate.hpp's lock order
  registry().mutex.lock();
  recorder::fork_gate().wait_for_starting_threads();  // none is created meanwhile: step 5
}

void release_registry_in_parent() {
  registry().mutex.unlock();
  recorder::fork_gate().open_after_fork();
}

// In a child forked without exec: it must not write into its parent's rings, nor keep the
// parent's lock on the session file (readers would think the writer alive after the parent
// died). Only this thread exists in the child, so unmapping is safe.
void forget_sessions_after_fork() {
  const bool session_of_its_own = registry().session && registry().session->from_environment;
  // A running session started in code: the child counts its events in the parent's mapping.
  const bool counted_in_parent = registry().session && !session_of_its_own &&
                                 registry().current.load(std::memory_order_relaxed) == registry().session.get() &&
                                 registry().session->header != nullptr;
  g_forked_from = registry().session.get();
  detail::g_generation.store(0, std::memory_order_relaxed);
  reset_writer(detail::t_writer);
  t_state_listed = false;
  Registry& child = registry();
  child.current.store(nullptr, std::memory_order_relaxed);
  if (child.session) {
    if (counted_in_parent)
      g_forked_from_header =
          static_cast<format::ShmHeader*>(shm::map_again_without_locks(child.session->file, sizeof(format::ShmHeader)));
    shm::forget_in_forked_child(child.session->file);
    child.session->header = nullptr;
  }
  (void)child.session.release();
  // The other threads of the parent do not exist here. The list is whole (the registry's lock was
  // held across fork): emptied, not made anew, so that its memory is not lost.
  child.thread_states.clear();
  // Not at once: a child that execs (or never traces) must leave no session behind.
  if (session_of_its_own) detail::g_generation.store(kForkedChildPending, std::memory_order_relaxed);
  if (g_forked_from_header) detail::g_generation.store(kForkedChildCounted, std::memory_order_relaxed);
  child.mutex.unlock();  // taken by hold_registry_across_fork
  recorder::fork_gate().open_after_fork();
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

// Signal handlers that may touch a session's mapping are counted in g_handlers_in_mapping
// (HandlerMappingAccess, session_internal.hpp): the fatal and snapshot signals' handlers, and a
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
  probe_exception_count();
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
  if (reg.next_generation == 0 || reg.next_generation >= kForkedChildCounted) reg.next_generation = 1;
  if (!reg.exit_hook_registered) register_process_hooks(reg);
  if (config.crash_handler) install_fatal_signal_handlers(reg);
  if (config.snapshot_signal != 0) install_snapshot_signal_handler(config.snapshot_signal);
  // Before the session is published (stop() reads stack_sampler) and before its threads exist.
  if (sampling) open_sampler(*session);
  Session* raw = session.get();
  reg.session = std::move(session);
  reg.current.store(raw, std::memory_order_release);
  if (!config.output.empty()) raw->collector_thread = recorder::start_recorder_thread(run_collector, raw);
  if (raw->stack_sampler) {
    try {
      raw->sampler_thread = recorder::start_recorder_thread(run_sampler, raw);
      raw->sampler_started = true;
    } catch (const std::system_error& error) {
      fmt::print(stderr, "chronicle: no sampler thread ({}): no samples\n", error.what());
    }
  }
  try {
    raw->control_thread = recorder::start_recorder_thread(run_control, raw);
    raw->has_control_thread.store(true, std::memory_order_release);
  } catch (const std::system_error& error) {  // no thread to spare: tracing goes on, ctl gets no answer
    fmt::print(stderr, "chronicle: no control thread ({}): `chronicle ctl` cannot change this session\n", error.what());
  }
  detail::g_context_salt_high.store(format::load_big_endian_u64(header.uuid), std::memory_order_relaxed);
  detail::g_context_salt_low.store(format::load_big_endian_u64(header.uuid + 8), std::memory_order_relaxed);
  detail::g_generation.store(raw->generation, std::memory_order_release);
  lock.unlock();  // the sampler thread takes it to attach
  wait_for_collector(*raw);
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
    recorder::join_recorder_thread(session->collector_thread);
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
