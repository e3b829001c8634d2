// The begins of a stream's own spans, as the merge of all spans (spans_apart.cpp) orders them:
// each one's ticks and place in the stream, written by the stream's pass in order and read back
// once, in the same order. Two full numbers would take 16 bytes a span, made present and thrown
// away within a first open; kept as steps from the begin before, they take 8.
#pragma once

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "viewer/column.hpp"

namespace chronicle::viewer {

class BeginKeys {
  struct Step {
    uint32_t ticks;
    uint32_t place;
  };
  // A step that does not fit (the clock going back or jumping 2^32 ticks, or a span beginning
  // 2^32 events after the one before) is written so, its two numbers kept whole beside.
  static constexpr uint32_t kWhole = std::numeric_limits<uint32_t>::max();

 public:
  void reserve(size_t spans) { steps_.reserve(spans); }
  size_t size() const { return steps_.size(); }
  size_t capacity() const { return steps_.capacity(); }

  void push(uint64_t ticks, uint64_t place) {
    const bool fits =
        ticks >= last_ticks_ && ticks - last_ticks_ < kWhole && place >= last_place_ && place - last_place_ < kWhole;
    if (fits) {
      steps_.push_back({static_cast<uint32_t>(ticks - last_ticks_), static_cast<uint32_t>(place - last_place_)});
    } else {
      steps_.push_back({kWhole, kWhole});
      whole_.push_back(ticks);
      whole_.push_back(place);
    }
    last_ticks_ = ticks;
    last_place_ = place;
  }

  // Reads the begins in the order they were pushed; the keys must outlive it.
  class Reader {
   public:
    explicit Reader(const BeginKeys& keys) : keys_(&keys) {}
    // The next begin's ticks and place (size() of them in all).
    std::pair<uint64_t, uint64_t> next() {
      const Step step = keys_->steps_[step_++];
      if (step.ticks == kWhole && step.place == kWhole) {
        ticks_ = keys_->whole_[whole_++];
        place_ = keys_->whole_[whole_++];
      } else {
        ticks_ += step.ticks;
        place_ += step.place;
      }
      return {ticks_, place_};
    }

   private:
    const BeginKeys* keys_;
    size_t step_ = 0;
    size_t whole_ = 0;
    uint64_t ticks_ = 0;
    uint64_t place_ = 0;
  };

  // Lets the memory go.
  void clear() {
    steps_ = Column<Step>::Built();
    whole_ = std::vector<uint64_t>();
  }

 private:
  Column<Step>::Built steps_;
  std::vector<uint64_t> whole_;  // ticks and place of each step written kWhole
  uint64_t last_ticks_ = 0;
  uint64_t last_place_ = 0;
};

}  // namespace chronicle::viewer
