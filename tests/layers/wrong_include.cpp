// Built by Layers.WrongIncludeFailsToCompile in a target that links chronicle_reader alone: the
// export library's header is not on its include path, so this must not compile.
#include "export/json_text.hpp"

std::string layers_wrong_include() {
  return chronicle::exports::json_text(nullptr);
}
