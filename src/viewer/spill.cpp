#include "viewer/spill.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>

#include <fmt/format.h>

namespace chronicle::viewer {
namespace {

// Everything below is under `mutex`: files are made rarely (arrays of megabytes, as they grow by
// doubling), so one lock costs nothing next to the system calls it guards.
struct SpillState {
  std::mutex mutex;
  bool on = false;
  std::string directory;
  size_t threshold = SpillScope::kDefaultThreshold;
  std::map<void*, size_t> placed;  // mapping -> its length
  // placed.size(), readable without the lock. An array is only let go after the allocate that
  // placed it returned (on this thread, or handed over with the array), so a count of zero
  // read here means none of the arrays this thread can hold is in a file.
  std::atomic<size_t> placed_count{0};
  SpillStats stats;
};

SpillState& state() {
  static SpillState* const instance = new SpillState;  // never destroyed: arrays may outlive main
  return *instance;
}

#ifdef MADV_POPULATE_WRITE
constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kPopulateWrite = 23;  // Linux 5.14's value; older kernels answer EINVAL
#endif

// glibc's largest mmap threshold, a trim threshold no building reaches, and glibc's defaults.
constexpr int kIndexingMmapThreshold = 32 << 20;
constexpr int kIndexingTrimThreshold = std::numeric_limits<int>::max();
constexpr int kDefaultMmapThreshold = 128 << 10;
constexpr int kDefaultTrimThreshold = 128 << 10;
// Answers: blocks up to glibc's largest mmap threshold from the arenas, kept while less than this
// is free at an arena's top.
constexpr int kAnswersMmapThreshold = 32 << 20;
constexpr int kAnswersTrimThreshold = 64 << 20;

size_t page_rounded(size_t bytes) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

// An unnamed file in `directory`; where O_TMPFILE is not supported, a named one unlinked at once.
int unnamed_file(const std::string& directory) {
  int fd = ::open(directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
  std::string name = directory + "/.chronicle-view-spill-XXXXXX";
  fd = mkostemp(name.data(), O_CLOEXEC);
  if (fd >= 0) ::unlink(name.c_str());
  return fd;
}

// A mapping of `length` bytes of a new file whose blocks are all reserved; nullptr and `problem`
// set when any step fails.
void* map_reserved_file(const std::string& directory, size_t length, std::string& problem) {
  const int fd = unnamed_file(directory);
  if (fd < 0) {
    problem = fmt::format("cannot create a file in {}: {}", directory, std::strerror(errno));
    return nullptr;
  }
  // Reserved before it is mapped: a store to a page the disk has no room for would be SIGBUS.
  if (const int failed = posix_fallocate(fd, 0, static_cast<off_t>(length)); failed != 0) {
    problem = fmt::format("cannot reserve {} bytes in {}: {}", length, directory, std::strerror(failed));
    ::close(fd);
    return nullptr;
  }
  void* mapping = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file
  if (mapping == MAP_FAILED) {
    problem = fmt::format("cannot map a file of {} bytes: {}", length, std::strerror(map_errno));
    return nullptr;
  }
  return mapping;
}

}  // namespace

SpillScope::SpillScope(const std::string& directory, size_t threshold_bytes) {
  SpillState& spill = state();
  std::lock_guard lock(spill.mutex);
  spill.on = true;
  spill.directory = directory;
  spill.threshold = threshold_bytes;
  const uint64_t held = spill.stats.bytes_now;
  spill.stats = {};
  spill.stats.bytes_now = held;  // arrays of an earlier scope still held
  spill.stats.bytes_peak = held;
}

SpillScope::~SpillScope() {
  SpillState& spill = state();
  std::lock_guard lock(spill.mutex);
  spill.on = false;  // arrays already in files stay there until they are let go
}

SpillStats spill_stats() {
  SpillState& spill = state();
  std::lock_guard lock(spill.mutex);
  return spill.stats;
}

namespace {

// A field of /proc/meminfo in bytes; 0 when absent.
uint64_t meminfo_bytes(const std::string& field) {
  std::ifstream meminfo("/proc/meminfo");
  std::string name;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> name >> kib) {
    std::getline(meminfo, unit);
    if (name == field + ":") return kib * 1024;
  }
  return 0;
}

// limit - usage from two files of a cgroup directory; max when either is missing or unlimited.
uint64_t room_in(const std::string& limit_path, const std::string& usage_path) {
  std::ifstream limit_file(limit_path);
  std::ifstream usage_file(usage_path);
  std::string limit;
  uint64_t usage = 0;
  if (!(limit_file >> limit) || limit == "max" || !(usage_file >> usage)) return std::numeric_limits<uint64_t>::max();
  const uint64_t bound = std::strtoull(limit.c_str(), nullptr, 10);
  return bound > usage ? bound - usage : 0;
}

// What the memory cgroup this process is in still allows: v2 ("0::/path", memory.max), or v1
// ("N:memory:/path", memory.limit_in_bytes, whose usage counts the page cache too, so the room
// is underestimated, and files are chosen sooner). max when no limit is set.
uint64_t cgroup_room() {
  std::ifstream membership("/proc/self/cgroup");
  std::string line;
  uint64_t room = std::numeric_limits<uint64_t>::max();
  while (std::getline(membership, line)) {
    if (line.starts_with("0::")) {
      const std::string directory = "/sys/fs/cgroup" + line.substr(3);
      room = std::min(room, room_in(directory + "/memory.max", directory + "/memory.current"));
    } else if (const size_t at = line.find(":memory:"); at != std::string::npos) {
      const std::string directory = "/sys/fs/cgroup/memory" + line.substr(at + 8);
      room = std::min(room, room_in(directory + "/memory.limit_in_bytes", directory + "/memory.usage_in_bytes"));
    }
  }
  return room;
}

}  // namespace

uint64_t memory_available() {
  return std::min(meminfo_bytes("MemAvailable"), cgroup_room());
}

bool spill_needed(uint64_t trace_bytes, uint64_t available) {
  constexpr uint64_t kHeapBuildPerTraceByte = 9;  // the measured 8.5, rounded up
  return trace_bytes > available / 2 / kHeapBuildPerTraceByte;
}

uint64_t expected_build_memory(uint64_t trace_bytes, bool in_files) {
  constexpr uint64_t kWhateverTheSize = uint64_t{64} << 20;  // the program, the feed's batches, arenas
  return kWhateverTheSize + (in_files ? trace_bytes / 5 * 9 : trace_bytes / 2 * 17);
}

IndexingMemory::IndexingMemory() {
  mallopt(M_MMAP_THRESHOLD, kIndexingMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kIndexingTrimThreshold);
}

IndexingMemory::~IndexingMemory() {
  malloc_trim(0);
  mallopt(M_MMAP_THRESHOLD, kDefaultMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kDefaultTrimThreshold);
}

void keep_memory_between_answers() {
  mallopt(M_MMAP_THRESHOLD, kAnswersMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kAnswersTrimThreshold);
}

namespace spill {

void* allocate(size_t bytes) {
  SpillState& spill = state();
  std::lock_guard lock(spill.mutex);
  if (!spill.on || bytes == 0 || bytes < spill.threshold) return nullptr;
  const size_t length = page_rounded(bytes);
  std::string problem;
  void* mapping = map_reserved_file(spill.directory, length, problem);
  if (!mapping) {
    ++spill.stats.refused;
    spill.stats.last_problem = std::move(problem);
    return nullptr;
  }
  spill.placed.emplace(mapping, length);
  spill.placed_count.store(spill.placed.size(), std::memory_order_release);
  ++spill.stats.files;
  spill.stats.bytes_now += length;
  spill.stats.bytes_peak = std::max(spill.stats.bytes_peak, spill.stats.bytes_now);
  return mapping;
}

bool release(void* pointer) {
  SpillState& spill = state();
  // Every column's array is let go through here: while none is in a file, no lock is taken.
  if (pointer == nullptr || spill.placed_count.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard lock(spill.mutex);
  const auto found = spill.placed.find(pointer);
  if (found == spill.placed.end()) return false;
  const size_t length = found->second;
  munmap(pointer, length);
  spill.stats.bytes_now -= length;
  spill.placed.erase(found);
  spill.placed_count.store(spill.placed.size(), std::memory_order_release);
  return true;
}

void populate(void* start, size_t bytes) {
  constexpr size_t kAtLeast = size_t{1} << 20;
  if (bytes < kAtLeast) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(start) + page - 1) / page * page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(start) + bytes) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, kPopulateWrite);
}

}  // namespace spill
}  // namespace chronicle::viewer
