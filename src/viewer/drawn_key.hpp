// Where an arrow or a message is drawn in a window, exactly: those drawn alike (same pixel
// columns, same rows or lanes, same kind) are merged into one. The key holds every part whole; a
// key of the parts shifted and XORed into one word merged arrows between other rows once a
// trace had more than 32,768 task rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace chronicle::viewer {

struct DrawnKey {
  uint64_t columns = 0;  // the from column << 32 | the to column (at most the width + 2)
  uint64_t ends = 0;     // the from row (or lane) << 32 | the to row (or lane)
  uint32_t kind = 0;
  bool operator==(const DrawnKey&) const = default;

  static DrawnKey of(uint64_t from_column, uint64_t to_column, uint32_t from, uint32_t to, uint32_t kind) {
    return {from_column << 32 | to_column, uint64_t{from} << 32 | to, kind};
  }
};

struct DrawnKeyHash {
  size_t operator()(const DrawnKey& key) const noexcept {
    const std::hash<uint64_t> hash;
    return hash(key.columns * 0x9e3779b97f4a7c15ULL ^ key.ends) ^ hash(key.ends + key.kind);
  }
};

}  // namespace chronicle::viewer
