#include "reader/task_id_index.hpp"

#include <algorithm>

namespace chronicle::reader {

size_t TaskIdIndex::find(uint64_t id) const {
  const uint64_t maker = task_id_maker(id);
  const uint64_t counter = task_id_counter(id);
  if (maker < makers_.size()) {
    const std::vector<uint32_t>& places = makers_[maker].places;
    if (counter < places.size() && places[counter] != 0) return places[counter] - 1;
  }
  if (others_.empty()) return kNone;
  const auto found = others_.find(id);
  return found == others_.end() ? kNone : found->second;
}

uint32_t* TaskIdIndex::slot_for(uint64_t id) {
  const uint64_t maker = task_id_maker(id);
  const uint64_t counter = task_id_counter(id);
  if (maker >= makers_.size()) {
    if (maker >= kMaxMakers || maker >= 2 * makers_seen_ + kMakerSlack) return nullptr;
    makers_.resize(maker + 1);
  }
  Maker& of = makers_[maker];
  if (counter >= of.places.size()) {
    if (counter >= 2 * of.held + kSlack) return nullptr;
    // Doubling, as a vector grows, but never past the bounds.
    const uint64_t grown =
        std::min<uint64_t>(std::max<uint64_t>(counter + 1, 2 * of.places.size()), 2 * of.held + kSlack);
    const uint64_t added = grown - of.places.size();
    if (array_slots_ + added > 4 * (size_ + 1) + kTotalSlack) return nullptr;
    of.places.resize(grown);
    array_slots_ += added;
  }
  return &of.places[counter];
}

std::pair<size_t, bool> TaskIdIndex::try_add(uint64_t id, size_t place) {
  if (const size_t known = find(id); known != kNone) return {known, false};
  uint32_t* slot = place < std::numeric_limits<uint32_t>::max() ? slot_for(id) : nullptr;
  if (slot) {
    Maker& of = makers_[task_id_maker(id)];
    if (of.held++ == 0) ++makers_seen_;
    *slot = static_cast<uint32_t>(place + 1);
  } else {
    others_.emplace(id, place);
  }
  ++size_;
  return {place, true};
}

}  // namespace chronicle::reader
