// The per-event cost the monitor's overhead estimate multiplies by (layout.hpp, event_cost_ps).
#pragma once

#include <cstdint>

namespace chronicle::recorder {

// Picoseconds one event takes the calling thread, measured now with the trace points' own inline
// code on a private packet (no session needed, none touched): the clock read, the header, the
// payload, the commit and the category's counts. The median of a few rounds of some thousand
// events; about 50 microseconds in all. It leaves out what the program's own state adds (cold
// caches, a packet switch every few thousand events), so it is a floor: docs/control.md.
uint64_t measure_event_cost_ps();

}  // namespace chronicle::recorder
