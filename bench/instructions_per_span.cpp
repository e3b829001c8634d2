// Instructions per trace point, counted by valgrind's callgrind: a figure that does not move with
// the machine's load (the time of one span here moves by 20% from run to run). Each kind of span
// is its own function, called kCalls times in flight mode; callgrind's inclusive count of each
// function divided by kCalls is its cost (the first call's interning is in it, spread over all).
//
//   valgrind --tool=callgrind --callgrind-out-file=cg.out build-bench/bench/instructions_per_span
//   callgrind_annotate --inclusive=yes cg.out | grep -E 'instructions_per_span.cpp:[a-z_]+_(span|point|points) '
//
// Divide each count by kCalls (20,000). bench/site_size.sh does both and adds each function's
// bytes of text (nm -S, with its .cold part): what one site of each kind costs a program.
#include <chronicle/chronicle.hpp>
#include <cstdio>
#include <filesystem>
#include <string>

constexpr int kCalls = 20'000;

extern "C" {
[[gnu::noinline]] void plain_span() {
  CHRONICLE_SPAN("bench", "span");
}
[[gnu::noinline]] void two_int_span(int64_t user) {
  CHRONICLE_SPAN_ARGS("bench", "span", "user.id", user, "shard", user & 15);
}
[[gnu::noinline]] void string_span(const std::string& route) {
  CHRONICLE_SPAN_ARGS("bench", "span", "http.route", route);
}
[[gnu::noinline]] void dynamic_span(const std::string& name) {
  CHRONICLE_SPAN_DYNAMIC("bench", name);
}
[[gnu::noinline]] void instant_point() {
  CHRONICLE_INSTANT("bench", "instant");
}
[[gnu::noinline]] void counter_point(int64_t value) {
  CHRONICLE_COUNTER("bench", "counter", value);
}
[[gnu::noinline]] void note_point(int value) {
  CHRONICLE_NOTE("bench", "value {}", value);
}
// What issue 44 measured as a lambda's worth of trace points: a span, a counter, a note, an instant.
[[gnu::noinline]] void four_points(int64_t value) {
  CHRONICLE_SPAN("bench", "four");
  CHRONICLE_COUNTER("bench", "four counter", value);
  CHRONICLE_NOTE("bench", "four {}", value);
  CHRONICLE_INSTANT("bench", "four instant");
}
}

int main() {
  chronicle::Config config;
  config.mode = chronicle::Mode::flight;
  config.output = (std::filesystem::temp_directory_path() / "chronicle-instructions-per-span").string();
  if (!chronicle::start(config)) {
    std::fprintf(stderr, "chronicle::start: %s\n", chronicle::last_error().c_str());
    return 1;
  }
  const std::string route = "/api/v2/customers/{id}/quotes/x";  // 32 bytes
  const std::string name = "customer acme-corporation";         // cached after its first use
  for (int call = 0; call < kCalls; ++call) {
    plain_span();
    two_int_span(call);
    string_span(route);
    dynamic_span(name);
    instant_point();
    counter_point(call);
    note_point(call);
    four_points(call);
  }
  chronicle::stop();
  std::filesystem::remove_all(config.output);
  std::printf("%d calls of each span\n", kCalls);
}
