// Where a task is among many (a graph's tasks, the span pairing's task origins), found by its id.
//
// A writer makes ids as (maker << 40 | counter): the maker is the index of the thread that made
// the task, the counter counts up from 1 on that thread (chronicle/detail/task_writer.hpp). So
// nearly every id has a slot in a flat array per maker, found by two array reads where a hash map
// hashes and misses the cache (a graph of millions of tasks is looked up for every task event
// of a trace). Ids that fit no array, because their maker or counter is far beyond those seen so
// far (another writer, events lost, garbage), are kept in a hash map instead: an array grows only
// to a bound of the ids it already holds, so no id can make the index large.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace chronicle::reader {

// A task id's layout, as writers make it (chronicle/detail/task_writer.hpp, kTaskCounterBits):
// the making thread's index above the low 40 bits, that thread's counter in them.
inline constexpr unsigned kTaskIdCounterBits = 40;
constexpr uint64_t task_id_maker(uint64_t id) {
  return id >> kTaskIdCounterBits;
}
constexpr uint64_t task_id_counter(uint64_t id) {
  return id & ((uint64_t{1} << kTaskIdCounterBits) - 1);
}

class TaskIdIndex {
 public:
  static constexpr size_t kNone = std::numeric_limits<size_t>::max();

  // The place given to `id`, or kNone.
  size_t find(uint64_t id) const;
  // Gives `id` the place `place` unless it has one already; returns its place and whether it is
  // new (as std::unordered_map::try_emplace does).
  std::pair<size_t, bool> try_add(uint64_t id, size_t place);
  size_t size() const { return size_; }
  // Slots of the flat arrays, what most of the index's memory is (4 bytes each): at most four
  // times the ids they hold plus 2^18, whatever the ids.
  size_t array_slots() const { return array_slots_; }

 private:
  // A maker's array may be this many slots longer than twice the ids it holds, the makers' array
  // this many longer than twice the makers seen (room for ids that arrive out of order), and all
  // arrays together this many longer than four times the ids in them (so that ids spread over
  // many makers cannot each claim a maker's room).
  static constexpr uint64_t kSlack = 4096;
  static constexpr uint64_t kMakerSlack = 64;
  static constexpr uint64_t kTotalSlack = uint64_t{1} << 18;
  static constexpr uint64_t kMaxMakers = uint64_t{1} << 16;

  struct Maker {
    std::vector<uint32_t> places;  // by counter: place + 1; 0 when the id has none
    uint64_t held = 0;             // ids in `places`
  };

  // The slot `id` would have in the arrays, growing them within their bounds; null when it has none.
  uint32_t* slot_for(uint64_t id);

  std::vector<Maker> makers_;
  uint64_t makers_seen_ = 0;
  uint64_t array_slots_ = 0;
  std::unordered_map<uint64_t, size_t> others_;
  size_t size_ = 0;
};

}  // namespace chronicle::reader
