// Compiled with CHRONICLE_DISABLE: must produce the same code as plain.cpp.
#include <chronicle/chronicle.hpp>

int checksum(const int* data, int size) {
  CHRONICLE_SPAN("probe", "checksum");
  int sum = 0;
  for (int i = 0; i < size; ++i) {
    CHRONICLE_COUNTER("probe", "index", i);
    sum += data[i] * 3;
    CHRONICLE_INSTANT("probe", "step");
  }
  CHRONICLE_SPAN_BEGIN("probe", "tail");
  CHRONICLE_NOTE("probe", "sum is {}", sum);
  CHRONICLE_SPAN_END("probe", "tail");
  return sum;
}
