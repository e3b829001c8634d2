// What the session's sampler thread asks of a sampler, and the records it gets back: call-stack
// samples and context switches of the calling process. Two samplers implement it: perf events
// (perf_sampler.hpp), and where the kernel refuses them, per-thread CPU-time timers and a signal
// (timer_sampler.hpp). docs/profiling.md says what each follows and what each loses.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace chronicle::sampler {

struct SamplerOptions {
  unsigned frequency = 0;         // stack samples per second of CPU time per thread; 0: none
  bool context_switches = false;  // when each thread left and regained a CPU (perf events only)
  unsigned ring_pages = 128;      // perf events: per CPU (a power of two): 512 KiB
};

enum class RecordType : uint8_t { sample, switch_in, switch_out_preempted, switch_out_blocked };

// One record, in the sampler's order (perf events: the kernel's, per CPU; not across CPUs).
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
// Frames of a sample, the interrupted instruction included: the kernel's default limit
// (kernel.perf_event_max_stack), which the timer sampler keeps too.
inline constexpr uint32_t kMaxFrames = 127;

struct Batch {
  std::vector<Record> records;
  std::vector<uint64_t> frames;
  std::vector<uint64_t> stack_words;
  uint64_t lost = 0;  // records that could not be written (a full ring), since the last read
};

class Sampler {
 public:
  virtual ~Sampler() = default;
  // Appends every record taken so far to `batch`, and frees their room.
  virtual void read(Batch& batch) = 0;
  // Starts sampling (a sampler opens stopped), in the threads started since too.
  virtual void enable() = 0;
  // Waits until its buffer is a quarter full, interrupt() is called, or `timeout` has passed. The
  // sampler thread calls it between rounds: the timer sampler follows new threads there.
  virtual void wait(std::chrono::milliseconds timeout) = 0;
  // Ends a wait() now, or the next one (from any thread).
  virtual void interrupt() = 0;
  // Stops sampling (the records already taken can still be read).
  virtual void disable() = 0;
  // Threads that were running when the sampler opened and that it could not follow (they exited,
  // or the kernel refused): their samples are missing.
  virtual uint32_t threads_missed() const = 0;
};

}  // namespace chronicle::sampler
