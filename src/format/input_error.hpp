#pragma once

#include <stdexcept>

namespace chronicle::format {

// Malformed input (a trace file, a mapping): the tools answer it with exit code 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace chronicle::format
