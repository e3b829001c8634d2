// Where the large arrays of an index being built live: in files on disk, mapped, rather than in
// anonymous memory. A billion-event trace's index is some 20 GiB while it is built; in the heap
// that is more than the machine has, and the kernel kills the viewer. In a mapping of a file the
// kernel writes the pages out when it needs the memory and reads them back when touched, so the
// build goes on, slower where the disk is slow.
//
// How it fails, and why that is safe:
// - The file's blocks are reserved (posix_fallocate) before it is mapped: a store to the mapping
//   can never find the disk full (which would be SIGBUS). When the reservation, the file or the
//   mapping cannot be had, the array goes to the heap as before, and `refused` counts it.
// - The files are made unnamed (O_TMPFILE) or unlinked at once: whatever ends the viewer, no
//   file is left behind, and the disk space returns when the array is let go.
// - Only arrays of at least `threshold_bytes` go to disk; smaller ones stay in the heap, so small
//   traces and the server's own work are as before.
//
// Off until a SpillScope turns it on (open_index does, for the build of a trace too large for
// the memory left, spill_needed). The setting is process-wide; scopes do not nest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace chronicle::viewer {

struct SpillStats {
  uint64_t files = 0;        // arrays placed in files so far
  uint64_t bytes_now = 0;    // held in files now
  uint64_t bytes_peak = 0;   // the most held at once
  uint64_t refused = 0;      // arrays that went to the heap because a file could not be had
  std::string last_problem;  // why, for the last one refused
};

class SpillScope {
 public:
  // `directory`: where the files go (best on a disk, not on tmpfs, where they are memory too).
  explicit SpillScope(const std::string& directory, size_t threshold_bytes = kDefaultThreshold);
  ~SpillScope();
  SpillScope(const SpillScope&) = delete;
  SpillScope& operator=(const SpillScope&) = delete;

  static constexpr size_t kDefaultThreshold = size_t{1} << 20;
};

SpillStats spill_stats();

// While an index is built: fresh memory is dear (a page fault per page, ~9 us each on this
// machine's VM), and the building grows many vectors by doubling, so the blocks it frees stay with
// malloc (not returned to the system at once, nor mapped anew per large block) to be reused. When
// the scope ends, what is free is returned and malloc's defaults are set again, for the server.
// Process-wide (glibc's mallopt); scopes do not nest.
class IndexingMemory {
 public:
  IndexingMemory();
  ~IndexingMemory();
  IndexingMemory(const IndexingMemory&) = delete;
  IndexingMemory& operator=(const IndexingMemory&) = delete;
};

// While a server answers: an answer's large blocks (a whole trace's window text is a megabyte,
// grown by doubling; its arrows' map and lists) are kept by malloc for the next answer, up to
// 64 MiB free at an arena's top. With malloc's defaults each was mapped afresh and given back, and
// the next answer took a page fault per page again (1,768 for a 100 M-event trace's whole window,
// a sixth of its time). Process-wide (glibc's mallopt), after any IndexingMemory scope has ended.
void keep_memory_between_answers();

// The memory this process can still take before the kernel must kill something: MemAvailable,
// or what the cgroup's memory.max leaves when that is less.
uint64_t memory_available();

// Whether an index built from `trace_bytes` of trace files should hold its arrays in files: when
// building it in the heap could take more than half of `available`. In the heap the build
// peaks at about 8.5 bytes per byte of trace (anonymous memory, measured at 10 M and 100 M events
// on 30 November 2026; it was 4.5 when this was first written, before tasks by time, whole
// spans and the arrows' orders); in files it
// is faster to build nowhere, slower by a third at 10 M events (page faults on a file
// mapping cost more), so small traces keep the heap.
bool spill_needed(uint64_t trace_bytes, uint64_t available);

// The memory a build is expected to take, beyond arrays held in files: 64 MiB whatever the size,
// and ~8.5 bytes per byte of trace in the heap, ~1.8 with files (the task graph, mostly:
// measured 1.78 at 10 M events, 1.45 at 1 G). An estimate for a warning, not a bound: in a v1
// memory cgroup, which counts the files' dirty pages too, a build may be stopped below it.
uint64_t expected_build_memory(uint64_t trace_bytes, bool in_files);

namespace spill {
// nullptr: not placed in a file (spilling is off, the array is small, or no file could be had).
void* allocate(size_t bytes);
// False: `pointer` was not placed in a file by allocate (it is the heap's).
bool release(void* pointer);
// Makes the pages of the first `bytes` at `start` present at once (MADV_POPULATE_WRITE), when
// they are at least a megabyte, rather than one page fault at a time as they are first written.
// Contents are unchanged. Where the kernel cannot (before Linux 5.14), it does nothing.
void populate(void* start, size_t bytes);
}  // namespace spill

// The allocator of Column's arrays being built: in a file when spill::allocate places it there,
// else in the heap.
template <class T>
struct SpillAllocator {
  using value_type = T;
  SpillAllocator() = default;
  template <class U>
  SpillAllocator(const SpillAllocator<U>&) {}  // NOLINT: rebinding, as allocators do

  T* allocate(size_t count) {
    if (void* placed = spill::allocate(count * sizeof(T))) return static_cast<T*>(placed);
    T* array = std::allocator<T>().allocate(count);
    spill::populate(array, count * sizeof(T));
    return array;
  }
  void deallocate(T* pointer, size_t count) {
    if (!spill::release(pointer)) std::allocator<T>().deallocate(pointer, count);
  }
  template <class U>
  bool operator==(const SpillAllocator<U>&) const {
    return true;
  }
};

}  // namespace chronicle::viewer
