// sampling_floor [ROUNDS]: what the kernel alone charges a CPU-bound thread for being sampled at
// 999 Hz, with no reader and nothing of chronicle's: the same spin loop with no perf event, then
// with a cpu-clock event as chronicle opens it (fixed period, per CPU, inherit; with and without
// call stacks), alternated. Prints the thread's CPU time for each, median of ROUNDS (default 5).
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

volatile unsigned g_sink;

double thread_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

enum class Events { none, bare, stacks };

// The spin loop's CPU time with the events open on this thread.
double spin_with(Events events) {
  std::vector<int> fds;
  if (events != Events::none) {
    perf_event_attr attributes{};
    attributes.size = sizeof attributes;
    attributes.type = PERF_TYPE_SOFTWARE;
    attributes.config = PERF_COUNT_SW_CPU_CLOCK;
    attributes.sample_period = 1'000'000'000ULL / 999;
    attributes.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
    if (events == Events::stacks) {
      attributes.sample_type |= PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_STACK_USER;
      attributes.sample_stack_user = 64;
    }
    attributes.inherit = 1;
    attributes.exclude_kernel = 1;
    attributes.sample_id_all = 1;
    for (long cpu = 0; cpu < sysconf(_SC_NPROCESSORS_ONLN); ++cpu) {
      const int fd = static_cast<int>(syscall(SYS_perf_event_open, &attributes, 0, cpu, -1, 0));
      if (fd < 0) {
        std::perror("perf_event_open");
        std::exit(1);
      }
      // A ring as chronicle maps it; nobody reads it (it fills and the kernel counts losses).
      mmap(nullptr, 129 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      fds.push_back(fd);
    }
  }
  const double before = thread_cpu_seconds();
  unsigned value = g_sink;
  for (long i = 0; i < 1'500'000'000L; ++i) value = value * 1664525u + 1013904223u;
  g_sink = value;
  const double spent = thread_cpu_seconds() - before;
  for (const int fd : fds) close(fd);
  return spent;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  std::vector<double> none, bare, stacks;
  for (int round = 0; round < rounds; ++round) {
    none.push_back(spin_with(Events::none));
    bare.push_back(spin_with(Events::bare));
    stacks.push_back(spin_with(Events::stacks));
  }
  const double base = median(none);
  std::printf("no perf event                 %.3f s\n", base);
  std::printf("cpu-clock at 999 Hz           %.3f s (%+.2f%%)\n", median(bare), 100 * (median(bare) / base - 1));
  std::printf("+ call stack and stack words  %.3f s (%+.2f%%)\n", median(stacks), 100 * (median(stacks) / base - 1));
}
