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
// A thread's first and last steps are outside its work but inside the allocator too (the
// sanitizer's set-up and tear-down of a thread, libstdc++'s thread state): a child copied while
// our new control thread was being set up waited forever in its first malloc (CI, under load).
//  4. Two counts follow the recorder threads in those steps. The creator adds one to
//     `threads_starting_` before it creates a thread (relaxed: it holds the registry lock, which
//     the prepare handler takes); the thread takes it off as its first step (release), before it
//     enters the gate. As its last step, with the gate held, the thread adds one to
//     `threads_ending_` (relaxed: the gate orders it before the prepare handler), and its joiner
//     takes it off once join() returned (release).
//  5. The prepare handler waits (acquire) until `threads_ending_` is 0 once it holds the gate
//     (no thread can reach its end meanwhile; an ended thread's tear-down may take the registry
//     lock, so that wait comes first), and until `threads_starting_` is 0 once it also holds the
//     registry lock (no thread can be created meanwhile; a thread's first step takes no lock). A
//     thread ends only when stop() tells it to, on an error too, and stop() then joins it at once.
// Lock order: the gate before the registry mutex (the prepare handler, and the control thread,
// which takes the registry lock while it works), and before a session's collector_mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>

#include "recorder/test_pause.hpp"

namespace chronicle::recorder {

class ForkGate {
 public:
  void enter();  // step 1
  void leave() { mutex_.unlock(); }
  void close_for_fork();   // step 2, then step 5's wait for ending threads
  void open_after_fork();  // step 3
  // Step 4.
  void thread_creating() { threads_starting_.fetch_add(1, std::memory_order_relaxed); }
  void thread_started() { threads_starting_.fetch_sub(1, std::memory_order_release); }
  void thread_ending() { threads_ending_.fetch_add(1, std::memory_order_relaxed); }
  void thread_joined() { threads_ending_.fetch_sub(1, std::memory_order_release); }
  void wait_for_starting_threads();  // step 5, the registry lock held

 private:
  std::mutex mutex_;
  std::atomic<uint32_t> forks_waiting_{0};
  std::atomic<uint32_t> threads_starting_{0};
  std::atomic<uint32_t> threads_ending_{0};
};

ForkGate& fork_gate();

// A recorder thread's whole life, as its first object: the thread has started (step 4) and
// holds the gate, letting it go around its waits with unlock()/lock(); at its end it holds the
// gate once more to count itself as ending (its joiner calls thread_joined()).
class ForkGateScope {
 public:
  ForkGateScope() {
    test_pause(TestPoint::recorder_thread_starting);
    fork_gate().thread_started();
    lock();
  }
  ~ForkGateScope() {
    if (!held_) lock();
    fork_gate().thread_ending();
    unlock();
    test_pause(TestPoint::recorder_thread_ending);
  }
  ForkGateScope(const ForkGateScope&) = delete;
  ForkGateScope& operator=(const ForkGateScope&) = delete;
  void lock() {
    fork_gate().enter();
    held_ = true;
  }
  bool held() const { return held_; }
  void unlock() {
    held_ = false;
    fork_gate().leave();
  }

 private:
  bool held_ = false;
};

// Creates a recorder thread whose function begins with a ForkGateScope, counted as starting
// until that scope is made (step 4). Such a thread is joined with join_recorder_thread().
template <typename Function, typename... Arguments>
std::thread start_recorder_thread(Function&& function, Arguments&&... arguments) {
  fork_gate().thread_creating();
  try {
    return std::thread(std::forward<Function>(function), std::forward<Arguments>(arguments)...);
  } catch (...) {
    fork_gate().thread_started();  // it never will: no thread is left starting
    throw;
  }
}

inline void join_recorder_thread(std::thread& thread) {
  thread.join();
  fork_gate().thread_joined();
}

}  // namespace chronicle::recorder
