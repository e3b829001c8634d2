// One pool for the readers' parallel passes (checking a trace's streams at open, opening the
// traces of a merge, stats' passes over threads): indices taken in turn by a few threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace chronicle::reader {

// The threads a pass uses by default: one per core.
inline size_t default_thread_count() {
  return std::max(1u, std::thread::hardware_concurrency());
}

// Calls `work(index)` for each index below `count` on `threads` threads at most, the caller's
// among them, each taking the next index left. What a call throws is kept by index (null where
// it returned), for the caller to rethrow in the order it chooses. A thread that cannot be
// started is no failure: the others take its share.
template <typename Work>
std::vector<std::exception_ptr> run_on_threads(size_t count, size_t threads, Work&& work) {
  std::vector<std::exception_ptr> failures(count);
  std::atomic<size_t> next{0};
  auto take_indices = [&] {
    for (size_t index; (index = next.fetch_add(1, std::memory_order_relaxed)) < count;) {
      try {
        work(index);
      } catch (...) {
        failures[index] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> helpers;
  const size_t wanted = std::min(threads, count);
  if (wanted > 1) helpers.reserve(wanted - 1);
  for (size_t i = 1; i < wanted; ++i) {
    try {
      helpers.emplace_back(take_indices);
    } catch (const std::system_error&) {
      break;
    }
  }
  take_indices();
  for (std::thread& helper : helpers) helper.join();
  return failures;
}

}  // namespace chronicle::reader
