// Writes the counter "sequence" = 0 .. LAST on its main thread, then writes to a page it mapped
// with no access: a real SIGSEGV, which no sanitizer turns into an error report of its own first
// (a null pointer store would be UBSan's). The session comes from the environment
// (CHRONICLE_OUTPUT, or `chronicle record`).
//   segv_writer LAST
#include <sys/mman.h>
#include <chronicle/chronicle.hpp>

#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const long last = std::strtol(argv[1], nullptr, 10);
  for (long i = 0; i <= last; ++i) CHRONICLE_COUNTER("crash", "sequence", i);
  void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return 3;
  *static_cast<volatile int*>(page) = 1;
  return 0;
}
