// A fast writer for live snapshots: a flight-mode session (64 KiB rings of 4 KiB packets, the
// mapping kept in SHM_DIR) and THREADS threads writing the counter "sequence" = 0, 1, 2, ... flat out
// until standard input reaches its end. Writes SHM_DIR/ready once every thread has written.
//   sequence_writer SHM_DIR [THREADS]
#include <chronicle/chronicle.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string shm_dir = argv[1];
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  chronicle::Config config;
  config.mode = chronicle::Mode::flight;
  config.shm_dir = shm_dir;
  config.keep_shm = true;
  config.buffer_size = 64 << 10;
  config.packet_size = 4 << 10;
  if (!chronicle::start(config)) {
    std::fprintf(stderr, "sequence_writer: %s\n", chronicle::last_error().c_str());
    return 1;
  }
  std::atomic<bool> running{true};
  std::atomic<int> started{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      for (int64_t i = 0; running.load(std::memory_order_relaxed); ++i) {
        CHRONICLE_COUNTER("test", "sequence", i);
        if (i == 0) started.fetch_add(1);
      }
    });
  while (started.load() < threads) std::this_thread::yield();
  std::ofstream(shm_dir + "/ready") << "ready\n";
  while (std::fgetc(stdin) != EOF) {
  }
  running = false;
  for (auto& worker : workers) worker.join();
  chronicle::stop();
  return 0;
}
