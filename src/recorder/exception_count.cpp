// Where the C++ runtime keeps a thread's count of exceptions in flight, so that the end of a
// scoped span can ask "is an exception leaving this scope?" in two loads instead of a call of
// std::uncaught_exceptions() (~7 ns: a thread-local of libstdc++.so, through __tls_get_addr).
//
// The Itanium C++ ABI (2.2.2.1, which GCC's and clang's runtimes follow) defines the per-thread
// __cxa_eh_globals that __cxa_get_globals() returns as { __cxa_exception* caughtExceptions;
// unsigned int uncaughtExceptions; }. That layout is a fact of the ABI, but a runtime could
// differ, so it is believed only after a probe: an exception thrown while the count is watched
// must move it to 1 and back to 0, in step with std::uncaught_exceptions(). Where the probe fails
// (or the runtime is another), every check falls back to the call.
#include <cxxabi.h>

#include <atomic>
#include <exception>

#include "session_internal.hpp"

namespace chronicle::session_internal {
namespace {

enum class Probe : int { not_run, count_found, count_unknown };
std::atomic<Probe> g_probe{Probe::not_run};

const unsigned* runtime_count_address() {
  auto* globals = reinterpret_cast<const char*>(abi::__cxa_get_globals());
  return reinterpret_cast<const unsigned*>(globals + sizeof(void*));
}

struct WatchDuringUnwinding {
  const unsigned* count;
  bool* agrees;
  ~WatchDuringUnwinding() { *agrees = *count == 1 && std::uncaught_exceptions() == 1; }
};

bool count_is_where_the_abi_says() {
  const unsigned* count = runtime_count_address();
  if (*count != 0 || std::uncaught_exceptions() != 0) return false;
  bool agrees = false;
  try {
    WatchDuringUnwinding watch{count, &agrees};
    throw 0;
  } catch (int) {
  }
  return agrees && *count == 0;
}

}  // namespace

// Run once, at a session's start (not on a trace point's path: it throws).
void probe_exception_count() {
  if (g_probe.load(std::memory_order_acquire) != Probe::not_run) return;
  g_probe.store(count_is_where_the_abi_says() ? Probe::count_found : Probe::count_unknown, std::memory_order_release);
}

const unsigned* exception_count_of_this_thread() {
  if (g_probe.load(std::memory_order_acquire) != Probe::count_found) return nullptr;
  return runtime_count_address();
}

}  // namespace chronicle::session_internal
