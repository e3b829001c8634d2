// The symbolizer (symbols/symbolizer.hpp) on the test's own process: its modules as the recorder
// would see them (dl_iterate_phdr, build ids read from the notes in memory), functions of the
// executable (PIE, so that the load bias matters) and of a shared library named from their
// files, and modules it must not trust: a file rebuilt since (another build id) and a file gone.
// Also where the return address is, from the frame tables, in a function with no frame pointer
// and in one that sets one up (built with -fno-omit-frame-pointer, as profiled programs are).
#include "symbols/symbolizer.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "programs/profile_library.hpp"

namespace profile_test {

__attribute__((noinline)) int hot_function(int rounds) {
  volatile int product = 1;
  for (int k = 1; k < rounds; ++k) product = product * k + 1;
  return product;
}

volatile unsigned leaf_state = 1;

// Needs no stack: GCC gives it no frame even with -fno-omit-frame-pointer, so its return address
// stays at the stack pointer throughout.
__attribute__((noinline)) void frameless_leaf(unsigned rounds) {
  unsigned value = leaf_state;
  for (unsigned k = 0; k < rounds; ++k) value = value * 3 + 1;
  leaf_state = value;
}

// Calls out and uses the result after, so it is no tail call: it sets up %rbp.
__attribute__((noinline)) unsigned framed_caller(unsigned rounds) {
  frameless_leaf(rounds);
  frameless_leaf(rounds + 1);
  return leaf_state + 1;
}

}  // namespace profile_test

namespace chronicle::symbols {
namespace {

std::string executable_path() {
  char path[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof path);
  return length > 0 ? std::string(path, static_cast<size_t>(length)) : std::string();
}

std::string to_hex(const unsigned char* bytes, size_t length) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (size_t k = 0; k < length; ++k) {
    hex += kDigits[bytes[k] >> 4];
    hex += kDigits[bytes[k] & 0xf];
  }
  return hex;
}

// The GNU build id among the notes of one PT_NOTE segment as mapped, "" if none.
std::string build_id_in_notes(const unsigned char* notes, size_t size, size_t alignment) {
  auto aligned = [alignment](size_t n) { return (n + alignment - 1) / alignment * alignment; };
  size_t at = 0;
  while (at + sizeof(ElfW(Nhdr)) <= size) {
    ElfW(Nhdr) header;
    std::memcpy(&header, notes + at, sizeof header);
    const unsigned char* name = notes + at + sizeof header;
    const unsigned char* description = name + aligned(header.n_namesz);
    if (header.n_type == NT_GNU_BUILD_ID && header.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0)
      return to_hex(description, header.n_descsz);
    at += sizeof header + aligned(header.n_namesz) + aligned(header.n_descsz);
  }
  return "";
}

int add_module(dl_phdr_info* info, size_t, void* data) {
  Module module;
  module.base = info->dlpi_addr;
  module.path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : executable_path();
  // The vDSO has no file to read: the recorder's business, not this test's.
  if (module.path.find('/') == std::string::npos) return 0;
  for (ElfW(Half) k = 0; k < info->dlpi_phnum; ++k) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[k];
    if (segment.p_type == PT_LOAD && (segment.p_flags & PF_X)) {
      module.start = info->dlpi_addr + segment.p_vaddr;
      module.end = module.start + segment.p_memsz;
    } else if (segment.p_type == PT_NOTE && module.build_id.empty()) {
      // Notes are 4-byte aligned, or 8 in segments so aligned (.note.gnu.property).
      module.build_id = build_id_in_notes(reinterpret_cast<const unsigned char*>(info->dlpi_addr + segment.p_vaddr),
                                          segment.p_memsz, segment.p_align == 8 ? 8 : 4);
    }
  }
  if (module.end > module.start) static_cast<std::vector<Module>*>(data)->push_back(module);
  return 0;
}

std::vector<Module> process_modules() {
  std::vector<Module> modules;
  dl_iterate_phdr(add_module, &modules);
  return modules;
}

uint64_t address_of(const void* function) {
  return reinterpret_cast<uint64_t>(function);
}

Module* module_holding(std::vector<Module>& modules, uint64_t address) {
  auto found = std::find_if(modules.begin(), modules.end(), [address](const Module& module) {
    return module.start <= address && address < module.end;
  });
  return found == modules.end() ? nullptr : &*found;
}

// The size of a function exported by a shared library, from its dynamic symbol.
uint64_t exported_size(const void* function) {
  Dl_info info;
  void* symbol = nullptr;
  if (dladdr1(function, &info, &symbol, RTLD_DL_SYMENT) == 0 || !symbol) return 0;
  return static_cast<const ElfW(Sym)*>(symbol)->st_size;
}

const unsigned char* code_of(const void* function) {
  return static_cast<const unsigned char*>(function);
}

// Where the function's own instructions start: past an endbr64 (f3 0f 1e fa), which
// -fcf-protection puts at every function's entry.
size_t past_endbr64(const unsigned char* code) {
  static const unsigned char kEndbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
  return std::memcmp(code, kEndbr64, sizeof kEndbr64) == 0 ? sizeof kEndbr64 : 0;
}

