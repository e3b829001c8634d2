#include "merge/clock_alignment.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

namespace chronicle::merge {
namespace {

// The fit works on u = x - pivot in seconds and v = y - x in nanoseconds, so that a line is
// v = a + D * u with a in nanoseconds and D in parts per billion: both of a size a long double
// holds with room to spare.
using Real = long double;
constexpr Real kMaxDriftPpb = kMaxDrift * 1e9;

struct Sample {
  Real u;
  Real v;
};

// (a, D): a candidate line.
struct Vertex {
  Real a;
  Real d;
};

// The lines with along_a * a + along_d * D <= limit.
struct HalfPlane {
  Real along_a;
  Real along_d;
  Real limit;
};

Real cross(const Sample& origin, const Sample& a, const Sample& b) {
  return (a.u - origin.u) * (b.v - origin.v) - (a.v - origin.v) * (b.u - origin.u);
}

// The upper (or lower) convex hull of `points`: the only ones a line above (or below) all of
// them can touch, so the only constraints that count.
std::vector<Sample> half_hull(std::vector<Sample> points, bool upper) {
  std::sort(points.begin(), points.end(), [upper](const Sample& p, const Sample& q) {
    return p.u != q.u ? p.u < q.u : (upper ? p.v > q.v : p.v < q.v);
  });
  std::vector<Sample> hull;
  for (const Sample& point : points) {
    if (!hull.empty() && hull.back().u == point.u) continue;  // the extreme one of this u came first
    while (hull.size() >= 2) {
      const Real turn = cross(hull[hull.size() - 2], hull.back(), point);
      if (upper ? turn < 0 : turn > 0) break;
      hull.pop_back();
    }
    hull.push_back(point);
  }
  return hull;
}

// Sutherland-Hodgman for one half-plane: a convex polygon stays convex.
std::vector<Vertex> clip(const std::vector<Vertex>& polygon, const HalfPlane& plane) {
  std::vector<Vertex> out;
  const size_t count = polygon.size();
  for (size_t i = 0; i < count; ++i) {
    const Vertex& p = polygon[i];
    const Vertex& q = polygon[(i + 1) % count];
    const Real side_p = plane.along_a * p.a + plane.along_d * p.d - plane.limit;
    const Real side_q = plane.along_a * q.a + plane.along_d * q.d - plane.limit;
    if (side_p <= 0) out.push_back(p);
    if ((side_p < 0 && side_q > 0) || (side_p > 0 && side_q < 0)) {
      const Real t = side_p / (side_p - side_q);
      out.push_back({p.a + t * (q.a - p.a), p.d + t * (q.d - p.d)});
    }
  }
  return out;
}

Vertex centroid(const std::vector<Vertex>& polygon) {
  Real area = 0, a = 0, d = 0;
  for (size_t i = 0; i < polygon.size(); ++i) {
    const Vertex& p = polygon[i];
    const Vertex& q = polygon[(i + 1) % polygon.size()];
    const Real step = p.a * q.d - q.a * p.d;
    area += step;
    a += (p.a + q.a) * step;
    d += (p.d + q.d) * step;
  }
  Real mean_a = 0, mean_d = 0;
  for (const Vertex& p : polygon) {
    mean_a += p.a;
    mean_d += p.d;
  }
  mean_a /= static_cast<Real>(polygon.size());
  mean_d /= static_cast<Real>(polygon.size());
  // A sliver (points nearly on one line) has no area to speak of: its vertices' mean is its centre.
  Real extent = 0;
  for (const Vertex& p : polygon) extent = std::max(extent, std::fabs(p.a - mean_a) * std::fabs(p.d - mean_d));
  if (std::fabs(area) <= extent * 1e-9L || area == 0) return {mean_a, mean_d};
  return {a / (3 * area), d / (3 * area)};
}

// How far the lines of `polygon` stray from `centre` for u in [first, last]: the deviation is
// linear in (a, D) and in u, so its largest is at a vertex and at an end of the span.
Real largest_deviation(const std::vector<Vertex>& polygon, const Vertex& centre, Real first, Real last) {
  Real bound = 0;
  for (const Vertex& p : polygon)
    for (const Real u : {first, last}) bound = std::max(bound, std::fabs((p.a - centre.a) + (p.d - centre.d) * u));
  return bound;
}

std::vector<Sample> samples(const std::vector<TimePoint>& points, int64_t pivot) {
  std::vector<Sample> out;
  out.reserve(points.size());
  for (const TimePoint& point : points)
    out.push_back({static_cast<Real>(point.x_ns - pivot) * 1e-9L, static_cast<Real>(point.y_ns - point.x_ns)});
  return out;
}

// Points on one side only: the identity line, moved just enough to respect them.
LineFit one_sided(const std::vector<Sample>& below, const std::vector<Sample>& above, LineFit fit) {
  fit.kind = LineFit::Kind::one_sided;
  Real offset = 0;
  for (const Sample& s : below) offset = std::max(offset, s.v);
  if (above.empty()) {
    fit.line.offset_ns = static_cast<double>(offset);
    return fit;
  }
  offset = 0;
  for (const Sample& s : above) offset = std::min(offset, s.v);
  fit.line.offset_ns = static_cast<double>(offset);
  return fit;
}

// The offset that a line of no drift (D = 0) respecting every point has at the middle of its
// range; nullopt when no constant offset respects them all.
std::optional<Real> constant_offset(const std::vector<Sample>& below, const std::vector<Sample>& above) {
  Real lowest = -INFINITY, highest = INFINITY;
  for (const Sample& s : below) lowest = std::max(lowest, s.v);
  for (const Sample& s : above) highest = std::min(highest, s.v);
  if (lowest > highest) return std::nullopt;
  return (lowest + highest) / 2;
}

}  // namespace

int64_t ClockLine::apply(int64_t source_ns) const {
  const double moved = offset_ns + drift * static_cast<double>(source_ns - pivot_ns);
  return source_ns + static_cast<int64_t>(std::llround(moved));
}

ClockLine compose(const ClockLine& outer, const ClockLine& inner) {
  // inner takes the pivot p to p + inner.offset; outer then adds its offset and drift there.
  ClockLine line;
  line.pivot_ns = inner.pivot_ns;
  const double inner_at_pivot = static_cast<double>(inner.pivot_ns - outer.pivot_ns) + inner.offset_ns;
  line.offset_ns = inner.offset_ns + outer.offset_ns + outer.drift * inner_at_pivot;
  line.drift = inner.drift + outer.drift + inner.drift * outer.drift;
  return line;
}

LineFit fit_between(const std::vector<TimePoint>& below, const std::vector<TimePoint>& above,
                    const std::optional<TimeSpan>& over) {
  LineFit fit;
  if (below.empty() && above.empty()) return fit;
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  for (const auto* points : {&below, &above})
    for (const TimePoint& point : *points) {
      first = std::min(first, point.x_ns);
      last = std::max(last, point.x_ns);
    }
  fit.line.pivot_ns = first + (last - first) / 2;
  const std::vector<Sample> low = half_hull(samples(below, fit.line.pivot_ns), true);
  const std::vector<Sample> high = half_hull(samples(above, fit.line.pivot_ns), false);
  if (low.empty() || high.empty()) return one_sided(low, high, fit);

  // The feasible lines, as a polygon in (a, D), cut from a box no clock leaves: drift within
  // kMaxDrift, and then an offset no larger than the points allow.
  Real reach = 1;
  for (const auto* hull : {&low, &high})
    for (const Sample& s : *hull) reach = std::max(reach, std::fabs(s.v) + kMaxDriftPpb * std::fabs(s.u) + 1);
  std::vector<Vertex> polygon = {
      {-reach, -kMaxDriftPpb}, {reach, -kMaxDriftPpb}, {reach, kMaxDriftPpb}, {-reach, kMaxDriftPpb}};
  for (const Sample& s : low) polygon = clip(polygon, {-1, -s.u, -s.v});  // a + D u >= v
  for (const Sample& s : high) polygon = clip(polygon, {1, s.u, s.v});    // a + D u <= v
  if (polygon.empty()) {
    fit.kind = LineFit::Kind::infeasible;
    return fit;
  }
  const bool drift_unbounded = std::any_of(
      polygon.begin(), polygon.end(), [](const Vertex& p) { return std::fabs(p.d) >= kMaxDriftPpb * (1 - 1e-9L); });
  // The line is asked for where the points are and where the events it moves are.
  Real from = static_cast<Real>(first - fit.line.pivot_ns) * 1e-9L;
  Real to = static_cast<Real>(last - fit.line.pivot_ns) * 1e-9L;
  if (over) {
    from = std::min(from, static_cast<Real>(over->first_ns - fit.line.pivot_ns) * 1e-9L);
    to = std::max(to, static_cast<Real>(over->last_ns - fit.line.pivot_ns) * 1e-9L);
  }
  const std::optional<Real> constant = constant_offset(low, high);
  fit.drift_needed = !constant;
  const Vertex estimate = constant ? Vertex{*constant, 0} : centroid(polygon);
  fit.kind = constant || drift_unbounded ? LineFit::Kind::drift_undetermined : LineFit::Kind::fitted;
  fit.line.offset_ns = static_cast<double>(estimate.a);
  fit.line.drift = static_cast<double>(estimate.d * 1e-9L);
  fit.bound_ns = static_cast<double>(largest_deviation(polygon, estimate, from, to));
  return fit;
}

namespace {

struct Edge {
  LineFit fit;
  uint64_t sent = 0;      // from the host in the tree to the new one
  uint64_t received = 0;  // the other way
};

// The fit that puts host `joining`'s clock on host `member`'s.
Edge fit_edge(size_t member, size_t joining, const std::vector<HostMessage>& messages,
              const std::optional<TimeSpan>& joining_span) {
  std::vector<TimePoint> below, above;
  Edge edge;
  for (const HostMessage& message : messages) {
    if (message.sender == member && message.receiver == joining) {
      // At the receive, the member's clock read at least the send time.
      below.push_back({message.receive_ns, message.send_ns});
      ++edge.sent;
    } else if (message.sender == joining && message.receiver == member) {
      above.push_back({message.send_ns, message.receive_ns});
      ++edge.received;
    }
  }
  edge.fit = fit_between(below, above, joining_span);
  return edge;
}

// How much an edge's kind of fit is worth: lower is better; nullopt: not usable to join the tree.
std::optional<int> fit_class(const LineFit& fit) {
  switch (fit.kind) {
    // Both bound every line of drift within kMaxDrift the pairs leave possible: the bounds
    // compare.
    case LineFit::Kind::fitted:
    case LineFit::Kind::drift_undetermined:
      return 0;
    case LineFit::Kind::one_sided:
      return 1;
    default:
      return std::nullopt;
  }
}

std::string describe_join(const Edge& edge, bool moved) {
  const uint64_t pairs = edge.sent + edge.received;
  switch (edge.fit.kind) {
    case LineFit::Kind::fitted:
      return fmt::format("{} message pairs ({} each way at least): offset and drift fitted", pairs,
                         std::min(edge.sent, edge.received));
    case LineFit::Kind::drift_undetermined:
      return edge.fit.drift_needed
                 ? fmt::format(
                       "{} message pairs over too short a time to bound the drift: offset and drift fitted, "
                       "the bound allowing any drift up to {} ppm",
                       pairs, kMaxDrift * 1e6)
                 : fmt::format(
                       "{} message pairs, a constant offset respecting them all: offset only (no drift "
                       "fitted to their delays), the bound allowing every drift they leave possible",
                       pairs);
    default:
      return fmt::format("{} messages one way only: a one-sided bound, no estimate; {}", pairs,
                         moved ? "the wall clock put receives before their sends, moved to the one-sided limit"
                               : "kept the wall clock, which respects it");
  }
}

}  // namespace

std::vector<HostAlignment> align_hosts(size_t host_count, const std::vector<HostMessage>& messages,
                                       const std::vector<std::optional<TimeSpan>>& spans) {
  std::vector<HostAlignment> hosts(host_count);
  if (host_count == 0) return hosts;
  std::vector<bool> joined(host_count, false);
  joined[0] = true;
  hosts[0].source = HostAlignment::Source::reference;
  hosts[0].bound_ns = 0;
  hosts[0].reason = "reference host";
  std::map<std::pair<size_t, size_t>, Edge> edges;
  for (const HostMessage& message : messages) {
    if (message.sender >= host_count || message.receiver >= host_count || message.sender == message.receiver) continue;
    for (const auto& key : {std::pair{message.sender, message.receiver}, std::pair{message.receiver, message.sender}})
      edges.emplace(key, Edge{});
  }
  for (auto& [key, edge] : edges)
    edge = fit_edge(key.first, key.second, messages, key.second < spans.size() ? spans[key.second] : std::nullopt);

  // Dijkstra's order: each host joins by the path with the best worst kind of fit, then the
  // smallest total bound (bounds add up along a path), then the most pairs on its last link.
  std::vector<int> path_class(host_count, 0);
  while (true) {
    const Edge* best = nullptr;
    size_t best_member = 0, best_joining = 0;
    std::tuple<int, double, int64_t> best_rank;
    for (const auto& [key, edge] : edges) {
      const auto edge_class = fit_class(edge.fit);
      if (!joined[key.first] || joined[key.second] || !edge_class) continue;
      const std::tuple<int, double, int64_t> rank{std::max(path_class[key.first], *edge_class),
                                                  hosts[key.first].bound_ns + edge.fit.bound_ns,
                                                  -static_cast<int64_t>(edge.sent + edge.received)};
      if (!best || rank < best_rank) {
        best = &edge;
        best_rank = rank;
        best_member = key.first;
        best_joining = key.second;
      }
    }
    if (!best) break;
    path_class[best_joining] = std::get<0>(best_rank);
    HostAlignment& host = hosts[best_joining];
    joined[best_joining] = true;
    host.parent = best_member;
    host.pairs = best->sent + best->received;
    host.to_reference = compose(hosts[best_member].to_reference, best->fit.line);
    host.bound_ns = hosts[best_member].bound_ns + best->fit.bound_ns;
    const bool moved = best->fit.line.offset_ns != 0;
    host.source = best->fit.kind == LineFit::Kind::one_sided
                      ? (moved ? HostAlignment::Source::one_sided_limit : HostAlignment::Source::wall_clock)
                      : HostAlignment::Source::message_pairs;
    host.reason = describe_join(*best, moved);
  }
  for (size_t index = 1; index < host_count; ++index) {
    if (joined[index]) continue;
    HostAlignment& host = hosts[index];
    host.parent = index;
    bool infeasible = false, linked = false;
    for (const auto& [key, edge] : edges) {
      linked |= key.second == index;
      infeasible |= key.second == index && joined[key.first] && edge.fit.kind == LineFit::Kind::infeasible;
    }
    host.reason = infeasible ? "no clock line puts every receive after its send (a clock jumped, or pairs are "
                               "mismatched): fell back to the wall clock"
                  : linked   ? "its message pairs do not lead to the reference host: fell back to the wall clock"
                             : "no message pairs with the other hosts: fell back to the wall clock";
  }
  return hosts;
}

}  // namespace chronicle::merge
