// LTTng-UST tracepoint provider for the side-by-side benchmark (bench_lttng.cpp): one event
// with one 32-bit integer field, the same payload as a chronicle span begin (its site id).
#undef TRACEPOINT_PROVIDER
#define TRACEPOINT_PROVIDER chronicle_bench

#undef TRACEPOINT_INCLUDE
#define TRACEPOINT_INCLUDE "lttng_tp.h"

#if !defined(CHRONICLE_BENCH_LTTNG_TP_H) || defined(TRACEPOINT_HEADER_MULTI_READ)
#define CHRONICLE_BENCH_LTTNG_TP_H

#include <lttng/tracepoint.h>

#include <stdint.h>

TRACEPOINT_EVENT(
    chronicle_bench,
    span,
    TP_ARGS(uint32_t, site),
    TP_FIELDS(ctf_integer(uint32_t, site, site)))

#endif

#include <lttng/tracepoint-event.h>
