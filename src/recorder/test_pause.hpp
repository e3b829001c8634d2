// Points in the runtime's slow paths where a test may stall the thread that reaches them, to force
// an interleaving that is otherwise a matter of luck (tests/trust_test.cpp, "Races"). Null outside
// tests; none of these points is on the per-event path, where the pointer is never read.
#pragma once

#include <atomic>

namespace chronicle::recorder {

enum class TestPoint {
  nested_drop_counting,      // count_nested_drop: the session found, its mapping not yet touched
  site_interning,            // a site listed in the registry, its id not yet stored (mutex held)
  metric_registering,        // a metric's entry in the mapping, not yet in the registry (mutex held)
  control_request_taken,     // the control thread copied ctl's request, and has not answered it yet
  collector_draining,        // the in-process collector is about to drain the rings (fork gate held)
  recorder_thread_starting,  // a recorder thread's first step, before fork_gate.hpp sees it started
  recorder_thread_ending,    // a recorder thread's last step: ended, gate let go, not yet joined
  sampler_draining,          // the sampler thread is about to write its round of samples (gate held)
  collector_starting,        // the in-process collector's thread, before it writes the trace's first files
};

extern std::atomic<void (*)(TestPoint)> g_test_pause;

inline void test_pause(TestPoint point) {
  if (void (*pause)(TestPoint) = g_test_pause.load(std::memory_order_acquire)) [[unlikely]]
    pause(point);
}

}  // namespace chronicle::recorder
