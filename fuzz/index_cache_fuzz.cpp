// The input is a viewer index cache file (viewer/index_cache.hpp): whatever its bytes, reading it
// either gives an index whose every column lies inside the file, or throws IndexCacheDamaged.
// (Its identity, the traces it names, is taken from the input itself, so that the fuzzer gets
// past that check.)
#include <cstring>

#include "fuzz_support.hpp"
#include "viewer/index_cache.hpp"

namespace {

using namespace chronicle;

// The identity text the file's description begins with, or "" when the header says nothing
// sensible (load then tells why).
std::string identity_in(const uint8_t* data, size_t size) {
  constexpr size_t kFieldsOffsetAt = 32;  // after magic, version, layout, graphs' offset and size
  uint64_t offset = 0;
  uint64_t length = 0;
  if (size < kFieldsOffsetAt + 8) return "";
  std::memcpy(&offset, data + kFieldsOffsetAt, 8);
  if (offset > size || size - offset < 8) return "";
  std::memcpy(&length, data + offset, 8);
  if (length > size - offset - 8) return "";
  return std::string(reinterpret_cast<const char*>(data + offset + 8), length);
}

template <class T>
uint64_t touch(const viewer::Column<T>& column) {
  uint64_t sum = column.size();
  for (size_t k = 0; k < column.size(); k += 1 + column.size() / 8)
    sum += reinterpret_cast<const uint8_t*>(&column[k])[0];
  if (!column.empty()) sum += reinterpret_cast<const uint8_t*>(&column.back())[sizeof(T) - 1];
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::scratch_directory() + "/index";
  fuzz::write_file(path, data, size);
  try {
    const auto index = viewer::IndexCache::load(path, identity_in(data, size));
    if (!index) return 0;
    uint64_t sum = touch(index->task_lines()) + touch(index->arrows()) + touch(index->messages());
    for (const viewer::Lane& lane : index->lanes()) {
      for (const viewer::IntervalRow& row : lane.depths) sum += touch(row.begins) + touch(row.ends) + touch(row.items);
      for (const viewer::IntervalRow& row : lane.runs) sum += touch(row.begins) + touch(row.items);
      sum += touch(lane.idle.ends) + touch(lane.markers.times) + touch(lane.markers.texts.chars);
    }
    for (const viewer::CounterSeries& series : index->counters()) sum += touch(series.times) + touch(series.values);
    sum += index->graphs().size();
    if (sum == 0xdeadbeef) std::abort();  // keeps the reads
  } catch (const viewer::IndexCacheDamaged&) {
  }
  return 0;
}
