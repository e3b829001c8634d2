// Instructions per trace point, counted by valgrind's callgrind: a figure that does not move with
// the machine's load (the time of one span here moves by 20% from run to run). Each kind of span
// is its own function, called kCalls times in flight mode; callgrind's inclusive count of each
// function divided by kCalls is its cost (the first call's interning is in it, spread over all).
//
//   valgrind --tool=callgrind --callgrind-out-file=cg.out build-bench/bench/instructions_per_span
//   callgrind_annotate --inclusive=yes cg.out | grep -E 'instructions_per_span.cpp:[a-z_]+_span '
//
// Divide each count by kCalls (20,000).
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
  }
  chronicle::stop();
  std::filesystem::remove_all(config.output);
  std::printf("%d calls of each span\n", kCalls);
}
