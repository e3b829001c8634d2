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
//   profile_workload late-thread MS  a thread started after the session spins MS ms of its own
//                                    CPU time in late_work()
//   profile_workload nested ROUNDS   a thread inside span "nest/outer" alternates 20 ms of work in
//                                    "nest/work" with 20 ms of nanosleep in "nest/nap" inside
//                                    "nest/rest": spans three deep, begun and ended in turns
//   profile_workload clock ROUNDS    read_clocks() reads CLOCK_MONOTONIC ROUNDS x 1000 times: its
//                                    samples land in the kernel's vDSO (clock_gettime)
//   profile_workload hops ROUNDS     coroutine "request", inside span "hop/request", awaits in turn
//                                    ROUNDS tasks that each hop to a pool thread and spend 20 ms of
//                                    its CPU time in span "hop/compute"
//   profile_workload own-handler ROUNDS  cpu ROUNDS with a SIGPROF handler of its own, installed
//                                    before the session starts: exits 3 unless it is still its
//                                    handler at the end and no SIGPROF but its own raise() came
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <chronicle/chronicle.hpp>
#include <chronicle/coro.hpp>
#include <chronicle/task.hpp>

#include <cstdint>
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

void nested(int rounds) {
  chronicle::set_thread_name("nesting");
  CHRONICLE_SPAN("nest", "outer");
  for (int round = 0; round < rounds; ++round) {
    {
      CHRONICLE_SPAN("nest", "work");
      const uint64_t until = thread_cpu_ns() + 20'000'000;
      while (thread_cpu_ns() < until) spin(1000);
    }
    CHRONICLE_SPAN("nest", "rest");
    CHRONICLE_SPAN("nest", "nap");
    const timespec pause{0, 20'000'000};
    nanosleep(&pause, nullptr);
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

__attribute__((noinline)) void late_work(uint64_t cpu_ns) {
  const uint64_t until = thread_cpu_ns() + cpu_ns;
  while (thread_cpu_ns() < until) {
    PROFILE_WORKLOAD_LOOP(10'000);
  }
}

void late_thread(int milliseconds) {
  const timespec pause{0, 50'000'000};  // the session has long started
  nanosleep(&pause, nullptr);
  std::thread late([milliseconds] {
    chronicle::set_thread_name("late");
    late_work(static_cast<uint64_t>(milliseconds) * 1'000'000);
  });
  late.join();
}

chronicle::task<void> compute(chronicle::thread_pool& pool) {
  co_await pool.schedule();
  CHRONICLE_SPAN("hop", "compute");
  late_work(20'000'000);
}

chronicle::task<void> request(chronicle::thread_pool& pool, int rounds) {
  CHRONICLE_SPAN("hop", "request");
  for (int round = 0; round < rounds; ++round) co_await compute(pool);
}

void hops(int rounds) {
  chronicle::thread_pool pool(1, "hop pool");
  chronicle::sync_wait(request(pool, rounds));
}

volatile sig_atomic_t g_own_sigprofs = 0;

void own_sigprof_handler(int) {
  g_own_sigprofs = g_own_sigprofs + 1;
}

// Before chronicle's session starts from the environment (a static object's constructor, of the
// default priority, runs after this one): a program whose SIGPROF handler was there first. glibc
// passes main's arguments to constructors.
__attribute__((constructor(101))) void install_own_handler_first(int argc, char** argv, char**) {
  if (argc != 3 || std::string_view(argv[1]) != "own-handler") return;
  struct sigaction action {};
  action.sa_handler = own_sigprof_handler;
  sigemptyset(&action.sa_mask);
  sigaction(SIGPROF, &action, nullptr);
}

int own_handler(int rounds) {
  cpu(rounds);
  struct sigaction now {};
  sigaction(SIGPROF, nullptr, &now);
  if (now.sa_handler != own_sigprof_handler) {
    std::fprintf(stderr, "profile_workload: SIGPROF's handler is no longer ours\n");
    return 3;
  }
  const int before = g_own_sigprofs;
  raise(SIGPROF);
  if (before != 0 || g_own_sigprofs != 1) {
    std::fprintf(stderr, "profile_workload: %d SIGPROF before our own raise(), %d after\n", before,
                 static_cast<int>(g_own_sigprofs));
    return 3;
  }
  return 0;
}

__attribute__((noinline)) void read_clocks(int rounds) {
  for (long k = 0; k < 1000L * rounds; ++k) {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    g_sink = g_sink + static_cast<unsigned>(now.tv_nsec);
  }
}

}  // namespace profile_workload

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: profile_workload MODE ROUNDS (see the top of profile_workload.cpp)\n");
    return 2;
  }
  const std::string_view mode = argv[1];
  const int rounds = std::atoi(argv[2]);
  if (mode == "cpu") {
    profile_workload::cpu(rounds);
  } else if (mode == "clock") {
    profile_workload::read_clocks(rounds);
  } else if (mode == "library") {
    profile_workload::library(rounds);
  } else if (mode == "tasks") {
    profile_workload::tasks(rounds);
  } else if (mode == "pingpong") {
    profile_workload::pingpong(rounds);
  } else if (mode == "await") {
    profile_workload::await_sleeper();
  } else if (mode == "hops") {
    profile_workload::hops(rounds);
  } else if (mode == "late-thread") {
    profile_workload::late_thread(rounds);
  } else if (mode == "own-handler") {
    return profile_workload::own_handler(rounds);
  } else if (mode == "nested") {
    std::thread worker(profile_workload::nested, rounds);
    worker.join();
  } else if (mode == "sleep") {
    std::thread worker(profile_workload::alternate, rounds);
    worker.join();
  } else {
    return 2;
  }
  return 0;
}