constexpr unsigned char kPushRbp = 0x55;
constexpr unsigned char kMovRspRbp[] = {0x48, 0x89, 0xe5};

// The offset of `mov %rsp,%rbp` in the prologue, or 0 if it is not among the first bytes.
size_t mov_rsp_rbp_offset(const unsigned char* code) {
  constexpr size_t kPrologueBytes = 16;
  for (size_t at = 1; at + sizeof kMovRspRbp <= kPrologueBytes; ++at)
    if (std::memcmp(code + at, kMovRspRbp, sizeof kMovRspRbp) == 0) return at;
  return 0;
}

constexpr const char* kHotFunction = "profile_test::hot_function(int)";
constexpr const char* kLibraryFunction = "profile_library::library_function(int)";

TEST(Symbolizer, TheProcessModulesAreReadWithNoWarning) {
  std::vector<Module> modules = process_modules();
  const Module* executable = module_holding(modules, address_of(reinterpret_cast<void*>(&profile_test::hot_function)));
  ASSERT_NE(executable, nullptr);
  EXPECT_NE(executable->base, 0u) << "the test must be a PIE for the load bias to be tested";
  EXPECT_FALSE(executable->build_id.empty());
  Symbolizer symbolizer(modules);
  EXPECT_EQ(symbolizer.warnings(), std::vector<std::string>{});
}

TEST(Symbolizer, NamesAFunctionOfTheExecutable) {
  Symbolizer symbolizer(process_modules());
  const uint64_t address = address_of(reinterpret_cast<void*>(&profile_test::hot_function));
  const Symbol& symbol = symbolizer.resolve(address, false);
  EXPECT_EQ(symbol.function, kHotFunction);
  EXPECT_EQ(symbol.module, "symbolizer_tests");
  EXPECT_EQ(symbolizer.name(address, false), kHotFunction);
  EXPECT_EQ(symbolizer.name(address + 2, false), kHotFunction);
  EXPECT_EQ(symbolizer.name(address + 2, true), kHotFunction);
}

TEST(Symbolizer, NamesAFunctionOfASharedLibrary) {
  std::vector<Module> modules = process_modules();
  const uint64_t address = address_of(reinterpret_cast<void*>(&profile_library::library_function));
  const Module* library = module_holding(modules, address);
  ASSERT_NE(library, nullptr);
  Symbolizer symbolizer(modules);
  const Symbol& symbol = symbolizer.resolve(address, false);
  EXPECT_EQ(symbol.function, kLibraryFunction);
  EXPECT_EQ(symbol.module, "libprofile_library.so");
  EXPECT_EQ(symbol.offset, address - library->base);
  ASSERT_GT(exported_size(reinterpret_cast<void*>(&profile_library::library_function)), 6u);
  EXPECT_EQ(symbolizer.resolve(address + 6, false).function, kLibraryFunction);
}

TEST(Symbolizer, AReturnAddressPastAFunctionsEndIsItsCaller) {
  const uint64_t address = address_of(reinterpret_cast<void*>(&profile_library::library_function));
  const uint64_t size = exported_size(reinterpret_cast<void*>(&profile_library::library_function));
  ASSERT_GT(size, 0u);
  Symbolizer symbolizer(process_modules());
  // A call as the function's last instruction returns to the byte after it.
  EXPECT_EQ(symbolizer.resolve(address + size, true).function, kLibraryFunction);
  EXPECT_NE(symbolizer.resolve(address + size, false).function, kLibraryFunction);
  // Each kind is cached apart.
  EXPECT_EQ(symbolizer.resolve(address + size, true).function, kLibraryFunction);
}

TEST(Symbolizer, RepeatedLookupsComeFromTheCache) {
  Symbolizer symbolizer(process_modules());
  const uint64_t address = address_of(reinterpret_cast<void*>(&profile_test::hot_function));
  EXPECT_EQ(&symbolizer.resolve(address, false), &symbolizer.resolve(address, false));
}

TEST(Symbolizer, AnAddressInNoModuleIsUnknown) {
  Symbolizer symbolizer(process_modules());
  const Symbol& symbol = symbolizer.resolve(0x10, false);
  EXPECT_EQ(symbol.function, "");
  EXPECT_EQ(symbol.module, "");
  EXPECT_EQ(symbolizer.name(0x10, false), "[unknown 0x10]");
  EXPECT_EQ(symbolizer.name(0x10, true), "[unknown 0x10]");
}

