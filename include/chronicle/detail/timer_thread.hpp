// The timer behind thread_pool::schedule_after / sleep_for and with_timeout: one thread that
// calls each armed entry's fire() at its deadline. It records nothing itself; what an entry does
// when it fires (post a coroutine to a pool, cancel a task) is the entry's.
#pragma once

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace chronicle::detail {

class TimerEntry {
 public:
  using Clock = std::chrono::steady_clock;
  explicit TimerEntry(Clock::time_point deadline) : deadline_(deadline) {}
  virtual ~TimerEntry() = default;
  TimerEntry(const TimerEntry&) = delete;
  TimerEntry& operator=(const TimerEntry&) = delete;

  // On the timer thread, without its lock, once the deadline has passed.
  virtual void fire() noexcept = 0;
  // The timer stops with this entry still armed (its owner is being destroyed).
  virtual void abandon() noexcept = 0;

  Clock::time_point deadline() const { return deadline_; }

 private:
  Clock::time_point deadline_;
};

class TimerThread {
 public:
  // `thread_name`: at most 15 characters (the kernel's limit), else cut.
  explicit TimerThread(std::string thread_name) : thread_name_(std::move(thread_name)) {}
  // Abandons what is still armed, then joins the thread.
  ~TimerThread() { stop(); }
  TimerThread(const TimerThread&) = delete;
  TimerThread& operator=(const TimerThread&) = delete;

  // False when the timer has stopped: the entry will never fire. The thread starts on first use,
  // so that a pool nobody sleeps on costs no thread.
  bool arm(std::shared_ptr<TimerEntry> entry) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return false;
      if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
      armed_.insert({entry->deadline(), std::move(entry)});
    }
    wake_.notify_one();
    return true;
  }

  // Removes `entry` if it has not fired yet (a cancelled sleep leaves no work for the thread).
  void disarm(const std::shared_ptr<TimerEntry>& entry) {
    std::lock_guard lock(mutex_);
    armed_.erase({entry->deadline(), entry});
  }

  void stop() {
    std::set<Armed> abandoned;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
      abandoned.swap(armed_);
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
    for (const auto& [deadline, entry] : abandoned) entry->abandon();
  }

 private:
  using Armed = std::pair<TimerEntry::Clock::time_point, std::shared_ptr<TimerEntry>>;

  void run() {
    // Named here rather than inheriting the name of the thread that armed the first entry (a
    // pool's "pool-0", which would then show two threads by that name). No chronicle call: the
    // timer must not record anything of its own.
    pthread_setname_np(pthread_self(), thread_name_.substr(0, 15).c_str());
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      if (armed_.empty()) {
        wake_.wait(lock);
        continue;
      }
      // A copy: the entry may be disarmed (and its node freed) while this thread waits.
      const TimerEntry::Clock::time_point next_deadline = armed_.begin()->first;
      if (wake_.wait_until(lock, next_deadline) == std::cv_status::no_timeout) continue;
      std::vector<std::shared_ptr<TimerEntry>> due;
      const auto now = TimerEntry::Clock::now();
      while (!armed_.empty() && armed_.begin()->first <= now)
        due.push_back(armed_.extract(armed_.begin()).value().second);
      // Fired without the lock: an entry's fire() may post to a pool or cancel tasks, whose
      // stop callbacks disarm other entries of this timer.
      lock.unlock();
      for (const auto& entry : due) entry->fire();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::set<Armed> armed_;
  bool stopping_ = false;
  std::string thread_name_;
  std::thread thread_;
};

}  // namespace chronicle::detail
