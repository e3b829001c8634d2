// Timer-driven call-stack samples and context switches of the calling process, from the kernel's
// perf events (perf_event_open(2)): one sampling event per CPU that follows the thread which
// opened it and every thread it starts afterwards (inherit), plus the same for each
// thread already running then. The kernel walks the user stack by frame pointers and writes the
// records into one ring per CPU, which read() drains. docs/profiling.md says what is followed and
// what is lost.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sampler/sampler.hpp"

namespace chronicle::sampler {

class PerfSampler final : public Sampler {
 public:
  // Opens the events on the calling thread and on every other thread of the process. Returns
  // null and says why in `error` when the kernel refuses (perf_event_paranoid, a seccomp filter,
  // no perf events in this kernel).
  static std::unique_ptr<PerfSampler> open(const SamplerOptions& options, std::string& error);
  ~PerfSampler() override;
  PerfSampler(const PerfSampler&) = delete;
  PerfSampler& operator=(const PerfSampler&) = delete;

  // Sampler (sampler.hpp); the events are opened disabled, and wait() ends when a ring is a
  // quarter full.
  void read(Batch& batch) override;
  void enable() override;
  void wait(std::chrono::milliseconds timeout) override;
  void interrupt() override;
  void disable() override;
  uint32_t threads_missed() const override { return threads_missed_; }

 private:
  struct CpuRing {
    int cpu = 0;
    int fd = -1;  // the calling thread's event on this CPU, owner of the ring
    void* base = nullptr;
    size_t size = 0;
  };
  PerfSampler() = default;
  void read_ring(CpuRing& ring, Batch& batch);
  void parse(const uint8_t* record, size_t size, Batch& batch);

  std::vector<CpuRing> rings_;
  std::vector<int> thread_fds_;  // other threads' events, writing into the rings above
  int wake_fd_ = -1;             // an eventfd: interrupt()
  size_t data_size_ = 0;
  uint32_t threads_missed_ = 0;
  std::vector<uint8_t> wrapped_;  // a record split at the ring's end, put together
};

}  // namespace chronicle::sampler
