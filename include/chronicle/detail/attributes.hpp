// Attributes (typed key/value pairs), status and runtime names of spans and instants: what
// CHRONICLE_SPAN_ARGS, CHRONICLE_INSTANT_ARGS, CHRONICLE_SPAN_DYNAMIC and fail_current_span
// write. Everything here is out of line but the argument packing: these trace points are rarer
// than plain spans, and their values are only computed once the category is known to be on.
#pragma once

#include <array>
#include <atomic>
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "chronicle/detail/writer.hpp"

namespace chronicle::detail {

inline constexpr size_t kMaxAttributes = 8;

// One value as the trace stores it. Text is not copied here: it is copied into the event.
// Trivially constructible, so that the 8 slots of AttributeArgs cost nothing until filled.
struct AttributeValue {
  struct TextRef {
    const char* data;
    size_t size;
  };
  format::EventId type;
  union {
    int64_t as_int;
    uint64_t as_uint;
    double as_float;
    bool as_bool;
    TextRef as_text;
  };
  std::string_view text() const { return {as_text.data, as_text.size}; }
};

// Integers are int64 but for 64-bit unsigned ones (which may not fit); anything with a string
// view (std::string, std::string_view, const char*, a literal) is a string.
template <typename Value>
AttributeValue attribute_value(const Value& value) {
  AttributeValue out;
  using Plain = std::remove_cvref_t<Value>;
  if constexpr (std::is_same_v<Plain, bool>) {
    out.type = format::EventId::attribute_bool;
    out.as_bool = value;
  } else if constexpr (std::is_integral_v<Plain> && std::is_unsigned_v<Plain> && sizeof(Plain) == 8) {
    out.type = format::EventId::attribute_uint;
    out.as_uint = value;
  } else if constexpr (std::is_integral_v<Plain> || std::is_enum_v<Plain>) {
    out.type = format::EventId::attribute_int;
    out.as_int = static_cast<int64_t>(value);
  } else if constexpr (std::is_floating_point_v<Plain>) {
    out.type = format::EventId::attribute_float;
    out.as_float = static_cast<double>(value);
  } else if constexpr (std::is_convertible_v<const Value&, std::string_view>) {
    out.type = format::EventId::attribute_string;
    out.as_text = {nullptr, 0};
    if constexpr (std::is_pointer_v<Plain>) {
      if (value == nullptr) return out;
    }
    const std::string_view text(value);
    out.as_text = {text.data(), text.size()};
  } else {
    static_assert(std::is_same_v<Plain, void>,
                  "an attribute's value is an integer, a floating-point number, a bool or a string");
  }
  return out;
}

// The keys of one call site, interned on first use as sites of kind `attribute` in the span's
// category (so that `ctl` and the trace's definitions know them); constant-initialized.
struct AttributeKeys {
  std::atomic<uint32_t> ids[kMaxAttributes]{};
};

struct AttributeArgs {
  const char* keys[kMaxAttributes];
  AttributeValue values[kMaxAttributes];
  size_t count = 0;
};

// Keys are string literals: the site keeps the pointer for the life of the process.
template <size_t N>
void add_attributes(AttributeArgs& args, const char (&key)[N]) = delete;  // a key without a value
inline void add_attributes(AttributeArgs&) {}
template <size_t N, typename Value, typename... Rest>
CHRONICLE_INLINE void add_attributes(AttributeArgs& args, const char (&key)[N], const Value& value,
                                     const Rest&... rest) {
  static_assert(sizeof...(Rest) % 2 == 0, "attributes come as key, value pairs");
  static_assert(sizeof...(Rest) / 2 < kMaxAttributes, "at most 8 attributes per trace point");
  args.keys[args.count] = key;
  args.values[args.count] = attribute_value(value);
  ++args.count;
  add_attributes(args, rest...);
}

// Writes the begin of a span or an instant (`event`) with its attributes as one group: all in
// the trace, or all counted lost. `writer`: what writer_for(site) returned. Returns what happened
// to the begin.
Emitted emit_with_attributes(ThreadWriter& writer, Site& site, format::EventId event, AttributeKeys& keys,
                             const AttributeArgs& args);

// The most one begin with its attributes may write as one group (EventGroup's limit); a group
// with longer strings is written event by event.
inline constexpr size_t kAttributeGroupBytes = 1024 - format::kPacketHeaderSize;

// Every value type a trace point can be given is written by code of its own types (one function
// per list of types, shared by every site with that list), with no loop over types or
// AttributeArgs to fill: numbers, bools and enums of a size known when compiled, strings of the
// size they have. The bytes are emit_with_attributes' exactly; what that path alone handles (a
// key not interned yet, a string the trace cuts, a group past its limit) goes there.
template <typename Value>
concept FixedSizeAttribute =
    std::is_arithmetic_v<std::remove_cvref_t<Value>> || std::is_enum_v<std::remove_cvref_t<Value>>;
template <typename Value>
concept TextAttribute = !FixedSizeAttribute<Value> && std::is_convertible_v<const Value&, std::string_view>;
template <typename Value>
concept TypedAttribute = FixedSizeAttribute<Value> || TextAttribute<Value>;

// The value as the trace stores it: the type attribute_value() gives it.
template <TypedAttribute Value>
CHRONICLE_INLINE auto stored_value(const Value& value) {
  using Plain = std::remove_cvref_t<Value>;
  if constexpr (TextAttribute<Value>) {
    if constexpr (std::is_pointer_v<Plain>)
      return value == nullptr ? std::string_view() : std::string_view(value);
    else
      return std::string_view(value);
  } else if constexpr (std::is_same_v<Plain, bool>) {
    return value;
  } else if constexpr (std::is_integral_v<Plain> && std::is_unsigned_v<Plain> && sizeof(Plain) == 8) {
    return static_cast<uint64_t>(value);
  } else if constexpr (std::is_integral_v<Plain> || std::is_enum_v<Plain>) {
    return static_cast<int64_t>(value);
  } else {
    return static_cast<double>(value);
  }
}

template <typename Stored>
struct TypedAttributeEvent;
template <>
struct TypedAttributeEvent<int64_t> {
  using Payload = format::AttributeIntPayload;
  static constexpr format::EventId id = format::EventId::attribute_int;
};
template <>
struct TypedAttributeEvent<uint64_t> {
  using Payload = format::AttributeUintPayload;
  static constexpr format::EventId id = format::EventId::attribute_uint;
};
template <>
struct TypedAttributeEvent<double> {
  using Payload = format::AttributeFloatPayload;
  static constexpr format::EventId id = format::EventId::attribute_float;
};
template <>
struct TypedAttributeEvent<bool> {
  using Payload = format::AttributeBoolPayload;
  static constexpr format::EventId id = format::EventId::attribute_bool;
};
template <>
struct TypedAttributeEvent<std::string_view> {
  using Payload = format::AttributeStringPrefix;  // + the text and its NUL
  static constexpr format::EventId id = format::EventId::attribute_string;
};

// The bytes of a value's event beyond its header and fixed payload: a string's text and NUL.
CHRONICLE_INLINE size_t text_bytes(std::string_view text) {
  return text.size() + 1;
}
template <typename Stored>
CHRONICLE_INLINE size_t text_bytes(Stored) {
  return 0;
}
CHRONICLE_INLINE bool stored_whole(std::string_view text) {
  return text.size() <= format::kMaxAttributeText;
}
template <typename Stored>
CHRONICLE_INLINE bool stored_whole(Stored) {
  return true;
}

// Writes one attribute's event into `group`: with add() (checked: the group may have dropped its
// begin), or with add_within_room() once the begin was written (kChecked false).
template <bool kChecked, typename Group>
CHRONICLE_INLINE uint8_t* add_to_group(Group& group, format::EventId id, size_t payload_size) {
  if constexpr (kChecked)
    return group.add(static_cast<uint32_t>(id), payload_size);
  else
    return group.add_within_room(static_cast<uint32_t>(id), payload_size);
}

template <bool kChecked, typename Group, typename Stored>
CHRONICLE_INLINE void add_typed_attribute(Group& group, uint32_t span_site, uint32_t key, Stored value) {
  using Event = TypedAttributeEvent<Stored>;
  if constexpr (std::is_same_v<Stored, std::string_view>) {
    const format::AttributeStringPrefix prefix{span_site, key};
    uint8_t* out = add_to_group<kChecked>(group, Event::id, sizeof prefix + value.size() + 1);
    if (!out) return;
    std::memcpy(out, &prefix, sizeof prefix);
    uint8_t* text = out + sizeof prefix;
    if (!value.empty()) std::memcpy(text, value.data(), value.size());
    // An embedded NUL would end the CTF string early; keep the event's size honest.
    if (!value.empty() && std::memchr(text, '\0', value.size()) != nullptr) [[unlikely]]
      for (size_t i = 0; i < value.size(); ++i)
        if (text[i] == '\0') text[i] = ' ';
    text[value.size()] = '\0';
  } else {
    const typename Event::Payload payload{span_site, key, value};
    if (uint8_t* out = add_to_group<kChecked>(group, Event::id, sizeof payload))
      std::memcpy(out, &payload, sizeof payload);
  }
}

// The group's room is made for the begin and every attribute (its max_bytes), so once the begin
// is written the attributes are too; when it is not, each is counted as the group drops it.
template <typename Group, typename... Stored>
CHRONICLE_INLINE Emitted write_typed_group(Group& group, Site& site, format::EventId event, const uint32_t* ids,
                                           Stored... values) {
  const uint32_t span_site = site.id.load(std::memory_order_relaxed);
  uint8_t* begin = group.add(static_cast<uint32_t>(event), sizeof(format::NamePayload));
  size_t k = 0;
  if (begin) [[likely]] {
    const format::NamePayload payload{span_site};
    std::memcpy(begin, &payload, sizeof payload);
    (add_typed_attribute<false>(group, span_site, ids[k++], values), ...);
  } else {
    (add_typed_attribute<true>(group, span_site, ids[k++], values), ...);
  }
  group.commit();
  return begin ? Emitted::written : Emitted::dropped;
}

template <typename... Stored>
constexpr size_t kTypedGroupBytes =
    format::kExtendedHeaderSize + sizeof(format::NamePayload) +
    (0 + ... + (format::kExtendedHeaderSize + sizeof(typename TypedAttributeEvent<Stored>::Payload)));

// Every case of a typed list, through an EventGroup: a nested trace point, a packet to switch, a
// stopped session, a text; and, through emit_with_attributes, what only it handles (a key not
// interned yet or that cannot be, a text the trace cuts, a group past its limit).
template <typename... Stored>
[[gnu::noinline]] Emitted emit_typed_attributes_in_group(ThreadWriter& writer, Site& site, format::EventId event,
                                                         AttributeKeys& keys, const char* const* names, uint64_t ticks,
                                                         Stored... values) {
  constexpr size_t kCount = sizeof...(Stored);
  constexpr bool kHasText = (std::is_same_v<Stored, std::string_view> || ...);
  constexpr size_t kFixedBytes = kTypedGroupBytes<Stored...>;
  auto general_way = [&] {
    AttributeArgs args;
    size_t k = 0;
    ((args.keys[k] = names[k], args.values[k] = attribute_value(values), ++k), ...);
    args.count = kCount;
    return emit_with_attributes(writer, site, event, keys, args);
  };
  [[maybe_unused]] size_t bytes = kFixedBytes;
  if constexpr (kHasText) {
    bytes += (0 + ... + text_bytes(values));
    if (bytes > kAttributeGroupBytes || !(stored_whole(values) && ...)) [[unlikely]]
      return general_way();
  }
  uint32_t ids[kCount];
  for (size_t i = 0; i < kCount; ++i) {
    ids[i] = keys.ids[i].load(std::memory_order_acquire);
    if (ids[i] == 0) [[unlikely]]
      return general_way();
  }
  if constexpr (kHasText) {
    EventGroup<kAttributeGroupBytes> group(&writer, site.category_index, ticks, bytes);
    return write_typed_group(group, site, event, ids, values...);
  } else {
    EventGroup<kFixedBytes> group(&writer, site.category_index, ticks);
    return write_typed_group(group, site, event, ids, values...);
  }
}

// What a span or an instant (kEvent) with number attributes writes nearly every time, once the
// caller saw its keys interned: its packet has room for the group. The group opens with one
// check and no call (open_if_room), so with no register to save and with its arguments in
// registers for up to two values; anything else goes to the function above, which starts over
// (nothing was written; the keys need no names there).
template <format::EventId kEvent, FixedSizeAttribute... Stored>
[[gnu::noinline]] Emitted emit_with_interned_numbers(ThreadWriter& writer, Site& site, AttributeKeys& keys,
                                                     uint64_t ticks, Stored... values) {
  EventGroup<kTypedGroupBytes<Stored...>> group(&writer, site.category_index, ticks);
  if (!group.open_if_room()) [[unlikely]]
    return emit_typed_attributes_in_group(writer, site, kEvent, keys, nullptr, ticks, values...);
  const uint32_t span_site = site.id.load(std::memory_order_relaxed);
  const format::NamePayload name{span_site};
  std::memcpy(group.add_within_room(static_cast<uint32_t>(kEvent), sizeof name), &name, sizeof name);
  size_t k = 0;
  auto add = [&](auto value) {
    using Event = TypedAttributeEvent<decltype(value)>;
    // Relaxed: the caller's acquire load saw each id already.
    const typename Event::Payload payload{span_site, keys.ids[k++].load(std::memory_order_relaxed), value};
    std::memcpy(group.add_within_room(static_cast<uint32_t>(Event::id), sizeof payload), &payload, sizeof payload);
  };
  (add(values), ...);
  return Emitted::written;
}

template <size_t kCount>
CHRONICLE_INLINE bool keys_interned(const AttributeKeys& keys) {
  for (size_t i = 0; i < kCount; ++i)
    if (keys.ids[i].load(std::memory_order_acquire) == 0) return false;
  return true;
}

template <typename Pairs, size_t... I>
CHRONICLE_INLINE Emitted emit_typed_pairs(ThreadWriter& writer, Site& site, format::EventId event, AttributeKeys& keys,
                                          const Pairs& pairs, std::index_sequence<I...>) {
  static constexpr size_t kCount = sizeof...(I);
  static_assert((std::is_array_v<std::remove_cvref_t<std::tuple_element_t<2 * I, Pairs>>> && ...),
                "attribute keys are string literals");
  if constexpr ((FixedSizeAttribute<std::tuple_element_t<2 * I + 1, Pairs>> && ...)) {
    if (keys_interned<kCount>(keys)) [[likely]] {
      if (event == format::EventId::span_begin)
        return emit_with_interned_numbers<format::EventId::span_begin>(writer, site, keys, read_ticks(),
                                                                       stored_value(std::get<2 * I + 1>(pairs))...);
      if (event == format::EventId::instant)
        return emit_with_interned_numbers<format::EventId::instant>(writer, site, keys, read_ticks(),
                                                                    stored_value(std::get<2 * I + 1>(pairs))...);
    }
  }
  const char* const names[kCount] = {std::get<2 * I>(pairs)...};
  return emit_typed_attributes_in_group(writer, site, event, keys, names, read_ticks(),
                                        stored_value(std::get<2 * I + 1>(pairs))...);
}

template <size_t I, typename... Pairs>
constexpr bool values_typed() {
  if constexpr (I >= sizeof...(Pairs))
    return true;
  else
    return TypedAttribute<std::tuple_element_t<I, std::tuple<Pairs...>>> && values_typed<I + 2, Pairs...>();
}

// The begin of a span or an instant with attributes given as key, value, key, value...
template <typename... Pairs>
CHRONICLE_INLINE Emitted emit_begin_with_attributes(ThreadWriter& writer, Site& site, format::EventId event,
                                                    AttributeKeys& keys, const Pairs&... pairs) {
  if constexpr (values_typed<1, Pairs...>()) {
    static_assert(sizeof...(Pairs) % 2 == 0, "attributes come as key, value pairs");
    static_assert(sizeof...(Pairs) / 2 <= kMaxAttributes, "at most 8 attributes per trace point");
    return emit_typed_pairs(writer, site, event, keys, std::forward_as_tuple(pairs...),
                            std::make_index_sequence<sizeof...(Pairs) / 2>{});
  } else {
    AttributeArgs args;
    add_attributes(args, pairs...);
    return emit_with_attributes(writer, site, event, keys, args);
  }
}
// One attribute of the innermost open span named by `span` (null: the innermost, whatever its
// name) of the calling thread or task. `key` is a site of kind attribute that writer_for() took.
void emit_attribute(Site* span, Site& key, const AttributeValue& value);
// The status of the innermost open span named by `span` (null: the innermost).
void emit_span_status(Site* span, format::SpanStatus status, std::string_view message);

// A scoped span with attributes at its begin: its end is a plain ScopedSpan's.
class ScopedSpanWithArgs {
 public:
  template <typename MakeArgs>
  CHRONICLE_INLINE ScopedSpanWithArgs(Site& site, AttributeKeys& keys, MakeArgs&& make_args) : site_(site) {
    const uint32_t generation = g_generation.load(std::memory_order_acquire);
    if (generation != 0) [[unlikely]] {
      ThreadWriter* writer = writer_for(site, generation);
      if (writer == nullptr) return;  // the category is off: no value is computed
      begun_.record(make_args([&](const auto&... pairs) {
                      return emit_begin_with_attributes(*writer, site, format::EventId::span_begin, keys, pairs...);
                    }),
                    generation);
    }
  }
  CHRONICLE_INLINE ~ScopedSpanWithArgs() { end_span(site_, begun_); }
  ScopedSpanWithArgs(const ScopedSpanWithArgs&) = delete;
  ScopedSpanWithArgs& operator=(const ScopedSpanWithArgs&) = delete;

