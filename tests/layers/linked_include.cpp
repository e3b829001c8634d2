// Layers.LinkedIncludeCompiles: the same include in a target that links chronicle_export compiles,
// so that the failure of the wrong one is the include path's doing, not this source's.
#include "export/json_text.hpp"

std::string layers_linked_include() {
  return chronicle::exports::json_text(nullptr);
}
