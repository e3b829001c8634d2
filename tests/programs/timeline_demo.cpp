// A program whose trace has everything the viewer draws: nested spans on several threads,
// counters, notes, tasks that wait on others and are resolved by others (ok, failed,
// cancelled), and idle periods. Small by default for the tests; with large arguments under
// `chronicle record`, the generated traces of docs/performance-viewer.md.
//
//   timeline_demo [rounds per thread = 150] [threads = 3] [a task every N rounds = 1] [idle us = 50]
//                 [rounds per second per thread = 0: as fast as it can]
// The last paces a large run to what the disk takes: four threads as fast as they can make some
// 600 MB/s of trace, more than `record` can write to most disks for long.
#include <chronicle/chronicle.hpp>
#include <chronicle/task.hpp>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

using chronicle::TaskKind;
using chronicle::TaskOutcome;

void spin_for(std::chrono::nanoseconds length) {
  const auto until = std::chrono::steady_clock::now() + length;
  while (std::chrono::steady_clock::now() < until) {
  }
}

// One job: a parent task that waits on a part, which the job itself resolves.
void run_job(int worker, long round, bool slow) {
  const chronicle::TaskId job = chronicle::create_task(TaskKind::promise, "job");
  chronicle::label_task(job, "job " + std::to_string(worker) + "." + std::to_string(round));
  chronicle::TaskRunScope run(job);
  CHRONICLE_NOTE("demo", "job {} of worker {}", round, worker);
  const chronicle::TaskId part = chronicle::create_task(TaskKind::coroutine, "part");
  chronicle::task_waits_for(job, part);
  {
    chronicle::TaskRunScope part_run(part);
    CHRONICLE_SPAN("demo", "compute");
    if (slow) {  // the small trace: an attribute to search for (the large ones stay as they were)
      CHRONICLE_SPAN_ATTRIBUTE("demo", "worker", worker);
      spin_for(std::chrono::microseconds(3));
    }
  }
  if (round % 17 == 3)
    chronicle::resolve_task(part, TaskOutcome::failed, "checksum mismatch");
  else
    chronicle::resolve_task(part, TaskOutcome::ok);
  if (round % 13 == 5)
    chronicle::resolve_task(job, TaskOutcome::cancelled, "deadline passed", 0);
  else
    chronicle::resolve_task(job, TaskOutcome::ok, {}, 0);
}

// Sleeps while the thread is ahead of `per_second` rounds a second (checked every 1024 rounds).
void keep_pace(long round, long per_second, std::chrono::steady_clock::time_point started) {
  if (per_second <= 0 || round % 1024 != 0) return;
  const auto due = started + std::chrono::nanoseconds(round * 1'000'000'000LL / per_second);
  std::this_thread::sleep_until(due);
}

void work(int worker, long rounds, long task_every, long idle_us, long per_second) {
  chronicle::set_thread_name("worker-" + std::to_string(worker));
  const bool slow = idle_us > 0;  // the small trace for the tests has real lengths to look at
  const auto started = std::chrono::steady_clock::now();
  for (long round = 0; round < rounds; ++round) {
    keep_pace(round, per_second, started);
    CHRONICLE_SPAN("demo", "round");
    CHRONICLE_COUNTER("demo", "round", round);
    {
      CHRONICLE_SPAN("demo", "prepare");
      {
        CHRONICLE_SPAN("demo", "parse");
        if (slow) spin_for(std::chrono::microseconds(2));
      }
      if (round % 50 == 7) CHRONICLE_INSTANT("demo", "cache miss");
    }
    if (round % task_every == 0) run_job(worker, round, slow);
    if (idle_us > 0 && round % 10 == 9) {
      chronicle::loop_suspend();
      std::this_thread::sleep_for(std::chrono::microseconds(idle_us));
      chronicle::loop_resume();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const long rounds = argc > 1 ? std::atol(argv[1]) : 150;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 3;
  const long task_every = argc > 3 ? std::max(1L, std::atol(argv[3])) : 1;
  const long idle_us = argc > 4 ? std::atol(argv[4]) : 50;
  const long per_second = argc > 5 ? std::atol(argv[5]) : 0;
  std::vector<std::thread> workers;
  for (int worker = 0; worker < threads; ++worker)
    workers.emplace_back(work, worker, rounds, task_every, idle_us, per_second);
  for (auto& worker : workers) worker.join();
  return 0;
}
