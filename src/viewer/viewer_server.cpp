#include "viewer/viewer_server.hpp"

#include <httplib.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>

#include "export/json_text.hpp"
#include "http/http_limits.hpp"
#include "viewer/assets.hpp"
#include "viewer/json_api.hpp"

namespace chronicle::viewer {
namespace {

using nlohmann::json;

constexpr uint32_t kMaxWidth = 16384;
// A search text longer than this names nothing a person typed.
constexpr size_t kMaxMatchBytes = 1024;
constexpr size_t kMaxSearchHits = 500;

// The page asks in doubles: negative or fractional times are clamped and rounded.
uint64_t time_parameter(const httplib::Request& request, const char* name, uint64_t fallback) {
  if (!request.has_param(name)) return fallback;
  const double value = std::stod(request.get_param_value(name));
  if (!std::isfinite(value) || value <= 0) return 0;
  return static_cast<uint64_t>(std::llround(value));
}

uint32_t count_parameter(const httplib::Request& request, const char* name) {
  if (!request.has_param(name)) throw std::invalid_argument(fmt::format("missing parameter {}", name));
  return static_cast<uint32_t>(std::stoul(request.get_param_value(name)));
}

// rows=FIRST-LAST (shown rows, LAST excluded) and collapsed=TASK,TASK,... (task indexes);
// by=time: the rows are the tasks by time (by=tree, or none: in tree order).
TaskRowQuery task_row_query(const httplib::Request& request) {
  TaskRowQuery query;
  if (request.has_param("by")) {
    const std::string by = request.get_param_value("by");
    if (by != "time" && by != "tree") throw std::invalid_argument("by: \"time\" or \"tree\", not \"" + by + "\"");
    query.by_time = by == "time";
  }
  if (request.has_param("rows")) {
    const std::string rows = request.get_param_value("rows");
    const size_t dash = rows.find('-');
    if (dash == std::string::npos) throw std::invalid_argument("rows is FIRST-LAST");
    query.first = static_cast<uint32_t>(std::stoul(rows.substr(0, dash)));
    query.last = static_cast<uint32_t>(std::stoul(rows.substr(dash + 1)));
  }
  if (request.has_param("collapsed")) {
    const std::string list = request.get_param_value("collapsed");
    for (size_t at = 0; at < list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      if (comma > at) query.collapsed.push_back(static_cast<uint32_t>(std::stoul(list.substr(at, comma - at))));
      at = comma + 1;
    }
  }
  return query;
}

void reply_text(httplib::Response& response, std::string text) {
  response.set_header("Cache-Control", "no-store");
  // With the charset, cpp-httplib does not compress the answer: browsers accept brotli, which it
  // runs at its slowest quality (about 150 ms for a window's 150 KiB), and on a loopback
  // connection sending the bytes costs far less than squeezing them.
  response.set_content(std::move(text), "application/json; charset=utf-8");
}

void reply(httplib::Response& response, const json& body) {
  reply_text(response, exports::json_text(body));
}

// Answers with `answer()` as JSON, or 400 with the reason when the request was wrong.
template <typename Answer>
httplib::Server::Handler json_handler(Answer answer) {
  return [answer](const httplib::Request& request, httplib::Response& response) {
    try {
      if constexpr (std::is_same_v<decltype(answer(request)), std::string>)
        reply_text(response, answer(request));  // JSON text already (window_text)
      else
        reply(response, answer(request));
    } catch (const std::exception& error) {
      response.status = 400;
      reply(response, {{"error", error.what()}});
    }
  };
}

// by=thread: a root per thread; nothing (or by=path): every thread merged by call path.
FlameRoots flame_roots(const httplib::Request& request) {
  const std::string by = request.has_param("by") ? request.get_param_value("by") : "path";
  if (by == "thread") return FlameRoots::per_thread;
  if (by == "path" || by.empty()) return FlameRoots::merged;
  throw std::invalid_argument("by: \"thread\" or \"path\", not \"" + by + "\"");
}

// source=samples: the call stacks of the samples (record --sample); nothing (or spans): the spans.
FlameSource flame_source(const httplib::Request& request) {
  const std::string source = request.has_param("source") ? request.get_param_value("source") : "spans";
  if (source == "samples") return FlameSource::samples;
  if (source == "spans" || source.empty()) return FlameSource::spans;
  throw std::invalid_argument("source: \"spans\" or \"samples\", not \"" + source + "\"");
}

// mode=running: the pieces of spans on threads; nothing (or wall): whole spans (analysis/span_time.hpp).
FlameMode flame_mode(const httplib::Request& request) {
  const std::string mode = request.has_param("mode") ? request.get_param_value("mode") : "wall";
  if (mode == "running") return FlameMode::running;
  if (mode == "wall" || mode.empty()) return FlameMode::wall;
  throw std::invalid_argument("mode: \"wall\" or \"running\", not \"" + mode + "\"");
}

const char* kNotBuilt =
    "chronicle was built without its viewer page (CHRONICLE_BUILD_VIEWER=OFF).\n"
    "The JSON API still answers: /api/summary, /api/window?begin=&end=&width=, /api/search?q=, "
    "/api/flame?begin=&end=[&by=thread][&source=samples][&mode=running]\n";

std::string escape_for_script(std::string text) {
  // Inside <script>, only "</" can end the element early; "<\/" means the same in JS and JSON.
  std::string out;
  out.reserve(text.size());
  for (size_t k = 0; k < text.size(); ++k) {
    out += text[k];
    if (text[k] == '<' && k + 1 < text.size() && text[k + 1] == '/') out += '\\';
  }
  return out;
}

json full_dump_json(const TimelineIndex& index, const std::string& title) {
  json lanes = json::array();
  std::set<uint32_t> sites;
  for (const Lane& lane : index.lanes()) {
    json depths = json::array();  // [begin, end, site, its span in "whole"] per piece
    for (size_t depth = 0; depth < lane.depths.size(); ++depth) {
      const IntervalRow& row = lane.depths[depth];
      json spans = json::array();
      for (size_t k = 0; k < row.size(); ++k) {
        spans.push_back({row.begins[k], row.ends[k], row.items[k], lane.depth_spans[depth][k]});
        sites.insert(row.items[k]);
      }
      depths.push_back(std::move(spans));
    }
    json busy = json::array();
    const IntervalRow& busy_row = lane.busy_row();
    for (size_t k = 0; k < busy_row.size(); ++k) busy.push_back({busy_row.begins[k], busy_row.ends[k]});
    json idle = json::array();
    for (size_t k = 0; k < lane.idle.size(); ++k) idle.push_back({lane.idle.begins[k], lane.idle.ends[k]});
    json off_cpu = json::array();  // [begin, end, state]
    for (size_t k = 0; k < lane.off_cpu.size(); ++k)
      off_cpu.push_back({lane.off_cpu.begins[k], lane.off_cpu.ends[k], lane.off_cpu.items[k]});
    json markers = json::array();
    // An instant's name by its site (in `names`), as the trace has it: once, not per instant.
    for (size_t k = 0; k < lane.markers.size(); ++k) {
      const Marker marker = lane.markers[k];
      if (marker.type == format::EventId::note) {
        markers.push_back({marker.time, "note", marker.text});
      } else {
        markers.push_back({marker.time, "instant", marker.site});
        sites.insert(marker.site);
      }
    }
    json runs = json::array();  // [begin, end, task] per nesting depth
    for (const IntervalRow& row : lane.runs) {
      json depth = json::array();
      for (size_t k = 0; k < row.size(); ++k) depth.push_back({row.begins[k], row.ends[k], row.items[k]});
      runs.push_back(std::move(depth));
    }
    lanes.push_back({{"depths", std::move(depths)},
                     {"runs", std::move(runs)},
                     {"idle", std::move(idle)},
                     {"off_cpu", std::move(off_cpu)},
                     {"busy", std::move(busy)},
                     {"markers", std::move(markers)}});
  }
  // Every span whole: [begin, end, site, lane, the span around it (-1: none), running ns].
  json whole = json::array();
  const WholeSpans& spans = index.whole_spans();
  for (size_t k = 0; k < spans.size(); ++k) {
    const WholeSpan span = spans.at(k, index.lanes());
    whole.push_back({span.begin, span.end, span.site, spans.lanes[k],
                     spans.parents[k] == WholeSpans::kNoParent ? int64_t{-1} : int64_t{spans.parents[k]},
                     spans.running_ns(k, index.lanes())});
  }
  json names = json::object();
  for (uint32_t site : sites) names[std::to_string(site)] = index.site_name(site);
  json arrows = json::array();
  for (const Arrow& arrow : index.arrows())
    arrows.push_back({static_cast<int>(arrow.kind), arrow.from_task, arrow.to_task, arrow.from_time, arrow.to_time});
  json messages = json::array();
  for (const MessageArrow& message : index.messages())
    messages.push_back({message.from_lane, message.to_lane, message.from_time, message.to_time});
  json counters = json::array();
  for (const CounterSeries& series : index.counters()) {
    json samples = json::array();
    // [time, value], and the sample's lane when several threads wrote the series.
    for (size_t k = 0; k < series.times.size(); ++k)
      samples.push_back(series.sample_lanes.empty() ? json{series.times[k], series.values[k]}
                                                    : json{series.times[k], series.values[k], series.sample_lanes[k]});
    counters.push_back(std::move(samples));
  }
  return {{"summary", summary_json(index, title)},
          {"lanes", std::move(lanes)},
          {"whole", std::move(whole)},
          {"names", std::move(names)},
          {"tasks", embedded_tasks_json(index)},
          {"arrows", std::move(arrows)},
          {"messages", std::move(messages)},
          {"counters", std::move(counters)},
          {"level_of_detail", level_of_detail_json()}};
}

}  // namespace

// The index the answers read, which keep_index's mapped copy may replace while they run: each
// answer holds the one it began with.
class IndexSlot {
 public:
  explicit IndexSlot(std::shared_ptr<const TimelineIndex> index) : index_(std::move(index)) {}
  std::shared_ptr<const TimelineIndex> get() const {
    const std::lock_guard lock(mutex_);
    return index_;
  }
  void replace(std::shared_ptr<const TimelineIndex> index) {
    std::shared_ptr<const TimelineIndex> old;
    const std::lock_guard lock(mutex_);
    old = std::exchange(index_, std::move(index));  // let go after the lock, by `old`
  }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const TimelineIndex> index_;
};

// One answer's hold on the index, read as a pointer.
class HeldIndex {
 public:
  explicit HeldIndex(const std::shared_ptr<IndexSlot>& slot) : index_(slot->get()) {}
  const TimelineIndex& operator*() const { return *index_; }
  const TimelineIndex* operator->() const { return index_.get(); }

