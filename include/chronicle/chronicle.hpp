// chronicle: trace points for C++ programs.
//
//   CHRONICLE_SPAN("net", "accept");            // a span from here to the end of the scope
//   CHRONICLE_INSTANT("net", "closed");         // a point in time
//   CHRONICLE_NOTE("net", "peer {}", address);  // free text, formatted only when recorded
//   CHRONICLE_COUNTER("net", "queue", depth);   // a counter's new value
//     (like every trace point's arguments, `depth` is evaluated only while a session runs:
//     give it no side effect)
//   CHRONICLE_SPAN_ARGS("http", "request", "http.route", route, "user.id", id);  // with attributes
//   CHRONICLE_INSTANT_ARGS("cache", "miss", "key", key);                         // the same, an instant
//   CHRONICLE_SPAN_DYNAMIC("rpc", method_name);  // a span named at run time (a string)
//   CHRONICLE_SPAN_ATTRIBUTE("http", "http.response.status_code", status);  // set before the end
//   chronicle::fail_current_span("no stock");    // the innermost open span ends in error
//
// Attributes: up to 8 key/value pairs; keys are string literals, values an integer (int64; a
// 64-bit unsigned one is uint64), a floating-point number, a bool or a string (std::string,
// std::string_view, const char*: copied, cut at 256 bytes with a visible mark). They are
// computed only when the category is recorded. A span with attributes or a runtime name also
// ends in error when an exception leaves its scope, as a plain CHRONICLE_SPAN does.
//
// Verbose trace points take a level (0..254; the macros above are level 0), e.g.
//   CHRONICLE_SPAN_V("net", "parse header", 2);
// and are recorded only while their category's level reaches theirs: `chronicle ctl PID level
// net 2` (a category that is just "on" records level 0).
//
// With CHRONICLE_DISABLE defined every macro compiles to nothing. With no session running a
// trace point costs one load and one branch; with its category off, that and two more.
#pragma once

#include "chronicle/config.hpp"

#define CHRONICLE_CONCAT_INNER(a, b) a##b
#define CHRONICLE_CONCAT(a, b) CHRONICLE_CONCAT_INNER(a, b)
#define CHRONICLE_UNIQUE(prefix) CHRONICLE_CONCAT(prefix, __LINE__)

#ifndef CHRONICLE_DISABLE

#include <fmt/format.h>

#include "chronicle/detail/attributes.hpp"
#include "chronicle/detail/writer.hpp"

namespace chronicle::detail {
// A note's text, formatted out of line (src/recorder/trace_points.cpp) and cut to 1024 bytes.
void emit_note_vformat(Site& site, uint32_t generation, fmt::string_view format, fmt::format_args args);
template <typename... Args>
CHRONICLE_INLINE void emit_formatted_note(Site& site, uint32_t generation, fmt::format_string<Args...> format,
                                          Args&&... args) {
  emit_note_vformat(site, generation, format, fmt::make_format_args(args...));
}
}  // namespace chronicle::detail

#define CHRONICLE_DETAIL_SITE(variable, category, name, kind, level)                                           \
  static_assert((level) >= 0 && (level) <= ::chronicle::format::kMaxLevel, "a trace point's level is 0..254"); \
  static constinit ::chronicle::detail::Site variable {                                                        \
    category, name, __FILE__, __LINE__, static_cast<uint8_t>(::chronicle::format::SiteKind::kind),             \
        static_cast<uint8_t>(level)                                                                            \
  }

#define CHRONICLE_SPAN_V(category, name, level)                                          \
  CHRONICLE_DETAIL_SITE(CHRONICLE_UNIQUE(chronicle_site_), category, name, span, level); \
  ::chronicle::detail::ScopedSpan CHRONICLE_UNIQUE(chronicle_span_) {                    \
    CHRONICLE_UNIQUE(chronicle_site_)                                                    \
  }

#define CHRONICLE_DETAIL_NAMED_EVENT(category, name, kind, event, level)                                     \
  do {                                                                                                       \
    const uint32_t chronicle_generation = ::chronicle::detail::g_generation.load(std::memory_order_acquire); \
    if (chronicle_generation != 0) [[unlikely]] {                                                            \
      CHRONICLE_DETAIL_SITE(chronicle_site, category, name, kind, level);                                    \
      ::chronicle::detail::emit_named_event(chronicle_site, chronicle_generation,                            \
                                            ::chronicle::format::EventId::event);                            \
    }                                                                                                        \
  } while (0)

