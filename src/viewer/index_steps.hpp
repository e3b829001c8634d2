// How long each step of building an index took, told on stderr when CHRONICLE_VIEW_STEPS=1 asks:
// where a first open's time goes, to measure it in the program a user runs (docs/viewer.md).
#pragma once

#include <chrono>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

namespace chronicle::viewer::index_internal {

class IndexSteps {
 public:
  IndexSteps() {
    const char* setting = std::getenv("CHRONICLE_VIEW_STEPS");
    on_ = setting && std::string_view(setting) == "1";
    last_ = std::chrono::steady_clock::now();
  }

  // The step that ends now, since the last one ended (or this clock began).
  void done(std::string_view step) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    fmt::print(stderr, "chronicle: index step {:<24} {:8.3f} s\n", step,
               std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }

 private:
  bool on_ = false;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace chronicle::viewer::index_internal
