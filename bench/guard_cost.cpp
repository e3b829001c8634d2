// N spans in flight mode (no collector, nothing dropped), for comparing the trace point's cost
// between two builds of the library: instructions under callgrind, CPU time with time(1).
// docs/performance-log.md, "The nesting guard's cost", has the commands.
#include <chronicle/chronicle.hpp>
#include <cstdlib>

int main(int argc, char** argv) {
  const long spans = argc > 1 ? std::atol(argv[1]) : 1'000'000;
  chronicle::Config config;
  config.mode = chronicle::Mode::flight;
  config.shm_dir = argc > 2 ? argv[2] : "/dev/shm";
  config.max_threads = 2;
  if (!chronicle::start(config)) return 1;
  for (long i = 0; i < spans; ++i) {
    CHRONICLE_SPAN("bench", "span");
  }
  chronicle::stop();
  return 0;
}