#define CHRONICLE_SPAN_BEGIN_V(category, name, level)                                                        \
  do {                                                                                                       \
    const uint32_t chronicle_generation = ::chronicle::detail::g_generation.load(std::memory_order_acquire); \
    if (chronicle_generation != 0) [[unlikely]] {                                                            \
      CHRONICLE_DETAIL_SITE(chronicle_site, category, name, span, level);                                    \
      ::chronicle::detail::emit_span_begin_event(chronicle_site, chronicle_generation);                      \
    }                                                                                                        \
  } while (0)

#define CHRONICLE_SPAN_END_V(category, name, level)                                                          \
  do {                                                                                                       \
    const uint32_t chronicle_generation = ::chronicle::detail::g_generation.load(std::memory_order_acquire); \
    if (chronicle_generation != 0) [[unlikely]] {                                                            \
      CHRONICLE_DETAIL_SITE(chronicle_site, category, name, span, level);                                    \
      ::chronicle::detail::emit_span_end_event(chronicle_site, chronicle_generation);                        \
    }                                                                                                        \
  } while (0)

#define CHRONICLE_INSTANT_V(category, name, level) CHRONICLE_DETAIL_NAMED_EVENT(category, name, instant, instant, level)

#define CHRONICLE_COUNTER_V(category, name, level, value)                                                    \
  do {                                                                                                       \
    const uint32_t chronicle_generation = ::chronicle::detail::g_generation.load(std::memory_order_acquire); \
    if (chronicle_generation != 0) [[unlikely]] {                                                            \
      CHRONICLE_DETAIL_SITE(chronicle_site, category, name, counter, level);                                 \
      ::chronicle::detail::emit_counter_at(chronicle_site, chronicle_generation, (value));                   \
    }                                                                                                        \
  } while (0)

// The format string is the note's interned name; the formatted text is stored with the event.
// The arguments are evaluated only when the category is recorded, and formatted out of line.
#define CHRONICLE_NOTE_V(category, level, format_string, ...)                                                \
  do {                                                                                                       \
    const uint32_t chronicle_generation = ::chronicle::detail::g_generation.load(std::memory_order_acquire); \
    if (chronicle_generation != 0) [[unlikely]] {                                                            \
      CHRONICLE_DETAIL_SITE(chronicle_site, category, format_string, note, level);                           \
      if (::chronicle::detail::recorded_writer(chronicle_site, chronicle_generation))                        \
        ::chronicle::detail::emit_formatted_note(chronicle_site, chronicle_generation,                       \
                                                 FMT_STRING(format_string) __VA_OPT__(, ) __VA_ARGS__);      \
    }                                                                                                        \
  } while (0)

#define CHRONICLE_SPAN_ARGS_V(category, name, level, ...)                                  \
  CHRONICLE_DETAIL_SITE(CHRONICLE_UNIQUE(chronicle_site_), category, name, span, level);   \
  static constinit ::chronicle::detail::AttributeKeys CHRONICLE_UNIQUE(chronicle_keys_){}; \
  ::chronicle::detail::ScopedSpanWithArgs CHRONICLE_UNIQUE(chronicle_span_) {              \
    CHRONICLE_UNIQUE(chronicle_site_), CHRONICLE_UNIQUE(chronicle_keys_),                  \
        [&](auto&& chronicle_emit) { return chronicle_emit(__VA_ARGS__); }                 \
  }

#define CHRONICLE_INSTANT_ARGS_V(category, name, level, ...)                                                        \
  do {                                                                                                              \
    const uint32_t chronicle_generation = ::chronicle::detail::g_generation.load(std::memory_order_acquire);        \
    if (chronicle_generation != 0) [[unlikely]] {                                                                   \
      CHRONICLE_DETAIL_SITE(chronicle_site, category, name, instant, level);                                        \
      static constinit ::chronicle::detail::AttributeKeys chronicle_keys{};                                         \
      if (auto* chronicle_writer = ::chronicle::detail::recorded_writer(chronicle_site, chronicle_generation)) {    \
        ::chronicle::detail::emit_begin_with_attributes(                                                            \
            *chronicle_writer, chronicle_site, ::chronicle::format::EventId::instant, chronicle_keys, __VA_ARGS__); \
      }                                                                                                             \
    }                                                                                                               \
  } while (0)

// An attribute of the innermost open span of the calling thread or task (as the trace records
// it), set before its end: `key` a string literal, `value` as in CHRONICLE_SPAN_ARGS, computed
// only when `category` is recorded.
#define CHRONICLE_SPAN_ATTRIBUTE_V(category, level, key, value)                                                    \
  do {                                                                                                             \
    const uint32_t chronicle_generation = ::chronicle::detail::g_generation.load(std::memory_order_acquire);       \
    if (chronicle_generation != 0) [[unlikely]] {                                                                  \
      CHRONICLE_DETAIL_SITE(chronicle_site, category, key, attribute, level);                                      \
      if (::chronicle::detail::recorded_writer(chronicle_site, chronicle_generation))                              \
        ::chronicle::detail::emit_attribute(nullptr, chronicle_site, ::chronicle::detail::attribute_value(value)); \
    }                                                                                                              \
  } while (0)