TEST(Symbolizer, AModuleOfAnotherBuildIsNotTrusted) {
  std::vector<Module> modules = process_modules();
  const uint64_t address = address_of(reinterpret_cast<void*>(&profile_library::library_function));
  Module* library = module_holding(modules, address);
  ASSERT_NE(library, nullptr);
  library->build_id = std::string(40, '0');
  const std::string library_path = library->path;
  const uint64_t library_base = library->base;
  Symbolizer symbolizer(std::move(modules));
  const std::vector<std::string> warnings = symbolizer.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(library_path), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("build id"), std::string::npos) << warnings[0];
  const Symbol& symbol = symbolizer.resolve(address, false);
  EXPECT_EQ(symbol.function, "");
  EXPECT_EQ(symbol.module, "libprofile_library.so");
  char expected[64];
  std::snprintf(expected, sizeof expected, "[libprofile_library.so+0x%llx]",
                static_cast<unsigned long long>(address - library_base));
  EXPECT_EQ(symbolizer.name(address, false), expected);
  // The other modules are still read.
  EXPECT_EQ(symbolizer.name(address_of(reinterpret_cast<void*>(&profile_test::hot_function)), false), kHotFunction);
}

TEST(Symbolizer, AMissingFileWarnsAndLeavesItsAddressesUnresolved) {
  Module gone;
  gone.base = 0x10000;
  gone.start = 0x11000;
  gone.end = 0x12000;
  gone.path = "/nonexistent/chronicle/libgone.so";
  gone.build_id = "abcdef";
  Symbolizer symbolizer({gone});
  const std::vector<std::string> warnings = symbolizer.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(gone.path), std::string::npos) << warnings[0];
  const Symbol& symbol = symbolizer.resolve(0x11234, false);
  EXPECT_EQ(symbol.function, "");
  EXPECT_EQ(symbol.module, "libgone.so");
  EXPECT_EQ(symbol.offset, 0x1234u);
  EXPECT_EQ(symbolizer.name(0x11234, false), "[libgone.so+0x1234]");
  EXPECT_EQ(symbolizer.name(0x12000, false), "[unknown 0x12000]");
}

TEST(Symbolizer, AFramelessLeafHasItsReturnAddressAtTheStackPointer) {
  const void* leaf = reinterpret_cast<void*>(&profile_test::frameless_leaf);
  const unsigned char* code = code_of(leaf);
  const size_t start = past_endbr64(code);
  if (code[start] == kPushRbp) GTEST_SKIP() << "the compiler gave frameless_leaf a frame pointer";
  Symbolizer symbolizer(process_modules());
  const uint64_t address = address_of(leaf);
  EXPECT_EQ(symbolizer.return_address_offset(address), std::optional<uint64_t>(0));
  const uint64_t inside = address + start + 2;
  ASSERT_EQ(symbolizer.resolve(inside, false).function, "profile_test::frameless_leaf(unsigned int)");
  EXPECT_EQ(symbolizer.return_address_offset(inside), std::optional<uint64_t>(0));
}

TEST(Symbolizer, AFunctionWithAFramePointerHasItsReturnAddressAtTheStackPointerOnlyInItsPrologue) {
  const void* caller = reinterpret_cast<void*>(&profile_test::framed_caller);
  const unsigned char* code = code_of(caller);
  const size_t start = past_endbr64(code);
  const size_t mov = mov_rsp_rbp_offset(code);
  ASSERT_EQ(code[start], kPushRbp) << "framed_caller does not begin with push %rbp";
  ASSERT_EQ(mov, start + 1) << "framed_caller does not set up %rbp right after pushing it";
  Symbolizer symbolizer(process_modules());
  const uint64_t address = address_of(caller);
  // The call's return address alone on the stack, then under the pushed %rbp.
  EXPECT_EQ(symbolizer.return_address_offset(address), std::optional<uint64_t>(0));
  EXPECT_EQ(symbolizer.return_address_offset(address + mov), std::optional<uint64_t>(8));
  // From there on the frame is %rbp's: the frame-pointer chain finds the caller.
  const uint64_t framed = address + mov + sizeof kMovRspRbp;
  ASSERT_EQ(symbolizer.resolve(framed, false).function, "profile_test::framed_caller(unsigned int)");
  EXPECT_EQ(symbolizer.return_address_offset(framed), std::nullopt);
  // Cached: the same answer again.
  EXPECT_EQ(symbolizer.return_address_offset(framed), std::nullopt);
  EXPECT_EQ(symbolizer.return_address_offset(address), std::optional<uint64_t>(0));
}

TEST(Symbolizer, NoReturnAddressOffsetOutsideTrustedModules) {
  std::vector<Module> modules = process_modules();
  const uint64_t address = address_of(reinterpret_cast<void*>(&profile_library::library_function));
  Module* library = module_holding(modules, address);
  ASSERT_NE(library, nullptr);
  {
    Symbolizer symbolizer(modules);
    EXPECT_EQ(symbolizer.return_address_offset(0x10), std::nullopt);
    EXPECT_EQ(symbolizer.return_address_offset(address), std::optional<uint64_t>(0));
  }
  library->build_id = std::string(40, '0');
  Symbolizer symbolizer(std::move(modules));
  EXPECT_EQ(symbolizer.return_address_offset(address), std::nullopt);
}

}  // namespace
}  // namespace chronicle::symbols
