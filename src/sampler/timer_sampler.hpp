// Call-stack samples without perf events, for where the kernel refuses them (a container's seccomp
// filter, perf_event_paranoid 3): a CPU-time timer per thread (timer_create on the thread's CPU
// clock) sends SIGPROF to that thread every 1/FREQ s of its CPU time, and the signal handler walks
// the interrupted stack by frame pointers into a lock-free buffer, which read() drains into the
// same records as the perf sampler's. Threads are found by scanning /proc/self/task when the
// sampler opens and at each wait(). No context switches: only the kernel sees them.
// docs/profiling.md says what this loses next to perf events.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <time.h>

#include <map>
#include <memory>
#include <string>

#include "sampler/sampler.hpp"

namespace chronicle::sampler {

class TimerSampler final : public Sampler {
 public:
  // The signal the timers send. Its handler must be the default one when the sampler opens: a
  // program's own handler (or SIG_IGN) is never replaced.
  static constexpr int kSignal = SIGPROF;
  static constexpr const char* kSignalName = "SIGPROF";

  // Installs the handler and makes a timer for each thread of the process, not armed until
  // enable(). Returns null and says why in `error` (the signal has a handler, no frequency).
  static std::unique_ptr<TimerSampler> open(const SamplerOptions& options, std::string& error);
  // Deletes the timers, then puts back the signal's previous disposition: unless a thread still
  // has the signal pending (one that blocks it), which the default disposition would kill.
  ~TimerSampler() override;
  TimerSampler(const TimerSampler&) = delete;
  TimerSampler& operator=(const TimerSampler&) = delete;

  // Sampler (sampler.hpp). wait() ends early when the buffer is a quarter full, and then follows
  // the threads started since the last scan and forgets those that exited.
  void read(Batch& batch) override;
  void enable() override;
  void wait(std::chrono::milliseconds timeout) override;
  void interrupt() override;
  void disable() override;
  uint32_t threads_missed() const override { return threads_missed_; }

 private:
  TimerSampler() = default;
  void follow_threads();
  bool follow(pid_t thread);
  bool arm(timer_t timer) const;
  void delete_timers();

  std::map<pid_t, timer_t> timers_;
  long period_ns_ = 0;
  bool enabled_ = false;
  bool installed_ = false;  // the handler is ours to take away
  uint32_t threads_missed_ = 0;
};

}  // namespace chronicle::sampler
