#include "sampler/timer_sampler.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "sampler/stack_walk.hpp"

namespace chronicle::sampler {
namespace {

#if defined(__x86_64__) || defined(__aarch64__)
constexpr bool kReadsRegisters = true;
#else
constexpr bool kReadsRegisters = false;
#endif

constexpr uint32_t kSlots = 1024;              // records between two drains, all threads together
constexpr size_t kStackCopyBytes = 32 * 1024;  // of stack the handler copies, from the stack pointer
constexpr uint32_t kStackCopies = 16;          // handlers that can run at once with a copy each
constexpr size_t kCopyPage = 4096;             // a divisor of every page size Linux uses
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<bool>::is_always_lock_free,
              "the signal handler uses atomics: they must not take a lock");

// One sample, as the handler writes it.
struct Slot {
  std::atomic<uint64_t> sequence;  // the ring's protocol, below
  uint32_t tid;
  uint32_t frame_count;  // frames[0]: the interrupted instruction
  uint32_t stack_word_count;
  uint64_t time_ns;
  uint64_t frames[kMaxFrames];
  uint64_t stack_words[kStackWords];
};

// The handler's buffer: many writers (the handler, on any thread), one reader (the sampler thread).
// A bounded queue of slots, each with a sequence number that says whose turn it is (D. Vyukov's
// bounded queue). For the slot of position p (p % kSlots), at lap p / kSlots:
//   sequence == p            free: for the writer that claims position p
//   sequence == p + 1        written: for the reader
//   sequence == p + kSlots   read: free for the writer of position p + kSlots (the next lap)
// Writer (the handler):
//   1. p = head (relaxed); s = slot(p).sequence (acquire: the reader's reads of the record of the
//      lap before happen before this writer's writes)
//   2. s == p: claim p by a CAS of head from p to p + 1 (relaxed: the sequence, not head, orders
//      the slot's contents; a failed CAS starts again at 1). s < p: the slot still holds the lap
//      before's record, unread: the ring is full, the sample is lost (and counted). s > p: another
//      writer claimed p already: again from 1.
//   3. write the record, then sequence = p + 1 (release: publishes the record to the reader)
// Reader (the sampler thread), at its own position t:
//   1. slot(t).sequence == t + 1 (acquire): the record is whole; read it
//   2. sequence = t + kSlots (release: the reads are done before the next lap's writer writes);
//      t += 1, and `read_position` = t (relaxed: only the writers' quarter-full wake-up reads it)
// Async-signal-safe: no locks, no allocation, lock-free atomics. The signal is blocked while its
// handler runs, so a writer never interrupts itself on one thread. A writer that stops between 2
// and 3 (its thread stopped in a debugger) holds the records after its own back until it goes on.
class SampleRing {
 public:
  void reset() {
    for (uint64_t i = 0; i < kSlots; ++i) slots_[i].sequence.store(i, std::memory_order_relaxed);
    head_.store(0, std::memory_order_relaxed);
    tail_ = 0;
    read_position_.store(0, std::memory_order_release);
  }

  // Writer: a slot to fill and publish(), or null when the ring is full.
  Slot* claim(uint64_t& position) {
    position = head_.load(std::memory_order_relaxed);
    for (;;) {
      Slot& slot = slots_[position % kSlots];
      const uint64_t sequence = slot.sequence.load(std::memory_order_acquire);
      if (sequence == position) {
        if (head_.compare_exchange_weak(position, position + 1, std::memory_order_relaxed)) return &slot;
      } else if (sequence < position) {
        return nullptr;
      } else {
        position = head_.load(std::memory_order_relaxed);
      }
    }
  }
  void publish(Slot& slot, uint64_t position) { slot.sequence.store(position + 1, std::memory_order_release); }
  // Writer: whether the record at `position` makes the ring a quarter full (once per lap).
  bool quarter_full_at(uint64_t position) const {
    return position + 1 - read_position_.load(std::memory_order_relaxed) == kSlots / 4;
  }

