// Timer-driven call-stack samples and context switches of the calling process, from the kernel's
// perf events (perf_event_open(2)): one sampling event per CPU that follows the thread which
// opened it and every thread it starts afterwards (inherit), plus the same for each
// thread already running then. The kernel walks the user stack by frame pointers and writes the
// records into one ring per CPU, which read() drains. docs/profiling.md says what is followed and
// what is lost.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chronicle::sampler {

struct SamplerOptions {
  unsigned frequency = 0;         // stack samples per second of CPU time per thread; 0: none
  bool context_switches = false;  // when each thread left and regained a CPU
  unsigned ring_pages = 128;      // per CPU (a power of two): 512 KiB
};

enum class RecordType : uint8_t { sample, switch_in, switch_out_preempted, switch_out_blocked };

// One record, in the kernel's order per CPU (not across CPUs).
struct Record {
  RecordType type = RecordType::sample;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t time_ns = 0;      // CLOCK_MONOTONIC
  uint32_t first_frame = 0;  // sample: its stack is Batch::frames[first_frame, + frame_count), innermost first
  uint32_t frame_count = 0;
  // sample: the first words of the user stack, from the stack pointer: where a function that keeps
  // no frame pointer has its return address (the caller the frame-pointer chain skips).
  uint32_t first_stack_word = 0;  // in Batch::stack_words
  uint32_t stack_word_count = 0;
};

inline constexpr uint32_t kStackWords = 8;

struct Batch {
  std::vector<Record> records;
  std::vector<uint64_t> frames;
  std::vector<uint64_t> stack_words;
  uint64_t lost = 0;  // records the kernel could not write (a full ring), since the last read
};

class PerfSampler {
 public:
  // Opens the events on the calling thread and on every other thread of the process. Returns
  // null and says why in `error` when the kernel refuses (perf_event_paranoid, a seccomp filter,
  // no perf events in this kernel).
  static std::unique_ptr<PerfSampler> open(const SamplerOptions& options, std::string& error);
  ~PerfSampler();
  PerfSampler(const PerfSampler&) = delete;
  PerfSampler& operator=(const PerfSampler&) = delete;

  // Appends every record now in the rings to `batch`, and frees their room.
  void read(Batch& batch);
  // Starts sampling (the events are opened disabled), in the threads started since too.
  void enable();
  // Waits until a ring is a quarter full, interrupt() is called, or `timeout` has passed.
  void wait(std::chrono::milliseconds timeout);
  // Ends a wait() now, or the next one (from any thread).
  void interrupt();
  // Stops sampling (the records already written can still be read).
  void disable();
  // Threads that were running when the sampler opened and that it could not follow (they exited,
  // or the kernel refused): their samples are missing.
  uint32_t threads_missed() const { return threads_missed_; }

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
