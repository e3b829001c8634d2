#include "format/category_rules.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "chronicle/detail/layout.hpp"

namespace chronicle::format {

bool glob_matches(std::string_view pattern, std::string_view text) {
  size_t p = 0;
  size_t t = 0;
  // Where the last '*' was, and the text position it is tried at: on a mismatch it takes one
  // more character. One star to return to is enough, so this is linear in practice.
  size_t star = std::string_view::npos;
  size_t star_text = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_text = t;
    } else if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

CategoryRules CategoryRules::from_list(std::string_view list) {
  CategoryRules rules;
  size_t from = 0;
  while (from < list.size()) {
    size_t comma = list.find(',', from);
    if (comma == std::string_view::npos) comma = list.size();
    if (comma > from) rules.add(list.substr(from, comma - from), category_state_for_level(0));
    from = comma + 1;
  }
  return rules;
}

uint8_t CategoryRules::state_of(std::string_view category) const {
  for (auto rule = rules_.rbegin(); rule != rules_.rend(); ++rule)
    if (glob_matches(rule->pattern, category)) return rule->state;
  return kCategoryOff;
}

bool CategoryRules::would_accept(std::string_view pattern) const {
  return rules_.size() < kMaxRules ||
         std::any_of(rules_.begin(), rules_.end(), [&](const Rule& rule) { return rule.pattern == pattern; });
}

bool CategoryRules::add(std::string_view pattern, uint8_t state) {
  auto same = std::find_if(rules_.begin(), rules_.end(), [&](const Rule& rule) { return rule.pattern == pattern; });
  if (same != rules_.end())
    rules_.erase(same);
  else if (rules_.size() >= kMaxRules)
    return false;
  rules_.push_back({std::string(pattern), state});
  return true;
}

std::string describe_category_state(uint8_t state) {
  if (state == kCategoryOff) return "off";
  if (state == category_state_for_level(0)) return "on";
  return fmt::format("level {}", state - 1);
}

}  // namespace chronicle::format