// `name`: a std::string, std::string_view or C string, read only when the category is recorded.
#define CHRONICLE_SPAN_DYNAMIC_V(category, name, level)                                                        \
  CHRONICLE_DETAIL_SITE(CHRONICLE_UNIQUE(chronicle_site_), category, "<dynamic>", span, level);                \
  static thread_local constinit ::chronicle::detail::DynamicNameSlot* CHRONICLE_UNIQUE(chronicle_last_name_) = \
      nullptr;                                                                                                 \
  ::chronicle::detail::ScopedDynamicSpan CHRONICLE_UNIQUE(chronicle_span_) {                                   \
    CHRONICLE_UNIQUE(chronicle_site_), CHRONICLE_UNIQUE(chronicle_last_name_), name                            \
  }

#define CHRONICLE_SPAN(category, name) CHRONICLE_SPAN_V(category, name, 0)
#define CHRONICLE_SPAN_ARGS(category, name, ...) CHRONICLE_SPAN_ARGS_V(category, name, 0, __VA_ARGS__)
#define CHRONICLE_INSTANT_ARGS(category, name, ...) CHRONICLE_INSTANT_ARGS_V(category, name, 0, __VA_ARGS__)
#define CHRONICLE_SPAN_DYNAMIC(category, name) CHRONICLE_SPAN_DYNAMIC_V(category, name, 0)
#define CHRONICLE_SPAN_ATTRIBUTE(category, key, value) CHRONICLE_SPAN_ATTRIBUTE_V(category, 0, key, value)
#define CHRONICLE_SPAN_BEGIN(category, name) CHRONICLE_SPAN_BEGIN_V(category, name, 0)
#define CHRONICLE_SPAN_END(category, name) CHRONICLE_SPAN_END_V(category, name, 0)
#define CHRONICLE_INSTANT(category, name) CHRONICLE_INSTANT_V(category, name, 0)
#define CHRONICLE_COUNTER(category, name, value) CHRONICLE_COUNTER_V(category, name, 0, value)
#define CHRONICLE_NOTE(category, format_string, ...) \
  CHRONICLE_NOTE_V(category, 0, format_string __VA_OPT__(, ) __VA_ARGS__)

#else  // CHRONICLE_DISABLE

#define CHRONICLE_SPAN(category, name) static_assert(true)
#define CHRONICLE_SPAN_BEGIN(category, name) static_assert(true)
#define CHRONICLE_SPAN_END(category, name) static_assert(true)
#define CHRONICLE_INSTANT(category, name) static_assert(true)
#define CHRONICLE_COUNTER(category, name, value) static_assert(true)
#define CHRONICLE_NOTE(category, format_string, ...) static_assert(true)
#define CHRONICLE_SPAN_V(category, name, level) static_assert(true)
#define CHRONICLE_SPAN_BEGIN_V(category, name, level) static_assert(true)
#define CHRONICLE_SPAN_END_V(category, name, level) static_assert(true)
#define CHRONICLE_INSTANT_V(category, name, level) static_assert(true)
#define CHRONICLE_COUNTER_V(category, name, level, value) static_assert(true)
#define CHRONICLE_NOTE_V(category, level, format_string, ...) static_assert(true)
#define CHRONICLE_SPAN_ARGS(category, name, ...) static_assert(true)
#define CHRONICLE_INSTANT_ARGS(category, name, ...) static_assert(true)
#define CHRONICLE_SPAN_DYNAMIC(category, name) static_assert(true)
#define CHRONICLE_SPAN_ARGS_V(category, name, level, ...) static_assert(true)
#define CHRONICLE_INSTANT_ARGS_V(category, name, level, ...) static_assert(true)
#define CHRONICLE_SPAN_DYNAMIC_V(category, name, level) static_assert(true)
#define CHRONICLE_SPAN_ATTRIBUTE(category, key, value) static_assert(true)
#define CHRONICLE_SPAN_ATTRIBUTE_V(category, level, key, value) static_assert(true)

#include <string_view>

namespace chronicle {
inline namespace compiled_out {  // not the library's function: a program may mix both kinds of files
inline void fail_current_span(std::string_view) {}
}  // namespace compiled_out
}  // namespace chronicle

#endif
