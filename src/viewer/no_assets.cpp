// Linked instead of the generated assets when CHRONICLE_BUILD_VIEWER is OFF.
#include "viewer/assets.hpp"

namespace chronicle::viewer {

std::span<const Asset> embedded_assets() {
  return {};
}

}  // namespace chronicle::viewer
