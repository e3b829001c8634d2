// The sampling profiler's test program (tests/profile_test.cpp), built with frame pointers:
//   profile_workload cpu ROUNDS      hot() does four times the work of warm(), each in a span
//   profile_workload library ROUNDS  the work in profile_library, a shared library it loads
//   profile_workload sleep ROUNDS    a thread alternates 20 ms of work (its own CPU time) with
//                                    20 ms of nanosleep, in spans "sched/work" and "sched/sleep"
//   profile_workload tasks ROUNDS    tasks "crunch" (hot) and "nibble" (warm) take turns on a thread
//   profile_workload pingpong ROUNDS two threads hand a byte back and forth through pipes: each
//                                    round blocks each of them once (bench/sampling_overhead.sh)
//   profile_workload await ROUNDS    task "waiter" waits for task "sleeper", which sleeps 60 ms on
//                                    another thread while it runs (ROUNDS is not used)
#include <pthread.h>
#include <unistd.h>
#include <chronicle/chronicle.hpp>
#include <chronicle/task.hpp>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string_view>
#include <thread>

#include "profile_library.hpp"

namespace profile_workload {

volatile unsigned g_sink;

// The same loop in each, so that each is where its samples land (its own, "self" samples): only
// the number of turns differs.
#define PROFILE_WORKLOAD_LOOP(turns)                                             \
  unsigned value = g_sink;                                                       \
  for (unsigned i = 0; i < (turns); ++i) value = value * 1664525u + 1013904223u; \
  g_sink = value

__attribute__((noinline)) void spin(unsigned turns) {
  PROFILE_WORKLOAD_LOOP(turns);
}

__attribute__((noinline)) void hot(unsigned turns) {
  PROFILE_WORKLOAD_LOOP(4 * turns);
}

__attribute__((noinline)) void warm(unsigned turns) {
  PROFILE_WORKLOAD_LOOP(turns);
}

constexpr unsigned kTurns = 1'000'000;

__attribute__((noinline)) void cpu(int rounds) {
  for (int round = 0; round < rounds; ++round) {
    {
      CHRONICLE_SPAN("work", "hot");
      hot(kTurns);
    }
    {
      CHRONICLE_SPAN("work", "warm");
      warm(kTurns);
    }
  }
}

__attribute__((noinline)) void library(int rounds) {
  for (int round = 0; round < rounds; ++round) profile_library::library_function(static_cast<int>(kTurns));
}

uint64_t thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
}

void alternate(int rounds) {
  chronicle::set_thread_name("alternating");
  for (int round = 0; round < rounds; ++round) {
    {
      CHRONICLE_SPAN("sched", "work");
      const uint64_t until = thread_cpu_ns() + 20'000'000;
      while (thread_cpu_ns() < until) spin(1000);
    }
    {
      CHRONICLE_SPAN("sched", "sleep");
      const timespec pause{0, 20'000'000};
      nanosleep(&pause, nullptr);
    }
  }
}

__attribute__((noinline)) void tasks(int rounds) {
  using chronicle::TaskKind;
  const chronicle::TaskId crunch = chronicle::create_task(TaskKind::promise, "crunch");
  const chronicle::TaskId nibble = chronicle::create_task(TaskKind::promise, "nibble");
  for (int round = 0; round < rounds; ++round) {
    {
      chronicle::TaskRunScope run(crunch);
      hot(kTurns);
    }
    {
      chronicle::TaskRunScope run(nibble);
      warm(kTurns);
    }
  }
  chronicle::resolve_task(crunch, chronicle::TaskOutcome::ok);
  chronicle::resolve_task(nibble, chronicle::TaskOutcome::ok);
}

void pingpong(int rounds) {
  int there[2], back[2];
  if (pipe(there) != 0 || pipe(back) != 0) std::abort();
  std::thread partner([&] {
    char byte;
    for (int round = 0; round < rounds; ++round)
      if (read(there[0], &byte, 1) != 1 || write(back[1], &byte, 1) != 1) std::abort();
  });
  char byte = 0;
  for (int round = 0; round < rounds; ++round)
    if (write(there[1], &byte, 1) != 1 || read(back[0], &byte, 1) != 1) std::abort();
  partner.join();
}

void await_sleeper() {
  using chronicle::TaskKind;
  const chronicle::TaskId waiter = chronicle::create_task(TaskKind::promise, "waiter");
  const chronicle::TaskId sleeper = chronicle::create_task(TaskKind::promise, "sleeper", waiter);
  {
    chronicle::TaskRunScope run(waiter);
    chronicle::task_waits_for(waiter, sleeper);
  }
  std::thread worker([sleeper] {
    chronicle::TaskRunScope run(sleeper);
    const timespec pause{0, 60'000'000};
    nanosleep(&pause, nullptr);
    chronicle::resolve_task(sleeper, chronicle::TaskOutcome::ok);
  });
  worker.join();
  chronicle::TaskRunScope run(waiter);
  chronicle::resolve_task(waiter, chronicle::TaskOutcome::ok);
}

}  // namespace profile_workload

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: profile_workload cpu|library|sleep ROUNDS\n");
    return 2;
  }
  const std::string_view mode = argv[1];
  const int rounds = std::atoi(argv[2]);
  if (mode == "cpu") {
    profile_workload::cpu(rounds);
  } else if (mode == "library") {
    profile_workload::library(rounds);
  } else if (mode == "tasks") {
    profile_workload::tasks(rounds);
  } else if (mode == "pingpong") {
    profile_workload::pingpong(rounds);
  } else if (mode == "await") {
    profile_workload::await_sleeper();
  } else if (mode == "sleep") {
    std::thread worker(profile_workload::alternate, rounds);
    worker.join();
  } else {
    return 2;
  }
  return 0;
}
