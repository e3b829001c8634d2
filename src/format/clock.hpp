// Trace timestamps: the invariant TSC where the CPU has one, CLOCK_MONOTONIC otherwise.
#pragma once

#include <time.h>

#include <cstdint>

#include "chronicle/detail/layout.hpp"

namespace chronicle::recorder {

bool tsc_is_usable();

// Takes the reference points and estimates the tick frequency (a few milliseconds).
format::ClockCalibration calibrate_clock(bool use_tsc);

// Clock `id` now (CLOCK_MONOTONIC, a CPU-time clock...), in nanoseconds.
uint64_t read_clock_ns(clockid_t id);
uint64_t read_realtime_ns();
uint64_t read_monotonic_ns();

// The ticks of the clock `clock` describes now, as a writer on this machine reads them.
uint64_t read_ticks_now(const format::ClockCalibration& clock);

// A better frequency from the time elapsed since the calibration, when enough has passed and
// the result is plausible; otherwise the calibration's own estimate.
uint64_t refined_frequency(const format::ClockCalibration& clock);

}  // namespace chronicle::recorder
