#include "recorder/modules.hpp"

#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <climits>
#include <cstddef>
#include <cstring>
#include <string_view>

#include <chronicle/detail/layout.hpp>

namespace chronicle::recorder {
namespace {

std::string hex(const uint8_t* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < size; ++i) {
    text.push_back(kDigits[bytes[i] >> 4]);
    text.push_back(kDigits[bytes[i] & 15]);
  }
  return text;
}

// The GNU build id among the notes of one PT_NOTE segment, already in memory.
std::string build_id_in_notes(const uint8_t* notes, size_t size) {
  size_t at = 0;
  while (at + sizeof(ElfW(Nhdr)) <= size) {
    ElfW(Nhdr) note;
    std::memcpy(&note, notes + at, sizeof note);
    const size_t name_at = at + sizeof note;
    const size_t desc_at = name_at + ((note.n_namesz + 3) & ~size_t{3});
    const size_t next = desc_at + ((note.n_descsz + 3) & ~size_t{3});
    if (next > size) break;
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(notes + name_at, "GNU", 4) == 0)
      return hex(notes + desc_at, note.n_descsz);
    at = next;
  }
  return {};
}

std::string main_program_path() {
  char path[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof path - 1);
  return length > 0 ? std::string(path, static_cast<size_t>(length)) : std::string();
}

int add_module(dl_phdr_info* info, size_t, void* out) {
  auto& modules = *static_cast<std::vector<LoadedModule>*>(out);
  const std::string_view name = info->dlpi_name ? info->dlpi_name : "";
  // The kernel's vDSO (clock_gettime and its kin) is in no file: it is recorded by the name the
  // memory map gives it, and the symbolizer reads the image of the reading process's own kernel.
  const bool vdso = name.starts_with("linux-vdso") || name.starts_with("linux-gate");
  LoadedModule module;
  module.base = info->dlpi_addr;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type == PT_LOAD && (segment.p_flags & PF_X) && module.end == 0) {
      module.start = info->dlpi_addr + segment.p_vaddr;
      module.end = module.start + segment.p_memsz;
    } else if (segment.p_type == PT_NOTE && module.build_id.empty()) {
      module.build_id =
          build_id_in_notes(reinterpret_cast<const uint8_t*>(info->dlpi_addr + segment.p_vaddr), segment.p_memsz);
    }
  }
  if (module.end == 0) return 0;  // no code
  module.path = vdso ? std::string(format::kVdsoModulePath) : name.empty() ? main_program_path() : std::string(name);
  modules.push_back(std::move(module));
  return 0;
}

int count_loads(dl_phdr_info* info, size_t size, void* out) {
  if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
    *static_cast<uint64_t*>(out) = info->dlpi_adds;
  return 1;  // the count is the same in every entry
}

}  // namespace

std::vector<LoadedModule> loaded_modules() {
  std::vector<LoadedModule> modules;
  dl_iterate_phdr(add_module, &modules);
  return modules;
}

uint64_t module_load_count() {
  uint64_t count = 0;
  dl_iterate_phdr(count_loads, &count);
  return count;
}

}  // namespace chronicle::recorder
