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
#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <iterator>

#include "chronicle/detail/writer.hpp"
#include "collector/collector.hpp"
#include "recorder/session_internal.hpp"

namespace chronicle {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr long kCrashFlushLimitNs = 2'000'000'000;
struct sigaction g_previous_actions[std::size(kFatalSignals)];

}  // namespace

namespace session_internal {

constinit Site g_fatal_site{"chronicle", "fatal signal", __FILE__, __LINE__,
                            static_cast<uint8_t>(format::SiteKind::note)};

}  // namespace session_internal

namespace {

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

}  // namespace

namespace session_internal {

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

}  // namespace session_internal
}  // namespace chronicle
