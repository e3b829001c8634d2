// A trace whose strings are not UTF-8: a thread name, a note's text and a span name with bytes
// that no UTF-8 text has (a name cut inside a character, Latin-1). Traced through the environment
// (CHRONICLE_OUTPUT, or chronicle record).
#include <chronicle/chronicle.hpp>
#include <string_view>

int main() {
  chronicle::set_thread_name("worker-\xff\xfe");
  CHRONICLE_SPAN("test", "caf\xe9 span");
  CHRONICLE_NOTE("test", "note {}", std::string_view("caf\xc3"));
  CHRONICLE_COUNTER("test", "queue\xc0\xaf", 1);
  return 0;
}
