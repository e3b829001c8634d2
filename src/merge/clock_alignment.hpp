// Clock alignment across hosts from send/receive pairs: for each pair of hosts, the lines
// (offset and drift) that put every receive after its send, found with convex hulls as Duda et
// al. and Jezequel et al. describe (and Trace Compass does); then a spanning tree from a
// reference host along which the lines compose.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace chronicle::merge {

// Maps a time on one clock to another: target = source + offset_ns + drift * (source - pivot_ns).
// The pivot keeps the arithmetic near the data (Unix nanoseconds do not fit a double's mantissa).
struct ClockLine {
  int64_t pivot_ns = 0;
  double offset_ns = 0;
  double drift = 0;  // 1e-9 is one part per billion
  int64_t apply(int64_t source_ns) const;
};

// The line that applies `inner` and then `outer`.
ClockLine compose(const ClockLine& outer, const ClockLine& inner);

// A stretch of time on one clock: where a host's events are.
struct TimeSpan {
  int64_t first_ns = 0;
  int64_t last_ns = 0;
};

struct TimePoint {
  int64_t x_ns = 0;
  int64_t y_ns = 0;
};

inline constexpr double kUnknownBound = std::numeric_limits<double>::infinity();

// A line y = f(x) fitted between two sets of points: f passes above every point of `below`
// and under every point of `above`.
struct LineFit {
  enum class Kind {
    none,                // no points at all
    fitted,              // offset and drift, with a bound
    drift_undetermined,  // the points do not determine a drift (a constant offset respects them
                         // all: offset only), or span too short a time to bound it
    one_sided,           // points on one side only: a limit, no estimate (the line is the identity
                         // moved just enough to respect the limit)
    infeasible,          // no line respects every point (a clock jumped, or pairs are mismatched)
  };
  Kind kind = Kind::none;
  ClockLine line;
  // The largest distance, over the points' time span and the span asked for (where the events
  // the line moves are), between `line` and any line of drift within kMaxDrift that respects
  // every point: the true clock relation (a line that does) is within it. kUnknownBound unless
  // fitted or drift_undetermined.
  double bound_ns = kUnknownBound;
  bool drift_needed = false;  // no constant offset respects every point
};

// The largest drift a clock may have (1000 ppm); fits assume no more.
inline constexpr double kMaxDrift = 1e-3;

// The drift is fitted only when the points determine it: when no constant offset respects them
// all. Else the offset only (a drift fitted to delays, not to the clocks, would be extrapolated
// over the whole trace), its bound still allowing every drift the points leave possible.
LineFit fit_between(const std::vector<TimePoint>& below, const std::vector<TimePoint>& above,
                    const std::optional<TimeSpan>& over = std::nullopt);

// A message between hosts (indices into the host list), each time on its host's clock.
struct HostMessage {
  size_t sender = 0;
  int64_t send_ns = 0;
  size_t receiver = 0;
  int64_t receive_ns = 0;
};

// How one host's clock is put on the reference host's.
struct HostAlignment {
  enum class Source { reference, message_pairs, one_sided_limit, wall_clock };
  Source source = Source::wall_clock;
  ClockLine to_reference;           // identity unless message pairs moved it
  double bound_ns = kUnknownBound;  // bounds add up along the path to the reference
  size_t parent = 0;                // the host it was aligned to (itself for the reference)
  uint64_t pairs = 0;               // pairs between it and its parent
  std::string reason;               // why, in words: what supported it or why it fell back
};

// Aligns hosts 0..host_count-1 on host 0, over a tree of host pairs grown from it. Each host
// joins by the best path to host 0: through lines with a bound (fitted or offset-only) if it
// can, else one-sided limits; among those, the smallest total bound (bounds add up along the path),
// then the most pairs on its last link. A host with no usable path keeps its wall clock.
// A host's bound holds over its span in `spans` (by host, on its own clock; none: where its
// messages are) as well as where its messages are.
std::vector<HostAlignment> align_hosts(size_t host_count, const std::vector<HostMessage>& messages,
                                       const std::vector<std::optional<TimeSpan>>& spans = {});

}  // namespace chronicle::merge
