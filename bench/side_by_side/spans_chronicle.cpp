// bench/side_by_side.sh's loop with chronicle: run it with CHRONICLE_OUTPUT set (the collector is a
// thread of this process) or under `chronicle record` (the collector is the record process).
#include <chronicle/chronicle.hpp>

#include "loop.hpp"

int main(int argc, char** argv) {
  const side_by_side::Arguments arguments = side_by_side::arguments(argc, argv, "spans_chronicle");
  if (arguments.untraced) {
    side_by_side::report("untraced", arguments.spans,
                         side_by_side::timed_loop(arguments.spans, side_by_side::empty_statement));
    return 0;
  }
  if (!chronicle::active()) {
    std::fprintf(stderr, "spans_chronicle: no session (set CHRONICLE_OUTPUT or run it under `chronicle record`)\n");
    return 2;
  }
  const double seconds = side_by_side::timed_loop(arguments.spans, [] {
    CHRONICLE_SPAN("bench", "span");
    side_by_side::empty_statement();
  });
  side_by_side::report("chronicle", arguments.spans, seconds);
  return 0;
}
