// The recorder's own threads (each session's collector and control thread) hold the fork gate
// while they work and let it go before they wait; a fork closes the gate first, so the child is
// never copied while one of them is halfway through the allocator or a lock of its own. glibc's
// malloc is safe across fork, but not every allocator is: GCC 12's AddressSanitizer (and LLVM's
// before 18) takes no lock around fork, so a child copied while our collector was allocating
// waited forever for its copy of the allocator's lock (a CI run of the fork tests under ASan).
//
// Protocol (one gate per process, leaked: threads may still run while statics are destroyed):
//  1. A session thread, before it works, waits while `forks_waiting_` is not 0 (acquire), then
//     locks the mutex; it unlocks the mutex when the work is done (before any wait).
//  2. fork's prepare handler increments `forks_waiting_` (release) before it locks the mutex, so
//     a thread that works flat out lets it in at its next step 1: a fork waits for one piece of
//     work at most (a drain of the rings, a sample, a ctl request).
//  3. The parent's and the child's handlers unlock the mutex (the child's copy is held by the
//     forking thread, its only thread) and decrement `forks_waiting_`.
// Lock order: the gate before the registry mutex (the prepare handler, and the control thread,
// which takes the registry lock while it works), and before a session's collector_mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace chronicle::recorder {

class ForkGate {
 public:
  void enter();  // step 1
  void leave() { mutex_.unlock(); }
  void close_for_fork();   // step 2
  void open_after_fork();  // step 3

 private:
  std::mutex mutex_;
  std::atomic<uint32_t> forks_waiting_{0};
};

ForkGate& fork_gate();

// Holds the gate for a scope; unlock()/lock() let it go around a wait.
class ForkGateScope {
 public:
  ForkGateScope() { lock(); }
  ~ForkGateScope() {
    if (held_) unlock();
  }
  ForkGateScope(const ForkGateScope&) = delete;
  ForkGateScope& operator=(const ForkGateScope&) = delete;
  void lock() {
    fork_gate().enter();
    held_ = true;
  }
  void unlock() {
    held_ = false;
    fork_gate().leave();
  }

 private:
  bool held_ = false;
};

}  // namespace chronicle::recorder