  // Reader: the oldest record, or null when the next one is not written yet.
  const Slot* front() const {
    const Slot& slot = slots_[tail_ % kSlots];
    return slot.sequence.load(std::memory_order_acquire) == tail_ + 1 ? &slot : nullptr;
  }
  void pop() {
    slots_[tail_ % kSlots].sequence.store(tail_ + kSlots, std::memory_order_release);
    ++tail_;
    read_position_.store(tail_, std::memory_order_relaxed);
  }

 private:
  Slot slots_[kSlots];
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> read_position_{0};
  uint64_t tail_ = 0;  // the reader's
};

// Room for the handlers' copies of the stack: too large for the interrupted thread's stack, on
// which the handler runs.
struct StackCopies {
  std::atomic<bool> busy[kStackCopies];
  alignas(64) uint8_t bytes[kStackCopies][kStackCopyBytes];

  uint8_t* claim(uint32_t tid) {
    for (uint32_t i = 0; i < kStackCopies; ++i) {
      const uint32_t at = (tid + i) % kStackCopies;
      if (!busy[at].exchange(true, std::memory_order_acquire)) return bytes[at];
    }
    return nullptr;
  }
  void release(const uint8_t* copy) {
    busy[(copy - bytes[0]) / kStackCopyBytes].store(false, std::memory_order_release);
  }
};

// All the handler touches. Made once per process and never freed: a signal delivered after the
// session ended (pending in a thread that blocked it) still finds it, and does nothing.
struct HandlerShared {
  std::atomic<bool> recording{false};   // enable() to disable(): the handler takes samples
  std::atomic<uint32_t> in_handler{0};  // handlers running: disable() waits for none
  std::atomic<uint64_t> lost{0};
  int wake_fd = -1;  // an eventfd: interrupt(), or the ring is a quarter full
  pid_t pid = 0;     // whose stack process_vm_readv reads: this process's
  SampleRing ring;
  StackCopies copies;
};

std::atomic<HandlerShared*> g_shared{nullptr};
struct sigaction g_previous_action;  // the signal's disposition before the handler

HandlerShared* shared_state(std::string& error) {
  if (HandlerShared* shared = g_shared.load(std::memory_order_acquire)) return shared;
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    error = fmt::format("eventfd: {}", std::strerror(errno));
    return nullptr;
  }
  // Default-initialised: the copies' bytes are not touched until used (the atomics start at zero).
  auto* shared = new HandlerShared;
  shared->wake_fd = wake_fd;
  g_shared.store(shared, std::memory_order_release);
  return shared;
}

uint64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe (the vDSO)
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
}

struct InterruptedRegisters {
  uint64_t pc = 0;
  uint64_t frame_pointer = 0;
  uint64_t stack_pointer = 0;
};

InterruptedRegisters interrupted_registers([[maybe_unused]] const ucontext_t& context) {
#if defined(__x86_64__)
  const greg_t* registers = context.uc_mcontext.gregs;
  return {static_cast<uint64_t>(registers[REG_RIP]), static_cast<uint64_t>(registers[REG_RBP]),
          static_cast<uint64_t>(registers[REG_RSP])};
#elif defined(__aarch64__)
  return {context.uc_mcontext.pc, context.uc_mcontext.regs[29], context.uc_mcontext.sp};
#else
  return {};
#endif
}

// The stack from the stack pointer upward, by one process_vm_readv of this process: a page per
// remote piece, because the kernel stops at the first piece it cannot read (past the stack's top)
// and returns what it copied, where a load would fault. Nothing copied (a seccomp filter refuses
// the call): an empty copy, and the sample keeps the interrupted instruction only.
StackCopy copy_stack(pid_t pid, uint64_t stack_pointer, uint8_t* bytes) {
  iovec remote[kStackCopyBytes / kCopyPage + 1];
  int pieces = 0;
  size_t total = 0;
  for (uint64_t at = stack_pointer; total < kStackCopyBytes; ++pieces) {
    const uint64_t page_end = (at | (kCopyPage - 1)) + 1;
    if (page_end < at) break;  // the end of the address space
    const size_t length = std::min<uint64_t>(page_end - at, kStackCopyBytes - total);
    remote[pieces] = {reinterpret_cast<void*>(at), length};
    at += length;
    total += length;
  }
  const iovec local{bytes, total};
  const ssize_t copied = process_vm_readv(pid, &local, 1, remote, static_cast<unsigned long>(pieces), 0);
  return {stack_pointer, bytes, copied > 0 ? static_cast<size_t>(copied) : 0};
}

