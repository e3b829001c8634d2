// `chronicle view`'s HTTP server: the embedded page at /, and the index's answers as JSON under
// /api/ (summary, window, span, task, search, stats). Serves on threads of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "viewer/timeline_index.hpp"

namespace chronicle::viewer {

class ViewerServer {
 public:
  // Port 0 picks a free one. Throws std::runtime_error when it cannot listen. `index` must
  // outlive the server.
  ViewerServer(const TimelineIndex& index, std::string title, const std::string& address, uint16_t port);
  // The same, holding the index.
  ViewerServer(std::shared_ptr<const TimelineIndex> index, std::string title, const std::string& address,
               uint16_t port);

  // Answers from `index` from now on (the same trace's, as the cache mapped it back); an answer
  // under way finishes with the one it began with, which is let go after it.
  void replace_index(std::shared_ptr<const TimelineIndex> index);
  // The index it answers from now.
  std::shared_ptr<const TimelineIndex> index() const;
  ~ViewerServer();
  ViewerServer(const ViewerServer&) = delete;
  ViewerServer& operator=(const ViewerServer&) = delete;

  uint16_t port() const { return port_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  uint16_t port_ = 0;
};

// One self-contained page: the script and every answer the page needs for this (small) trace.
// Throws std::runtime_error when the viewer was not built.
std::string standalone_html(const TimelineIndex& index, const std::string& title);

}  // namespace chronicle::viewer
