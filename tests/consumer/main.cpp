#include <chronicle/chronicle.hpp>

int main() {
  for (int i = 0; i < 10; ++i) {
    CHRONICLE_SPAN("consumer", "iteration");
    CHRONICLE_COUNTER("consumer", "i", i);
  }
  return 0;
}
