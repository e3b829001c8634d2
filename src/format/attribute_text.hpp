// The one rule for an attribute's string value as a trace stores it, for the recorder and for
// `merge` writing another service's attributes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "chronicle/detail/layout.hpp"

namespace chronicle::format {

// `text` as stored: at most kMaxAttributeText bytes, cut at a UTF-8 character's start and ending
// in kTruncatedMarker when longer. The stored text is `kept` followed by the marker when `cut`.
struct StoredAttributeText {
  std::string_view kept;
  bool cut;
  size_t size() const { return kept.size() + (cut ? sizeof kTruncatedMarker - 1 : 0); }
};

inline StoredAttributeText split_attribute_text(std::string_view text) {
  if (text.size() <= kMaxAttributeText) return {text, false};
  size_t keep = kMaxAttributeText - (sizeof kTruncatedMarker - 1);
  while (keep > 0 && (static_cast<uint8_t>(text[keep]) & 0xc0) == 0x80) --keep;  // inside a character
  return {text.substr(0, keep), true};
}

// The same, built in `scratch` when cut.
inline std::string_view stored_attribute_text(std::string_view text, std::string& scratch) {
  const StoredAttributeText stored = split_attribute_text(text);
  if (!stored.cut) return stored.kept;
  scratch.assign(stored.kept);
  scratch += kTruncatedMarker;
  return scratch;
}

}  // namespace chronicle::format
