#include <chronicle/chronicle.hpp>
#include <chronicle/metrics_exporter.hpp>

int main() {
  // Port 0: any free port; the exporter only has to link and serve, not be scraped.
  chronicle::MetricsExporter exporter(0);
  for (int i = 0; i < 10; ++i) {
    CHRONICLE_SPAN("consumer", "iteration");
    CHRONICLE_COUNTER("consumer", "i", i);
  }
  return exporter.port() != 0 ? 0 : 1;
}
