// JSON written as it is made, for the viewer's largest answers (a window: up to a few hundred
// thousand small arrays of numbers). Building nlohmann::json first and dumping it allocates a
// value per number and takes as long as finding what the window shows; this appends to one string.
//
// Containers are opened and closed in order, and inside an object each value follows a key(); the
// writer puts the commas and colons. Strings are escaped as the exporters escape them (bytes that
// are not UTF-8 become U+FFFD), and a double that is not finite is written null, as
// nlohmann::json writes it.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace chronicle::viewer {

class JsonOut {
 public:
  JsonOut& begin_object() { return open('{', '}'); }
  JsonOut& end_object() { return close('}'); }
  JsonOut& begin_array() { return open('[', ']'); }
  JsonOut& end_array() { return close(']'); }
  JsonOut& key(std::string_view name);

  template <std::integral Integer>
  requires(!std::same_as<Integer, bool>) JsonOut& value(Integer number) {
    if constexpr (std::is_signed_v<Integer>)
      return integer(static_cast<int64_t>(number));
    else
      return integer(static_cast<uint64_t>(number));
  }
  JsonOut& value(double number);
  JsonOut& value(bool truth);
  JsonOut& value(std::string_view text);
  JsonOut& value(const char* text) { return value(std::string_view(text)); }
  JsonOut& null();

  // key(name) then value(v).
  template <class Value>
  JsonOut& field(std::string_view name, const Value& v) {
    return key(name).value(v);
  }

  // The text, once every container is closed.
  std::string take();

 private:
  JsonOut& integer(int64_t number);
  JsonOut& integer(uint64_t number);
  JsonOut& open(char bracket, char closing);
  JsonOut& close(char closing);
  // A comma before each element of a container but its first; none after a key.
  void before_value() {
    if (after_key_) {
      after_key_ = false;
    } else if (!open_.empty()) {
      if (open_.back().has_elements) text_ += ',';
      open_.back().has_elements = true;
    }
  }

  struct Open {
    char closing;  // '}' or ']'
    bool has_elements;
  };
  std::string text_;
  std::vector<Open> open_;
  bool after_key_ = false;
};

}  // namespace chronicle::viewer
