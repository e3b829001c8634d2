// Built with CHRONICLE_DISABLE: the trace macros compile to nothing, and the trace context, plain
// data, still parses, writes and makes ids. Exits 0 when it does.
#include <cstdio>
#include <string>

#include "chronicle/chronicle.hpp"
#include "chronicle/context.hpp"

#ifndef CHRONICLE_DISABLE
#error "this program checks the CHRONICLE_DISABLE build"
#endif

int main() {
  CHRONICLE_SPAN("test", "compiled out");
  const char* header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const auto parsed = chronicle::TraceContext::parse(header, "congo=t61rcWkgMzE");
  if (!parsed || parsed->traceparent() != header || parsed->tracestate != "congo=t61rcWkgMzE") {
    std::puts("FAIL: the example header was not read back");
    return 1;
  }
  const chronicle::TraceContext child = parsed->child();
  if (child.trace_id != parsed->trace_id || child.span_id == parsed->span_id || !child.valid()) {
    std::puts("FAIL: child() did not keep the trace with a new span id");
    return 1;
  }
  if (chronicle::TraceContext::parse(header + std::string("x"))) {
    std::puts("FAIL: a 56-character version 00 header was accepted");
    return 1;
  }
  std::printf("trace context under CHRONICLE_DISABLE: %s\n",
              chronicle::TraceContext::new_trace().traceparent().c_str());
  return 0;
}
