// Starts a session when CHRONICLE_OUTPUT is set, so `chronicle record` traces an unmodified
// program. It lives in the file that defines g_generation because every trace point references
// g_generation, which makes the linker keep this object file of the static runtime, and with it
// this initializer.
#include <unistd.h>

#include <fmt/format.h>
#include <atomic>
#include <cstdint>
#include <exception>
#include <string>

#include "chronicle/config.hpp"
#include "chronicle/detail/writer.hpp"
#include "format/clock.hpp"
#include "recorder/session_internal.hpp"
#include "settings/settings.hpp"

namespace chronicle {
namespace detail {

std::atomic<uint32_t> g_generation{0};

}  // namespace detail

namespace session_internal {

thread_local constinit bool t_starting_from_environment = false;

}  // namespace session_internal

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

}  // namespace

namespace session_internal {

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

}  // namespace session_internal

namespace {

struct StartFromEnvironment {
  StartFromEnvironment() {
    if (std::string why; !start_from_environment(why)) fmt::print(stderr, "chronicle: not tracing: {}\n", why);
  }
};
StartFromEnvironment g_start_from_environment;

}  // namespace
}  // namespace chronicle
