// The ELF objects loaded in this process, as the dynamic loader lists them: what a sample's
// addresses are symbolised against later (the module definitions of the trace).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace chronicle::recorder {

struct LoadedModule {
  uint64_t base = 0;   // load bias: 0 for a fixed-address executable
  uint64_t start = 0;  // the executable segment, [start, end)
  uint64_t end = 0;
  std::string build_id;  // NT_GNU_BUILD_ID in lowercase hex; "" when the object has none
  std::string path;      // the main program's is /proc/self/exe resolved
};

// Objects with code, in the loader's order; the vDSO by the path format::kVdsoModulePath.
std::vector<LoadedModule> loaded_modules();

// Changes whenever an object is loaded (dl_iterate_phdr's dlpi_adds): cheap to poll.
uint64_t module_load_count();

}  // namespace chronicle::recorder
