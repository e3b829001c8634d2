// bench/side_by_side.sh's loop with Tracy: one zone per span, built by the script against a Tracy
// checkout (TRACY_ENABLE), with tracy-capture connected. Not part of the build.
#include <tracy/Tracy.hpp>

#include "loop.hpp"

int main(int argc, char** argv) {
  const side_by_side::Arguments arguments = side_by_side::arguments(argc, argv, "spans_tracy");
  const double seconds = side_by_side::timed_loop(arguments.spans, [] {
    ZoneScopedN("span");
    side_by_side::empty_statement();
  });
  side_by_side::report("tracy", arguments.spans, seconds);
  return 0;
}