 private:
  Site& site_;
  SpanBegun begun_;
};

// A scoped span named at run time. Names are interned by text (per category) in a table of
// kMaxDynamicNames names for the life of the process; past it, a span is named "<overflow>"
// (and counted so in the trace).
inline constexpr size_t kMaxDynamicNames = 4096;
inline constexpr char kOverflowName[] = "<overflow>";
// A thread's cached runtime name: one of its table's slots (src/recorder/attributes.cpp).
struct DynamicNameSlot {
  const Site* category_site;
  uint64_t hash;
  Site* site;
  size_t length;
};
// The site named `name` in the category of `category_site`, interned (past kMaxDynamicNames
// names, "<overflow>"); cached per thread. `last`: the slot this call site found last on this
// thread, tried before the name is hashed (a site is mostly given the same few names).
Site& dynamic_site(Site& category_site, std::string_view name, DynamicNameSlot*& last);

class ScopedDynamicSpan {
 public:
  template <typename Name>
  CHRONICLE_INLINE ScopedDynamicSpan(Site& category_site, DynamicNameSlot*& last, const Name& name) {
    const uint32_t generation = g_generation.load(std::memory_order_acquire);
    if (generation != 0) [[unlikely]] {
      ThreadWriter* writer = writer_for(category_site, generation);
      if (writer == nullptr) return;
      // Of the category just checked; interned by dynamic_site() unless a signal handler found this
      // thread inside the registry (counted there). Acquire: the site's category index is set
      // before its id is (by whichever thread interned it).
      Site& site = dynamic_site(category_site, std::string_view(name), last);
      if (site.id.load(std::memory_order_acquire) == 0) [[unlikely]]
        return;
      site_ = &site;
      begun_.record(emit_name_by(writer, site, format::EventId::span_begin), generation);
    }
  }
  CHRONICLE_INLINE ~ScopedDynamicSpan() {
    if (site_) end_span(*site_, begun_);
  }
  ScopedDynamicSpan(const ScopedDynamicSpan&) = delete;
  ScopedDynamicSpan& operator=(const ScopedDynamicSpan&) = delete;

 private:
  Site* site_ = nullptr;
  SpanBegun begun_;
};

}  // namespace chronicle::detail

namespace chronicle {

// Marks the innermost open span of the calling thread or task (as the trace records it: a span
// whose category is off is not there) as failed, with `message`. Its end is unchanged.
void fail_current_span(std::string_view message);

}  // namespace chronicle
