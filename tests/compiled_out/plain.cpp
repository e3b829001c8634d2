// The uninstrumented twin of instrumented.cpp.
int checksum(const int* data, int size) {
  int sum = 0;
  for (int i = 0; i < size; ++i) sum += data[i] * 3;
  return sum;
}