// The return addresses and the first stack words, from a copy of the stack.
void walk_stack(HandlerShared& shared, const InterruptedRegisters& registers, Slot& slot) {
  uint8_t* bytes = shared.copies.claim(slot.tid);
  if (!bytes) return;  // more handlers at once than copies: the interrupted instruction only
  const StackCopy stack = copy_stack(shared.pid, registers.stack_pointer, bytes);
  slot.stack_word_count = static_cast<uint32_t>(std::min<size_t>(kStackWords, stack.size / sizeof(uint64_t)));
  std::memcpy(slot.stack_words, stack.bytes, slot.stack_word_count * sizeof(uint64_t));
  slot.frame_count += walk_frame_pointers(stack, registers.frame_pointer, slot.frames + 1, kMaxFrames - 1);
  shared.copies.release(bytes);
}

void take_sample(HandlerShared& shared, uint32_t tid, const ucontext_t& context) {
  const uint64_t time_ns = monotonic_ns();  // first: the moment of the sample
  uint64_t position = 0;
  Slot* slot = shared.ring.claim(position);
  if (!slot) {
    shared.lost.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const InterruptedRegisters registers = interrupted_registers(context);
  slot->tid = tid;
  slot->time_ns = time_ns;
  slot->frames[0] = registers.pc;
  slot->frame_count = 1;
  slot->stack_word_count = 0;
  walk_stack(shared, registers, *slot);
  shared.ring.publish(*slot, position);
  if (shared.ring.quarter_full_at(position)) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(shared.wake_fd, &one, sizeof one);
  }
}

// Async-signal-safe, and errno as it found it. Only the timers' signals are samples (the thread's
// id is their value); a SIGPROF sent by kill() or sigqueue() is ignored.
void on_sample_signal(int, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  HandlerShared* shared = g_shared.load(std::memory_order_acquire);
  if (shared && info->si_code == SI_TIMER) {
    // seq_cst, with disable()'s store of `recording` and load of `in_handler`: either this
    // handler sees recording off, or disable() sees it running and waits for it.
    shared->in_handler.fetch_add(1, std::memory_order_seq_cst);
    if (shared->recording.load(std::memory_order_seq_cst))
      take_sample(*shared, static_cast<uint32_t>(info->si_value.sival_int), *static_cast<const ucontext_t*>(context));
    shared->in_handler.fetch_sub(1, std::memory_order_release);
  }
  errno = saved_errno;
}

bool handler_is_ours(const struct sigaction& action) {
  return (action.sa_flags & SA_SIGINFO) && action.sa_sigaction == on_sample_signal;
}

// Installs the handler over the default disposition only: the program's own handler (or SIG_IGN)
// is left alone. Ours already (an earlier session left it, a signal still pending): kept.
bool install_handler(std::string& error) {
  struct sigaction current {};
  sigaction(TimerSampler::kSignal, nullptr, &current);
  if (handler_is_ours(current)) return true;
  if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) {
    error = fmt::format("{} has a handler already (the program's own, or SIG_IGN): the timer sampler leaves it alone",
                        TimerSampler::kSignalName);
    return false;
  }
  struct sigaction action {};
  action.sa_sigaction = on_sample_signal;
  action.sa_flags = SA_RESTART | SA_SIGINFO;  // most interrupted system calls go on (docs/profiling.md)
  sigemptyset(&action.sa_mask);
  if (sigaction(TimerSampler::kSignal, &action, &g_previous_action) != 0) {
    error = fmt::format("sigaction: {}", std::strerror(errno));
    return false;
  }
  return true;
}

