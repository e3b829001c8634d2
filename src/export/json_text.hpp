// JSON text for every tool that writes JSON with nlohmann-json (stats --json, the viewer's API and
// its HTML export). A trace's strings are bytes (thread names, notes, labels): bytes that are
// not UTF-8 become U+FFFD, as append_json_string does for the exports, where dump() would throw.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace chronicle::exports {

inline std::string json_text(const nlohmann::json& value, int indent = -1) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace chronicle::exports
