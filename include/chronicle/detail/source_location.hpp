// chronicle::source_location: std::source_location where the standard library has it. libstdc++
// provides it only when the compiler has __builtin_source_location (GCC 11+, clang 15+); with
// clang 14 the same facts come from __builtin_FILE, __builtin_FUNCTION and __builtin_LINE,
// which, as default arguments, name the caller just as std::source_location::current() does.
#pragma once

#include <cstdint>
#include <version>

#if defined(__cpp_lib_source_location)
#include <source_location>
#endif

namespace chronicle {

#if defined(__cpp_lib_source_location)

using source_location = std::source_location;

#else

class source_location {
 public:
  static constexpr source_location current(const char* file = __builtin_FILE(),
                                           const char* function = __builtin_FUNCTION(),
                                           std::uint_least32_t line = __builtin_LINE()) noexcept {
    source_location where;
    where.file_ = file;
    where.function_ = function;
    where.line_ = line;
    return where;
  }
  constexpr source_location() noexcept = default;
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }
  constexpr std::uint_least32_t line() const noexcept { return line_; }
  constexpr std::uint_least32_t column() const noexcept { return 0; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  std::uint_least32_t line_ = 0;
};

#endif

}  // namespace chronicle