// Puts the previous disposition back, unless the program has put a handler of its own since.
void restore_handler() {
  struct sigaction current {};
  sigaction(TimerSampler::kSignal, nullptr, &current);
  if (handler_is_ours(current)) sigaction(TimerSampler::kSignal, &g_previous_action, nullptr);
}

// The mask of pending signals on a "SigPnd:" or "ShdPnd:" line of a /proc status file.
bool status_has_pending(const char* path, const char* field, int signal) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[4096];
  const ssize_t length = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (length <= 0) return false;
  text[length] = '\0';
  const char* line = std::strstr(text, field);
  if (!line) return false;
  const unsigned long long mask = std::strtoull(line + std::strlen(field), nullptr, 16);
  return (mask >> (signal - 1)) & 1;
}

std::vector<pid_t> process_threads() {
  std::vector<pid_t> threads;
  DIR* directory = opendir("/proc/self/task");
  if (!directory) return threads;
  while (const dirent* entry = readdir(directory)) {
    const pid_t thread = static_cast<pid_t>(std::atoi(entry->d_name));
    if (thread > 0) threads.push_back(thread);
  }
  closedir(directory);
  std::sort(threads.begin(), threads.end());
  return threads;
}

// Whether a thread, or the process, has the signal pending: one sent by a timer before it was
// deleted, in a thread that blocks the signal (the others take it at once).
bool signal_pending_anywhere(int signal) {
  if (status_has_pending("/proc/self/status", "ShdPnd:", signal)) return true;
  for (const pid_t thread : process_threads())
    if (status_has_pending(fmt::format("/proc/self/task/{}/status", thread).c_str(), "SigPnd:", signal)) return true;
  return false;
}

