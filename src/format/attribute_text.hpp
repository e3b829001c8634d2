// The one rule for an attribute's string value as a trace stores it, for the recorder and for
// `merge` writing another service's attributes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "chronicle/detail/layout.hpp"

namespace chronicle::format {

// `text` as stored: at most kMaxAttributeText bytes, cut at a UTF-8 character's start and ending
// in kTruncatedMarker when longer (then built in `scratch`).
inline std::string_view stored_attribute_text(std::string_view text, std::string& scratch) {
  if (text.size() <= kMaxAttributeText) return text;
  size_t keep = kMaxAttributeText - (sizeof kTruncatedMarker - 1);
  while (keep > 0 && (static_cast<uint8_t>(text[keep]) & 0xc0) == 0x80) --keep;  // inside a character
  scratch.assign(text.substr(0, keep));
  scratch += kTruncatedMarker;
  return scratch;
}

}  // namespace chronicle::format
