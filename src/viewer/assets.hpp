// The viewer's front end (the page and its script), built from viewer/ by npm and esbuild and
// compiled into the binary so that `chronicle view` works offline and from anywhere.
#pragma once

#include <span>
#include <string_view>

namespace chronicle::viewer {

struct Asset {
  std::string_view path;  // "/index.html", "/viewer.js"
  std::string_view content_type;
  std::string_view bytes;
};

// Empty when the build had no viewer (CHRONICLE_BUILD_VIEWER=OFF).
std::span<const Asset> embedded_assets();
const Asset* find_asset(std::string_view path);

}  // namespace chronicle::viewer