bool wait_until(auto done, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A thread's CPU-time clock, as the kernel makes it from the thread's id (what
// pthread_getcpuclockid returns for a pthread_t): CPUCLOCK_PERTHREAD_MASK | CPUCLOCK_SCHED.
clockid_t thread_cpu_clock(pid_t thread) {
  constexpr clockid_t kPerThreadSchedClock = 4 | 2;
  return static_cast<clockid_t>(~static_cast<clockid_t>(thread) * 8) | kPerThreadSchedClock;
}

}  // namespace

std::unique_ptr<TimerSampler> TimerSampler::open(const SamplerOptions& options, std::string& error) {
  if (!kReadsRegisters) {
    error = "no timer sampler on this architecture (it reads x86-64's and AArch64's registers)";
    return nullptr;
  }
  if (options.frequency == 0) {
    error = "nothing to sample (the timers take no context switches)";
    return nullptr;
  }
  HandlerShared* shared = shared_state(error);
  if (!shared || !install_handler(error)) return nullptr;
  shared->ring.reset();    // no handler writes: `recording` is off
  shared->pid = getpid();  // at each open: a child forked without exec has its own
  shared->lost.store(0, std::memory_order_relaxed);
  std::unique_ptr<TimerSampler> sampler(new TimerSampler);
  sampler->installed_ = true;
  sampler->period_ns_ = std::max<long>(1, 1'000'000'000L / static_cast<long>(options.frequency));
  for (const pid_t thread : process_threads())
    if (!sampler->follow(thread)) ++sampler->threads_missed_;
  return sampler;
}

TimerSampler::~TimerSampler() {
  delete_timers();
  if (!installed_) return;
  if (wait_until([] { return !signal_pending_anywhere(kSignal); }, std::chrono::milliseconds(100)))
    restore_handler();
  else
    fmt::print(stderr,
               "chronicle: a thread that blocks {} still has one pending: its handler stays (it does nothing now)\n",
               kSignalName);
}

// One timer per thread: its CPU clock, its signal delivered to it alone (SIGEV_THREAD_ID), with
// its id as the signal's value for the handler.
bool TimerSampler::follow(pid_t thread) {
  sigevent event{};
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = kSignal;
  event.sigev_value.sival_int = thread;
  event._sigev_un._tid = thread;
  timer_t timer;
  if (timer_create(thread_cpu_clock(thread), &event, &timer) != 0) return false;  // it exited
  if (enabled_ && !arm(timer)) {
    timer_delete(timer);
    return false;
  }
  timers_.emplace(thread, timer);
  return true;
}

bool TimerSampler::arm(timer_t timer) const {
  const timespec period{period_ns_ / 1'000'000'000L, period_ns_ % 1'000'000'000L};
  const itimerspec setting{period, period};
  return timer_settime(timer, 0, &setting, nullptr) == 0;
}

// Threads started since the last scan get a timer; those that exited lose theirs (the kernel
// keeps a timer until it is deleted).
void TimerSampler::follow_threads() {
  const std::vector<pid_t> running = process_threads();
  for (auto at = timers_.begin(); at != timers_.end();) {
    if (std::binary_search(running.begin(), running.end(), at->first)) {
      ++at;
      continue;
    }
    timer_delete(at->second);
    at = timers_.erase(at);
  }
  for (const pid_t thread : running)
    if (!timers_.contains(thread)) follow(thread);
}

void TimerSampler::delete_timers() {
  for (const auto& [thread, timer] : timers_) timer_delete(timer);
  timers_.clear();
}

// The threads started since open() too: the session's own among them.
void TimerSampler::enable() {
  g_shared.load()->recording.store(true, std::memory_order_seq_cst);
  follow_threads();
  enabled_ = true;
  for (const auto& [thread, timer] : timers_) arm(timer);
}

// The timers first; then what they sent before that, still pending (bounded: a thread that
// blocks the signal keeps it); then no handler may still be writing when the last read comes.
void TimerSampler::disable() {
  enabled_ = false;
  delete_timers();
  HandlerShared& shared = *g_shared.load();
  wait_until([] { return !signal_pending_anywhere(kSignal); }, std::chrono::milliseconds(100));
  shared.recording.store(false, std::memory_order_seq_cst);
  wait_until([&shared] { return shared.in_handler.load(std::memory_order_seq_cst) == 0; }, std::chrono::seconds(1));
}

void TimerSampler::wait(std::chrono::milliseconds timeout) {
  const int wake_fd = g_shared.load()->wake_fd;
  pollfd waiting{wake_fd, POLLIN, 0};
  if (poll(&waiting, 1, static_cast<int>(timeout.count())) > 0) {
    uint64_t count = 0;
    [[maybe_unused]] const ssize_t drained = ::read(wake_fd, &count, sizeof count);
  }
  if (enabled_) follow_threads();
}

void TimerSampler::interrupt() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(g_shared.load()->wake_fd, &one, sizeof one);
}

void TimerSampler::read(Batch& batch) {
  HandlerShared& shared = *g_shared.load();
  const auto pid = static_cast<uint32_t>(shared.pid);
  while (const Slot* slot = shared.ring.front()) {
    Record record;
    record.pid = pid;
    record.tid = slot->tid;
    record.time_ns = slot->time_ns;
    record.first_frame = static_cast<uint32_t>(batch.frames.size());
    record.frame_count = std::min(slot->frame_count, kMaxFrames);
    batch.frames.insert(batch.frames.end(), slot->frames, slot->frames + record.frame_count);
    record.first_stack_word = static_cast<uint32_t>(batch.stack_words.size());
    record.stack_word_count = std::min(slot->stack_word_count, kStackWords);
    batch.stack_words.insert(batch.stack_words.end(), slot->stack_words, slot->stack_words + record.stack_word_count);
    batch.records.push_back(record);
    shared.ring.pop();
  }
  batch.lost += shared.lost.exchange(0, std::memory_order_relaxed);
}

}  // namespace chronicle::sampler
