#include "viewer/json_out.hpp"

#include <fmt/format.h>

#include <cmath>
#include <iterator>
#include <stdexcept>

#include "export/export_common.hpp"

namespace chronicle::viewer {

JsonOut& JsonOut::key(std::string_view name) {
  if (after_key_) throw std::logic_error("JsonOut: a key where a value belongs");
  before_value();
  exports::append_json_string(text_, name);
  text_ += ':';
  after_key_ = true;
  return *this;
}

JsonOut& JsonOut::integer(int64_t number) {
  before_value();
  exports::append_decimal(text_, number);
  return *this;
}

JsonOut& JsonOut::integer(uint64_t number) {
  before_value();
  exports::append_decimal(text_, number);
  return *this;
}

JsonOut& JsonOut::value(double number) {
  if (!std::isfinite(number)) return null();
  before_value();
  fmt::format_to(std::back_inserter(text_), "{}", number);
  return *this;
}

JsonOut& JsonOut::value(bool truth) {
  before_value();
  text_ += truth ? "true" : "false";
  return *this;
}

JsonOut& JsonOut::value(std::string_view text) {
  before_value();
  exports::append_json_string(text_, text);
  return *this;
}

JsonOut& JsonOut::null() {
  before_value();
  text_ += "null";
  return *this;
}

JsonOut& JsonOut::open(char bracket, char closing) {
  before_value();
  text_ += bracket;
  open_.push_back({closing, false});
  return *this;
}

JsonOut& JsonOut::close(char closing) {
  if (open_.empty() || open_.back().closing != closing || after_key_)
    throw std::logic_error("JsonOut: a container closed that is not the one open");
  open_.pop_back();
  text_ += closing;
  return *this;
}

std::string JsonOut::take() {
  if (!open_.empty() || after_key_) throw std::logic_error("JsonOut: text taken before it is complete");
  return std::move(text_);
}

}  // namespace chronicle::viewer
