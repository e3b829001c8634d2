#include "symbols/symbolizer.hpp"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fmt/format.h>

#include <elf.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chronicle/detail/layout.hpp>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace chronicle::symbols {
namespace {

// Offline: every module is reported with its own file, so no search of the running system for
// ELF files; separate debug files (.gnu_debuglink, /usr/lib/debug) are still found.
const Dwfl_Callbacks kOfflineCallbacks = {
    .find_elf = nullptr,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

std::string basename_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string build_id_of(Dwfl_Module* module) {
  const unsigned char* bits = nullptr;
  GElf_Addr vaddr = 0;
  const int length = dwfl_module_build_id(module, &bits, &vaddr);
  std::string hex;
  for (int k = 0; k < length; ++k) hex += fmt::format("{:02x}", bits[k]);
  return hex;
}

bool is_vdso(const Module& module) {
  return module.path == format::kVdsoModulePath;
}

// The reading process's own vDSO as a file (a memfd) for elfutils, or -1: its image runs from its
// ELF header to the end of its section headers or of its last segment, whichever is later.
int own_vdso_file() {
  const auto* image = reinterpret_cast<const uint8_t*>(getauxval(AT_SYSINFO_EHDR));
  if (!image || std::memcmp(image, ELFMAG, SELFMAG) != 0 || image[EI_CLASS] != ELFCLASS64) return -1;
  Elf64_Ehdr header;
  std::memcpy(&header, image, sizeof header);
  uint64_t size = header.e_shoff + uint64_t{header.e_shnum} * header.e_shentsize;
  for (uint16_t k = 0; k < header.e_phnum; ++k) {
    Elf64_Phdr segment;
    std::memcpy(&segment, image + header.e_phoff + uint64_t{k} * header.e_phentsize, sizeof segment);
    size = std::max<uint64_t>(size, segment.p_offset + segment.p_filesz);
  }
  const int fd = memfd_create("vdso", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (::write(fd, image, size) != static_cast<ssize_t>(size)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string demangled(const char* name) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> readable(abi::__cxa_demangle(name, nullptr, nullptr, &status),
                                                       &std::free);
  // Not a mangled C++ name (C functions, main): as it is.
  return status == 0 && readable ? std::string(readable.get()) : std::string(name);
}

#if defined(__x86_64__)

// %rsp in the x86-64 psABI's DWARF register numbering.
constexpr Dwarf_Word kStackPointerRegister = 7;
// The call instruction pushes the return address just below the caller's stack pointer, which
// is what the CFA is on x86-64.
constexpr int64_t kReturnAddressBelowCfa = 8;

using FramePtr = std::unique_ptr<Dwarf_Frame, decltype(&std::free)>;

FramePtr frame_in(Dwarf_CFI* cfi, Dwarf_Addr bias, uint64_t address) {
  Dwarf_Frame* frame = nullptr;
  if (!cfi || dwarf_cfi_addrframe(cfi, address - bias, &frame) != 0) frame = nullptr;
  return FramePtr(frame, &std::free);
}

// The frame row at `address`: .eh_frame first, as it is what loaded code always has (the unwinder
// needs it for exceptions); .debug_frame for code built without unwind tables.
FramePtr frame_at(Dwfl_Module* module, uint64_t address) {
  // Each call sets the bias, so it is made before the bias is read.
  Dwarf_Addr bias = 0;
  Dwarf_CFI* eh_cfi = dwfl_module_eh_cfi(module, &bias);
  FramePtr frame = frame_in(eh_cfi, bias, address);
  if (frame) return frame;
  Dwarf_CFI* debug_cfi = dwfl_module_dwarf_cfi(module, &bias);
  return frame_in(debug_cfi, bias, address);
}

// N when the CFA is "%rsp + N" at this row; nullopt for any other rule (%rbp + N once the frame
// pointer is set up, or an expression such as the PLT's).
std::optional<int64_t> cfa_offset_from_stack_pointer(Dwarf_Frame* frame) {
  Dwarf_Op* ops = nullptr;
  size_t count = 0;
  if (dwarf_frame_cfa(frame, &ops, &count) != 0 || count != 1) return std::nullopt;
  const Dwarf_Op& op = ops[0];
  // libdw hands a DW_CFA_def_cfa rule over as one DW_OP_bregx (number: register, number2: the
  // offset); a DW_CFA_def_cfa_expression of just DW_OP_breg7 N means the same.
  if (op.atom == DW_OP_bregx && op.number == kStackPointerRegister) return static_cast<int64_t>(op.number2);
  if (op.atom == DW_OP_breg7) return static_cast<int64_t>(op.number);
  return std::nullopt;
}

#endif

}  // namespace

Symbolizer::Symbolizer(std::vector<Module> modules) : session_(dwfl_begin(&kOfflineCallbacks)) {
  std::sort(modules.begin(), modules.end(), [](const Module& a, const Module& b) { return a.start < b.start; });
  modules_.reserve(modules.size());
  for (Module& module : modules) {
    LoadedModule& loaded = modules_.emplace_back();
    loaded.basename = basename_of(module.path);
    loaded.recorded = std::move(module);
  }
  if (!session_) {
    warnings_.push_back(fmt::format("cannot start elfutils: {}; every address stays unresolved", dwfl_errmsg(-1)));
    return;
  }
  dwfl_report_begin(session_);
  for (LoadedModule& module : modules_) report(module);
  dwfl_report_end(session_, nullptr, nullptr);
}

Symbolizer::~Symbolizer() {
  if (session_) dwfl_end(session_);
}

void Symbolizer::report(LoadedModule& module) {
  const Module& recorded = module.recorded;
  // The base is the load bias, to which the file's own addresses (p_vaddr) are added. The vDSO
  // is read from this process's own (elfutils takes the descriptor); the build ids below tell
  // whether it is the recording kernel's.
  const int fd = is_vdso(recorded) ? own_vdso_file() : -1;
  if (is_vdso(recorded) && fd < 0) {
    warnings_.push_back("[vdso]: this process has no vDSO to read; its addresses stay unresolved");
    return;
  }
  Dwfl_Module* elf = dwfl_report_elf(session_, recorded.path.c_str(), recorded.path.c_str(), fd, recorded.base, true);
  if (!elf) {
    if (fd >= 0) ::close(fd);
    warnings_.push_back(
        fmt::format("{}: cannot read ({}); its addresses stay unresolved", recorded.path, dwfl_errmsg(-1)));
    return;
  }
  // The file on disk may have been rebuilt since the process loaded it: its symbols would then
  // name the wrong functions, worse than none.
  const std::string file_id = build_id_of(elf);
  if (file_id != recorded.build_id) {
    warnings_.push_back(fmt::format("{}: build id {} differs from the recorded {}{}; its addresses stay unresolved",
                                    recorded.path, file_id.empty() ? "(none)" : file_id,
                                    recorded.build_id.empty() ? "(none)" : recorded.build_id,
                                    is_vdso(recorded) ? " (recorded under another kernel)" : ""));
    return;
  }
  module.elf = elf;
}

const Symbolizer::LoadedModule* Symbolizer::module_at(uint64_t address) const {
  auto after =
      std::upper_bound(modules_.begin(), modules_.end(), address,
                       [](uint64_t value, const LoadedModule& module) { return value < module.recorded.start; });
  if (after == modules_.begin()) return nullptr;
  const LoadedModule& module = *std::prev(after);
  return address < module.recorded.end ? &module : nullptr;
}

Symbol Symbolizer::lookup(uint64_t address, bool is_return_address) const {
  // A return address follows its call, which may be a function's last instruction (a call to a
  // noreturn function): the call itself is what belongs to the caller.
  const uint64_t instruction = is_return_address && address > 0 ? address - 1 : address;
  Symbol symbol;
  const LoadedModule* module = module_at(instruction);
  if (!module) return symbol;
  symbol.module = module->basename;
  symbol.offset = address - module->recorded.base;
  if (!module->elf) return symbol;
  GElf_Off offset_in_symbol = 0;
  GElf_Sym elf_symbol;
  const char* name =
      dwfl_module_addrinfo(module->elf, instruction, &offset_in_symbol, &elf_symbol, nullptr, nullptr, nullptr);
  // "[vdso] __vdso_clock_gettime": the kernel's code, said as such.
  if (name && *name) symbol.function = (is_vdso(module->recorded) ? "[vdso] " : "") + demangled(name);
  return symbol;
}

const Symbol& Symbolizer::resolve(uint64_t address, bool is_return_address) {
  auto& cache = is_return_address ? return_cache_ : leaf_cache_;
  auto found = cache.find(address);
  if (found == cache.end()) found = cache.emplace(address, lookup(address, is_return_address)).first;
  return found->second;
}

std::optional<uint64_t> Symbolizer::lookup_return_address_offset(uint64_t address) const {
#if defined(__x86_64__)
  const LoadedModule* module = module_at(address);
  // An untrusted file's frame tables describe other code than what ran.
  if (!module || !module->elf) return std::nullopt;
  const FramePtr frame = frame_at(module->elf, address);
  if (!frame) return std::nullopt;
  const std::optional<int64_t> cfa = cfa_offset_from_stack_pointer(frame.get());
  // Under 8 the return address would lie below the stack pointer: tables not to be believed.
  if (!cfa || *cfa < kReturnAddressBelowCfa) return std::nullopt;
  return static_cast<uint64_t>(*cfa - kReturnAddressBelowCfa);
#else
  // Only x86-64's frame layout (return address pushed by the call) is known here.
  (void)address;
  return std::nullopt;
#endif
}

std::optional<uint64_t> Symbolizer::return_address_offset(uint64_t address) {
  auto found = return_offset_cache_.find(address);
  if (found == return_offset_cache_.end())
    found = return_offset_cache_.emplace(address, lookup_return_address_offset(address)).first;
  return found->second;
}

std::string Symbolizer::name(uint64_t address, bool is_return_address) {
  const Symbol& symbol = resolve(address, is_return_address);
  if (!symbol.function.empty()) return symbol.function;
  if (symbol.module == format::kVdsoModulePath) return fmt::format("[vdso+0x{:x}]", symbol.offset);
  if (!symbol.module.empty()) return fmt::format("[{}+0x{:x}]", symbol.module, symbol.offset);
  return fmt::format("[unknown 0x{:x}]", address);
}

}  // namespace chronicle::symbols
