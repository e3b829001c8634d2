#include "recorder/fork_gate.hpp"

#include <chrono>
#include <thread>

namespace chronicle::recorder {

void ForkGate::enter() {
  // A fork waits in the prepare handler for at most one piece of work; a session thread waits
  // here for the fork itself (microseconds to a few milliseconds), so a short sleep is enough.
  while (forks_waiting_.load(std::memory_order_acquire) != 0)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  mutex_.lock();
}

namespace {

// A thread sets itself up, or is joined once ended, in microseconds.
void wait_until_zero(const std::atomic<uint32_t>& count) {
  while (count.load(std::memory_order_acquire) != 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

}  // namespace

void ForkGate::close_for_fork() {
  forks_waiting_.fetch_add(1, std::memory_order_release);
  mutex_.lock();
  wait_until_zero(threads_ending_);
}

void ForkGate::wait_for_starting_threads() {
  wait_until_zero(threads_starting_);
}

void ForkGate::open_after_fork() {
  mutex_.unlock();
  forks_waiting_.fetch_sub(1, std::memory_order_release);
}

ForkGate& fork_gate() {
  static ForkGate* gate = new ForkGate;
  return *gate;
}

}  // namespace chronicle::recorder
