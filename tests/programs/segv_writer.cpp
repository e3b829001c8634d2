// Writes the counter "sequence" = 0 .. LAST on its main thread, then dereferences a null pointer.
// The session comes from the environment (CHRONICLE_OUTPUT, or `chronicle record`).
//   segv_writer LAST
#include <chronicle/chronicle.hpp>

#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const long last = std::strtol(argv[1], nullptr, 10);
  for (long i = 0; i <= last; ++i) CHRONICLE_COUNTER("crash", "sequence", i);
  volatile int* nowhere = nullptr;
  *nowhere = 1;
  return 0;
}
