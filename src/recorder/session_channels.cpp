// A session's channels and packets: a thread attaching to a channel, claiming or reusing one,
// switching packets, counting what is lost, and the events with text. Off the hot path (see
// chronicle/detail/writer.hpp for that); stop()'s side of the protocol is in session.cpp.
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
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>

#include <fmt/format.h>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "chronicle/detail/writer.hpp"
#include "collector/collector.hpp"
#include "recorder/session_internal.hpp"
#include "recorder/test_pause.hpp"
#include "settings/settings.hpp"
#include "shm/shm_file.hpp"

namespace chronicle {
namespace session_internal {

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
  // Spans open in another session are not roots of this one's traces (the reader of this
  // session's trace never sees their begins).
  writer.open_thread_spans = 0;
  writer.outer_span_ticks = 0;
}

ChannelDescriptor& channel(Session& session, uint32_t index) {
  return format::channel_table(session.file.base, *session.header)[index];
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

// The session a writer of `generation` writes to, if it is still the running one.
Session* session_of(uint32_t generation) {
  Session* session = registry().current.load(std::memory_order_acquire);
  return session && session->generation == generation ? session : nullptr;
}

}  // namespace session_internal

namespace {

format::CategoryCounts* category_counts_row(Session& session, uint32_t index) {
  return reinterpret_cast<format::CategoryCounts*>(session.file.base + session.header->category_counts_offset +
                                                   uint64_t{index} * format::kCategoryCountsRowSize);
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

bool open_next_packet(Session& session, ThreadWriter& writer, uint64_t ticks);

}  // namespace

namespace session_internal {

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

}  // namespace session_internal

namespace {

void forget_thread_state(Registry& reg, std::atomic<uint8_t>* state) {
  auto& states = reg.thread_states;
  states.erase(std::remove(states.begin(), states.end(), state), states.end());
}

}  // namespace

namespace session_internal {

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

}  // namespace session_internal

namespace {

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
  if (generation == kForkedChildCounted) {
    g_forked_from_header->events_no_channel.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
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
  writer.exceptions_in_flight = exception_count_of_this_thread();
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

}  // namespace chronicle
