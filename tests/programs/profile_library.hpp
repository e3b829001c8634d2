// A function in a shared library of its own, for the symbolizer's tests to name from another
// module than the test's executable.
#pragma once

namespace profile_library {

int library_function(int rounds);

}  // namespace profile_library
