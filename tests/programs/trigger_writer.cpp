// A program whose gauge "load" crosses 5 twice (wobbling in between), each step once `chronicle record --trigger` has
// shown it saw the previous step (in OUTPUT.triggers/log), while a thread counts ("seq") every
// millisecond. The crossings' times are for the test to find in the snapshots.
//   trigger_writer OUTPUT
#include <chronicle/chronicle.hpp>
#include <chronicle/metrics.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace {

size_t count_in(const std::string& path, const std::string& text) {
  std::ifstream file(path);
  const std::string all((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  size_t n = 0;
  for (size_t at = all.find(text); at != std::string::npos; at = all.find(text, at + 1)) ++n;
  return n;
}

// Waits (60 s at most) until `path` holds `text` at least `times` times.
bool wait_for(const std::string& path, const std::string& text, size_t times = 1) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (count_in(path, text) < times) {
    if (std::chrono::steady_clock::now() > limit) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string triggers = std::string(argv[1]) + ".triggers";
  chronicle::Gauge load("load");
  load.set(1);
  std::atomic<bool> done{false};
  std::thread counting([&done] {
    for (long i = 0; !done.load(); ++i) {
      CHRONICLE_COUNTER("seq", "n", i);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  const std::string log = triggers + "/log";
  bool ok = wait_for(log, "watching load > 5");
  load.set(10);
  ok = ok && wait_for(log, "snapshot #");
  // Below the line but within the hysteresis margin, then above it again: no second firing (a
  // trigger re-armed by 4.8 would fire here; one whose sampling missed this wobble proves less).
  load.set(4.8);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  load.set(10);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  load.set(1);
  ok = ok && wait_for(log, "re-armed: load > 5 (value 1)");
  // The next crossing's snapshot, whichever number it has.
  const size_t snapshots = count_in(log, "snapshot #");
  load.set(10);
  ok = ok && wait_for(log, "snapshot #", snapshots + 1);
  done = true;
  counting.join();
  return ok ? 0 : 1;
}
