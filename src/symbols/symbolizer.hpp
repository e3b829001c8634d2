// Function names for the instruction addresses of sampled call stacks, read from the ELF files
// of the modules the sampled process had loaded (elfutils' libdwfl, offline: the process may be
// gone). A module whose file is missing, or is not the build that was loaded, leaves its
// addresses unresolved rather than named wrongly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

struct Dwfl;
struct Dwfl_Module;

namespace chronicle::symbols {

// A loaded ELF object of the sampled process, as the recorder saw it (dl_iterate_phdr):
// `base` is the load bias (dlpi_addr: 0 for a non-PIE executable), [start, end) the
// executable range mapped, `path` the file, `build_id` the GNU build id in lowercase hex ("" if none).
struct Module {
  uint64_t base = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  std::string path;
  std::string build_id;
};

struct Symbol {
  std::string function;  // demangled (abi::__cxa_demangle); "" when unresolved
  std::string module;    // basename of the module's path; "" when the address is in no module
  uint64_t offset = 0;   // address - base (file-relative address), for "[module+0x...]" when unresolved
};

class Symbolizer {
 public:
  explicit Symbolizer(std::vector<Module> modules);
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // `is_return_address`: a caller frame (look up address - 1, so a call at a function's very end
  // resolves to the caller). Cached per address. Never throws on a missing file: unresolved
  // symbols instead. The reference stays valid for the symbolizer's life.
  const Symbol& resolve(uint64_t address, bool is_return_address);
  // "function" or, unresolved, "[module+0xOFFSET]" or "[unknown 0xADDRESS]".
  std::string name(uint64_t address, bool is_return_address);
  // One line per problem met: a module whose file is missing or unreadable, or whose build id
  // differs from the recorded one (then its symbols are not trusted: unresolved).
  std::vector<std::string> warnings() const { return warnings_; }
  // Where the return address of the function executing at `address` is, as an offset in bytes
  // from the stack pointer, when its call frame is defined relative to the stack pointer at that
  // instruction (a function without a frame pointer, or a prologue before it sets one up): the
  // caller the frame-pointer chain skips is the word there. nullopt when the frame is defined by
  // the frame pointer (the chain is right), or when there is no call frame information.
  // Cached per address; x86-64 only (nullopt elsewhere).
  std::optional<uint64_t> return_address_offset(uint64_t address);

 private:
  struct LoadedModule {
    Module recorded;
    std::string basename;
    Dwfl_Module* elf = nullptr;  // null: no symbols to trust (missing file, other build)
  };

  void report(LoadedModule& module);
  const LoadedModule* module_at(uint64_t address) const;
  Symbol lookup(uint64_t address, bool is_return_address) const;
  std::optional<uint64_t> lookup_return_address_offset(uint64_t address) const;

  Dwfl* session_ = nullptr;
  std::vector<LoadedModule> modules_;  // by start
  std::vector<std::string> warnings_;
  // Apart by kind of frame: one address can be both a leaf and a return address.
  std::unordered_map<uint64_t, Symbol> leaf_cache_;
  std::unordered_map<uint64_t, Symbol> return_cache_;
  std::unordered_map<uint64_t, std::optional<uint64_t>> return_offset_cache_;
};

}  // namespace chronicle::symbols
