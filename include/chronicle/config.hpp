// Starting and stopping a tracing session.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace chronicle {

enum class Mode {
  stream,  // a collector drains finished packets; when it falls behind, events are dropped and counted
  flight,  // the oldest packets are overwritten: the rings keep the most recent events
};

// How call-stack samples are taken (docs/profiling.md).
enum class SampleMethod {
  automatic,  // perf events, or the timers where the kernel refuses perf events
  perf,       // the kernel's perf events only: stacks and context switches
  timer,      // per-thread CPU-time timers and SIGPROF: stacks only, walked in the signal handler
};

struct Config {
  // Trace directory the in-process collector writes. Empty: no collector in this process (the
  // rings are read by `chronicle record`, `snapshot` or another reader).
  std::string output;
  Mode mode = Mode::stream;
  size_t buffer_size = size_t{4} << 20;  // per thread
  size_t packet_size = size_t{64} << 10;
  unsigned max_threads = 256;
  // Comma-separated categories to record, as globs ("net.*"; "*" for all). `chronicle ctl`
  // switches them while the session runs.
  std::string categories = "*";
  // Every category off until `chronicle ctl` switches some on (`categories` is not read): the
  // session costs a trace point one load and a few branches until then.
  bool armed = false;
  // On SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT: the trace records the signal, the
  // in-process collector (if any) finishes the trace, then the signal goes on to the handler
  // that was there before (docs/control.md, "Crashes").
  bool crash_handler = true;
  // A signal (e.g. SIGUSR2; 0: none) on which the session writes a snapshot of its rings into
  // snapshot_dir (default: the current directory), as chronicle-snapshot-PID-N.
  int snapshot_signal = 0;
  std::string snapshot_dir;
  // Where the shared mapping is created (its file: chronicle-<pid>-<n>.shm).
  std::string shm_dir = "/dev/shm";
  // How often the session writes its own figures into the trace, as counters of category
  // "chronicle" (events, bytes and discards per category, the estimated CPU overhead): 0, never.
  // A last sample is written at stop() (docs/control.md, "The monitor's own figures").
  std::chrono::milliseconds self_stats_interval{1000};
  // How long the in-process collector sleeps when it found nothing to drain.
  std::chrono::milliseconds drain_interval{10};
  // Call-stack samples per second of each thread's CPU time (0: none), and the context switches of
  // every thread (when each left and regained a CPU): events of categories "profile" and "sched",
  // from the kernel's perf events, or where they are refused (sample_method automatic) samples
  // only, from CPU-time timers and SIGPROF (docs/profiling.md).
  unsigned sample_frequency = 0;
  bool context_switches = false;
  SampleMethod sample_method = SampleMethod::automatic;
  // Leave the shared mapping's file in place after stop() (for tests and post-mortem reads).
  bool keep_shm = false;
  // Write the trace compressed (.ctfz files, read by every chronicle tool; `chronicle convert`
  // gives back plain CTF): a tenth of the bytes or less, for some CPU in the collector thread
  // (docs/long-captures.md).
  bool compress = false;
};

// Reads CHRONICLE_OUTPUT, CHRONICLE_MODE, CHRONICLE_BUFFER_SIZE, CHRONICLE_PACKET_SIZE,
// CHRONICLE_CATEGORIES, CHRONICLE_SHM_DIR, CHRONICLE_KEEP_SHM (1: leave the mapping's file),
// CHRONICLE_ARMED, CHRONICLE_CRASH_HANDLER, CHRONICLE_SNAPSHOT_SIGNAL, CHRONICLE_SNAPSHOT_DIR,
// CHRONICLE_SELF_STATS_INTERVAL, CHRONICLE_SAMPLE (samples per second), CHRONICLE_SCHED (1:
// context switches), CHRONICLE_SAMPLE_METHOD (auto, perf or timer), CHRONICLE_COMPRESS (1: a
// compressed trace), CHRONICLE_COLLECTOR ("external": `chronicle record` drains the rings, no
// collector thread in the program). Returns
// false when neither CHRONICLE_OUTPUT nor CHRONICLE_ARMED is set; throws std::invalid_argument on
// a malformed value. Armed without an output, the session has no collector in the process:
// `chronicle record --attach`, `snapshot` or `ctl` read it.
bool config_from_environment(Config& config);

// Starts a session. Returns false (and sets last_error()) if one is already running or the
// shared mapping cannot be made.
bool start(const Config& config = {});

// Stops the session: every thread's last events are written, the in-process collector (if any)
// finishes the trace directory. Safe to call when no session runs.
void stop();

bool active();
const std::string& last_error();

// Path of the running session's shared mapping ("" when none).
std::string shm_path();

// Names the calling thread in the trace (and for the OS, as pthread_setname_np would).
void set_thread_name(std::string_view name);

}  // namespace chronicle
