// The probes of lttng_tp.h, built into bench_lttng itself (statically linked provider).
#define TRACEPOINT_CREATE_PROBES
#define TRACEPOINT_DEFINE
#include "lttng_tp.h"
