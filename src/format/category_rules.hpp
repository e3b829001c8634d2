// Which categories a session records, and from which level: rules applied in order, the last
// one whose pattern matches a category deciding its state; a category no rule matches is off.
// Rules come from the session's configuration and, while it runs, from `chronicle ctl`; they
// also decide the state of categories that appear later, at their first trace point.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chronicle::format {

// A glob over a category name: '*' matches any run of characters (dots included), '?' one
// character, anything else itself. Allocates nothing.
bool glob_matches(std::string_view pattern, std::string_view text);

class CategoryRules {
 public:
  static constexpr size_t kMaxRules = 64;

  // Config::categories: comma-separated patterns that start on at level 0 ("*": all, "": none).
  static CategoryRules from_list(std::string_view list);

  // kCategoryOff, or a level + 1.
  uint8_t state_of(std::string_view category) const;

  // A rule after the others (one for the same pattern is replaced); false when there are
  // kMaxRules different patterns already.
  bool add(std::string_view pattern, uint8_t state);

  // Whether add(pattern, ...) would succeed.
  bool would_accept(std::string_view pattern) const;

  size_t size() const { return rules_.size(); }

 private:
  struct Rule {
    std::string pattern;
    uint8_t state;
  };
  std::vector<Rule> rules_;
};

// "on", "off" or "level N", as ctl prints a state.
std::string describe_category_state(uint8_t state);

}  // namespace chronicle::format
