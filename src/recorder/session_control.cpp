// ---- The control thread: answers `chronicle ctl` (layout.hpp, "The control block") ----------
// ctl's requests, the snapshot signal's snapshots, and the monitor's own figures.
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "chronicle/detail/writer.hpp"
#include "collector/collector.hpp"
#include "format/category_rules.hpp"
#include "format/clock.hpp"
#include "recorder/fork_gate.hpp"
#include "recorder/session_internal.hpp"
#include "recorder/test_pause.hpp"

namespace chronicle {
namespace {

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
// process "events", "bytes", "discarded", "event cost ns" (measured at start), "tracing threads
// CPU ns" (measured: the collector's, a thread of the program or all of `record`, and this
// control thread's) and "CPU overhead %": over the time since the last sample, the events
// written since x the per-event cost (an estimate of the trace points' part) plus what the
// tracing's own threads took, as % of one core. They obey the "chronicle" category like any
// trace point.
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
    const uint64_t threads_cpu_ns = tracing_threads_cpu_ns();
    const double busy_ps =
        static_cast<double>(totals.events - last_events_) * static_cast<double>(session_.header->event_cost_ps) +
        static_cast<double>(threads_cpu_ns - std::min(threads_cpu_ns, last_threads_cpu_ns_)) * 1000.0;
    last_events_ = totals.events;
    last_threads_cpu_ns_ = threads_cpu_ns;
    last_ns_ = now_ns;
    detail::emit_counter(self_counter_site("events"), generation, totals.events);
    detail::emit_counter(self_counter_site("bytes"), generation, totals.bytes);
    detail::emit_counter(self_counter_site("discarded"), generation, totals.discarded);
    detail::emit_counter(self_counter_site("CPU overhead %"), generation, 100.0 * busy_ps / elapsed_ps);
    detail::emit_counter(self_counter_site("tracing threads CPU ns"), generation, threads_cpu_ns);
    detail::emit_counter(self_counter_site("event cost ns"), generation,
                         static_cast<double>(session_.header->event_cost_ps) / 1000.0);
  }

 private:
  Session& session_;
  // The collector's CPU time as it stored it, and this (control) thread's own.
  uint64_t tracing_threads_cpu_ns() const {
    return session_.header->collector_cpu_ns.load(std::memory_order_relaxed) +
           recorder::read_clock_ns(CLOCK_THREAD_CPUTIME_ID);
  }

  std::map<std::string, std::array<uint64_t, 3>> written_;
  uint64_t last_events_ = 0;
  uint64_t last_threads_cpu_ns_ = 0;
  uint64_t last_ns_;
};

}  // namespace

namespace session_internal {

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

}  // namespace session_internal

namespace {

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

}  // namespace

namespace session_internal {

void run_control(Session* session) {
  // Held while this thread works, let go while it waits (fork_gate.hpp).
  recorder::ForkGateScope gate;
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
    gate.unlock();
    wait_for_change(header.control_requests, seen, until_sample);
    gate.lock();
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
  recorder::join_recorder_thread(session.control_thread);
}

}  // namespace session_internal
}  // namespace chronicle
