// Durations in constant memory: buckets of 1/16 of a power of two, so a quantile read from it
// is within about 4% of the true value, whatever the number of samples.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace chronicle::analysis {

class LogHistogram {
 public:
  void add(uint64_t value) {
    ++buckets_[bucket_of(value)];
    ++count_;
    if (value > max_) max_ = value;
  }
  // Adds another histogram's samples: the same as adding them one by one, in any order.
  void merge(const LogHistogram& other) {
    for (size_t bucket = 0; bucket < buckets_.size(); ++bucket) buckets_[bucket] += other.buckets_[bucket];
    count_ += other.count_;
    if (other.max_ > max_) max_ = other.max_;
  }
  uint64_t count() const { return count_; }
  uint64_t max() const { return max_; }

  // The value below which `fraction` of the samples lie (the bucket's midpoint, capped by max).
  uint64_t quantile(double fraction) const {
    if (count_ == 0) return 0;
    const uint64_t rank = static_cast<uint64_t>(fraction * static_cast<double>(count_ - 1)) + 1;
    uint64_t seen = 0;
    for (size_t bucket = 0; bucket < buckets_.size(); ++bucket) {
      seen += buckets_[bucket];
      if (seen >= rank) {
        const uint64_t low = lower_bound_of(bucket);
        const uint64_t high = bucket + 1 < buckets_.size() ? lower_bound_of(bucket + 1) : low;
        const uint64_t middle = low + (high - low) / 2;
        return middle < max_ ? middle : max_;
      }
    }
    return max_;
  }

 private:
  static constexpr unsigned kSubBits = 4;  // 16 buckets per power of two
  static constexpr size_t kBuckets = (64 - kSubBits + 1) << kSubBits;

  static size_t bucket_of(uint64_t value) {
    if (value < (uint64_t{1} << kSubBits)) return static_cast<size_t>(value);
    const unsigned exponent = 63 - static_cast<unsigned>(std::countl_zero(value));  // >= kSubBits
    const uint64_t sub = (value >> (exponent - kSubBits)) & ((uint64_t{1} << kSubBits) - 1);
    return ((exponent - kSubBits + 1) << kSubBits) + sub;
  }
  static uint64_t lower_bound_of(size_t bucket) {
    if (bucket < (size_t{1} << kSubBits)) return bucket;
    const unsigned exponent = static_cast<unsigned>(bucket >> kSubBits) + kSubBits - 1;
    const uint64_t sub = bucket & ((size_t{1} << kSubBits) - 1);
    return (uint64_t{1} << exponent) | (sub << (exponent - kSubBits));
  }

  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  uint64_t max_ = 0;
};

}  // namespace chronicle::analysis
