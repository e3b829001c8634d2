#include "export/otel_environment.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <stdexcept>

namespace chronicle::exports {
namespace {

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

int hex_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
}

std::string percent_decoded(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(hex_digit(text[i + 1]) * 16 + hex_digit(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string variable(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> otel_key_values(std::string_view text, std::string_view variable) {
  std::vector<std::pair<std::string, std::string>> pairs;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view entry = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (trimmed(entry).empty()) continue;
    const size_t equals = entry.find('=');
    const std::string_view key = trimmed(entry.substr(0, equals));
    if (equals == std::string_view::npos || key.empty())
      throw std::invalid_argument(fmt::format("{}: '{}' is not key=value", variable, entry));
    pairs.emplace_back(percent_decoded(key), percent_decoded(trimmed(entry.substr(equals + 1))));
  }
  return pairs;
}

OtelResource otel_resource_from_environment() {
  OtelResource resource;
  for (auto& [key, value] : otel_key_values(variable("OTEL_RESOURCE_ATTRIBUTES"), "OTEL_RESOURCE_ATTRIBUTES")) {
    if (key == "service.name")
      resource.service_name = std::move(value);
    else
      resource.attributes.emplace_back(std::move(key), std::move(value));
  }
  if (const std::string name = variable("OTEL_SERVICE_NAME"); !name.empty()) resource.service_name = name;
  return resource;
}

OtelSampler otel_sampler_from_environment() {
  const std::string name = variable("OTEL_TRACES_SAMPLER");
  if (name.empty() || name == "parentbased_always_on") return OtelSampler::parent_based_always_on;
  if (name == "always_on") return OtelSampler::always_on;
  throw std::invalid_argument("OTEL_TRACES_SAMPLER=" + name +
                              ": chronicle exports with parentbased_always_on (the default) or always_on");
}

}  // namespace chronicle::exports
