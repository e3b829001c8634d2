// An array of the index that is either built (in the heap, or in a file when spill.hpp says so)
// or mapped from the index cache on disk (viewer/index_cache.hpp). Readers see the same thing either way; only a column
// built in memory can change. Mapped pages are read from disk when first touched and can be dropped again by the
// kernel, so a mapped index costs memory only for what the windows look at.
#pragma once

#include <cassert>
#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "viewer/spill.hpp"

namespace chronicle::viewer {

template <class T>
class Column {
  static_assert(std::is_trivially_copyable_v<T>, "a column is written to disk and mapped back as bytes");

 public:
  using value_type = T;
  using const_iterator = const T*;

  using Built = std::vector<T, SpillAllocator<T>>;

  Column() = default;
  Column(Built values) : owned_(std::move(values)) {}  // NOLINT: a built array becomes a column
  Column(const std::vector<T>& values) : owned_(values.begin(), values.end()) {}  // NOLINT: likewise
  Column& operator=(Built values) {
    owned_ = std::move(values);
    release_mapping();
    return *this;
  }
  Column& operator=(const std::vector<T>& values) { return *this = Built(values.begin(), values.end()); }

  // Points at `size` values inside a mapping that `keep` holds alive.
  static Column mapped(std::shared_ptr<const void> keep, const T* data, size_t size) {
    Column column;
    column.keep_ = std::move(keep);
    column.mapped_data_ = data;
    column.mapped_size_ = size;
    return column;
  }
  bool is_mapped() const { return keep_ != nullptr; }

  size_t size() const { return is_mapped() ? mapped_size_ : owned_.size(); }
  bool empty() const { return size() == 0; }
  const T* data() const { return is_mapped() ? mapped_data_ : owned_.data(); }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size(); }
  const T& operator[](size_t k) const { return data()[k]; }
  const T& at(size_t k) const {
    if (k >= size()) throw std::out_of_range("column index");
    return data()[k];
  }
  const T& front() const { return data()[0]; }
  const T& back() const { return data()[size() - 1]; }
  operator std::span<const T>() const { return {data(), size()}; }

  // Building: a column in memory only.
  Built& values() {
    assert(!is_mapped());
    return owned_;
  }
  T* begin() { return values().data(); }
  T* end() { return values().data() + owned_.size(); }
  T& operator[](size_t k) { return values()[k]; }
  T& back() { return values().back(); }
  void push_back(const T& value) { values().push_back(value); }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    return values().emplace_back(std::forward<Args>(args)...);
  }
  template <class It>
  void insert_at_end(It first, It last) {
    values().insert(owned_.end(), first, last);
  }
  void resize(size_t size) { values().resize(size); }
  void assign(size_t size, const T& value) { values().assign(size, value); }
  void reserve(size_t size) { values().reserve(size); }
  void shrink_to_fit() { values().shrink_to_fit(); }

 private:
  void release_mapping() {
    keep_.reset();
    mapped_data_ = nullptr;
    mapped_size_ = 0;
  }

  Built owned_;
  std::shared_ptr<const void> keep_;
  const T* mapped_data_ = nullptr;
  size_t mapped_size_ = 0;
};

}  // namespace chronicle::viewer