 private:
  std::shared_ptr<const TimelineIndex> index_;
};

struct ViewerServer::State {
  metrics::BoundedHttpServer server;
  std::thread thread;
  std::shared_ptr<IndexSlot> slot;
};

ViewerServer::ViewerServer(const TimelineIndex& index, std::string title, const std::string& address, uint16_t port)
    : ViewerServer(std::shared_ptr<const TimelineIndex>(&index, [](const TimelineIndex*) {}), std::move(title), address,
                   port) {}

void ViewerServer::replace_index(std::shared_ptr<const TimelineIndex> index) {
  state_->slot->replace(std::move(index));
}

std::shared_ptr<const TimelineIndex> ViewerServer::index() const {
  return state_->slot->get();
}

ViewerServer::ViewerServer(std::shared_ptr<const TimelineIndex> index, std::string title, const std::string& address,
                           uint16_t port)
    : state_(std::make_unique<State>()) {
  httplib::Server& server = state_->server;
  // Answers are written in pieces: without this, Nagle's algorithm and the browser's delayed
  // ACK add 40 ms to every answer on a kept-alive connection.
  server.set_tcp_nodelay(true);
  state_->slot = std::make_shared<IndexSlot>(std::move(index));
  const std::shared_ptr<IndexSlot> slot = state_->slot;
  server.Get("/api/summary",
             json_handler([slot, title](const httplib::Request&) { return summary_json(*HeldIndex(slot), title); }));
  server.Get("/api/window", json_handler([slot](const httplib::Request& request) {
               const HeldIndex trace(slot);
               const uint64_t begin = time_parameter(request, "begin", 0);
               const uint64_t end = time_parameter(request, "end", trace->duration());
               const uint32_t width = std::clamp<uint32_t>(count_parameter(request, "width"), 1, kMaxWidth);
               // match=TEXT: the search text, whose spans found by an attribute are marked.
               const std::string match = request.has_param("match") ? request.get_param_value("match") : "";
               if (match.size() > kMaxMatchBytes) throw std::invalid_argument("match is too long");
               return window_text(*trace, begin, end, width, task_row_query(request), match);
             }));
  server.Get("/api/span", json_handler([slot](const httplib::Request& request) {
               const HeldIndex trace(slot);
               return span_details_json(*trace, count_parameter(request, "lane"), count_parameter(request, "depth"),
                                        count_parameter(request, "index"));
             }));
  server.Get("/api/task", json_handler([slot](const httplib::Request& request) {
               const HeldIndex trace(slot);
               return task_details_json(*trace, count_parameter(request, "index"));
             }));
  server.Get("/api/search", json_handler([slot](const httplib::Request& request) {
               const HeldIndex trace(slot);
               const size_t limit = request.has_param("limit")
                                        ? std::min<size_t>(count_parameter(request, "limit"), kMaxSearchHits)
                                        : 100;
               return search_json(*trace, request.get_param_value("q"), limit);
             }));
  server.Get("/api/counter", json_handler([slot](const httplib::Request& request) {
               const HeldIndex trace(slot);
               return counter_json(*trace, count_parameter(request, "index"), time_parameter(request, "begin", 0),
                                   time_parameter(request, "end", trace->duration()));
             }));
  server.Get("/api/stats", json_handler([slot](const httplib::Request& request) {
               const HeldIndex trace(slot);
               return stats_json(*trace, time_parameter(request, "begin", 0),
                                 time_parameter(request, "end", trace->duration()));
             }));
  server.Get("/api/flame", json_handler([slot](const httplib::Request& request) {
               const HeldIndex trace(slot);
               return flame_json(*trace, time_parameter(request, "begin", 0),
                                 time_parameter(request, "end", trace->duration()), flame_roots(request),
                                 flame_source(request), flame_mode(request));
             }));
  server.Get(".*", [](const httplib::Request& request, httplib::Response& response) {
    const std::string path = request.path == "/" ? "/index.html" : request.path;
    const Asset* asset = find_asset(path);
    if (asset) {
      response.set_content(std::string(asset->bytes), std::string(asset->content_type).c_str());
    } else if (embedded_assets().empty()) {
      response.status = request.path == "/" ? 200 : 404;
      response.set_content(kNotBuilt, "text/plain");
    } else {
      response.status = 404;
      response.set_content("not found\n", "text/plain");
    }
  });
  if (port == 0) {
    const int chosen = server.bind_to_any_port(address);
    if (chosen <= 0) throw std::runtime_error(fmt::format("cannot listen on {} (any port)", address));
    port_ = static_cast<uint16_t>(chosen);
  } else {
    if (!server.bind_to_port(address, port))
      throw std::runtime_error(fmt::format("cannot listen on {}:{}", address, port));
    port_ = port;
  }
  state_->server.widen_backlog();
  state_->thread = std::thread([state = state_.get()] { state->server.listen_after_bind(); });
}

ViewerServer::~ViewerServer() {
  state_->server.stop();
  if (state_->thread.joinable()) state_->thread.join();
}

std::string standalone_html(const TimelineIndex& index, const std::string& title) {
  const Asset* page = find_asset("/index.html");
  const Asset* script = find_asset("/viewer.js");
  if (!page || !script)
    throw std::runtime_error("this chronicle was built without its viewer (CHRONICLE_BUILD_VIEWER=OFF)");
  const std::string marker = "<script src=\"viewer.js\"></script>";
  std::string html(page->bytes);
  const size_t at = html.find(marker);
  if (at == std::string::npos) throw std::runtime_error("the embedded page has no script tag to inline");
  const std::string inlined =
      "<script>window.CHRONICLE_DATA = " + escape_for_script(exports::json_text(full_dump_json(index, title))) +
      ";</script>\n<script>" + escape_for_script(std::string(script->bytes)) + "</script>";
  html.replace(at, marker.size(), inlined);
  return html;
}

}  // namespace chronicle::viewer
