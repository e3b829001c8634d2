// Attributes, status and runtime names (chronicle/detail/attributes.hpp).
#include "chronicle/detail/attributes.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "format/attribute_text.hpp"

namespace chronicle {
namespace detail {

void emit_text_at(ThreadWriter& writer, uint16_t category, format::EventId event, const void* fixed, size_t fixed_size,
                  const char* text, size_t length, uint64_t ticks);

namespace {

// The status events of fail_current_span and the keys of nothing in particular are of this
// category (its events are counted there).
constinit Site g_status_site{"chronicle", "span status", __FILE__, __LINE__,
                             static_cast<uint8_t>(format::SiteKind::attribute)};

std::mutex& key_mutex() {
  static std::mutex* mutex = new std::mutex;
  return *mutex;
}

// The site of key `index` of a call site's keys, in the category of `span`; created once and
// kept for the life of the process (the session registry keeps pointers to sites).
uint32_t key_id(Site& span, AttributeKeys& keys, size_t index, const char* key) {
  const uint32_t id = keys.ids[index].load(std::memory_order_acquire);
  if (id != 0) [[likely]]
    return id;
  Site* site = nullptr;
  {
    std::lock_guard lock(key_mutex());
    if (const uint32_t raced = keys.ids[index].load(std::memory_order_acquire); raced != 0) return raced;
    site = new Site{span.category, key, span.file, span.line, static_cast<uint8_t>(format::SiteKind::attribute)};
  }
  const uint32_t interned = intern_site(*site);
  keys.ids[index].store(interned, std::memory_order_release);
  return interned;
}

template <typename Payload>
void write_fixed(ThreadWriter& writer, uint16_t category, format::EventId event, const Payload& payload,
                 uint64_t ticks) {
  uint8_t* out = begin_event(writer, category, static_cast<uint32_t>(event), sizeof payload, ticks);
  if (!out) return;
  std::memcpy(out, &payload, sizeof payload);
  commit_event(writer, category, out + sizeof payload, ticks);
}

void write_attribute(ThreadWriter& writer, uint16_t category, uint32_t span_site, uint32_t key,
                     const AttributeValue& value, uint64_t ticks) {
  switch (value.type) {
    case format::EventId::attribute_uint:
      return write_fixed(writer, category, value.type, format::AttributeUintPayload{span_site, key, value.as_uint},
                         ticks);
    case format::EventId::attribute_float:
      return write_fixed(writer, category, value.type, format::AttributeFloatPayload{span_site, key, value.as_float},
                         ticks);
    case format::EventId::attribute_bool:
      return write_fixed(writer, category, value.type,
                         format::AttributeBoolPayload{span_site, key, static_cast<uint8_t>(value.as_bool)}, ticks);
    case format::EventId::attribute_string: {
      std::string scratch;
      const std::string_view text = format::stored_attribute_text(value.text(), scratch);
      const format::AttributeStringPrefix fixed{span_site, key};
      return emit_text_at(writer, category, value.type, &fixed, sizeof fixed, text.data(), text.size(), ticks);
    }
    default:
      return write_fixed(writer, category, format::EventId::attribute_int,
                         format::AttributeIntPayload{span_site, key, value.as_int}, ticks);
  }
}

}  // namespace

namespace {

using AttributeGroup = EventGroup<kAttributeGroupBytes>;

// The bytes of attribute `value`'s event at most (an extended header); a string's text as
// stored is `text` (split_attribute_text, taken once by the caller).
CHRONICLE_INLINE size_t attribute_event_bytes(const AttributeValue& value, const format::StoredAttributeText& text) {
  switch (value.type) {
    case format::EventId::attribute_uint:
      return format::kExtendedHeaderSize + sizeof(format::AttributeUintPayload);
    case format::EventId::attribute_float:
      return format::kExtendedHeaderSize + sizeof(format::AttributeFloatPayload);
    case format::EventId::attribute_bool:
      return format::kExtendedHeaderSize + sizeof(format::AttributeBoolPayload);
    case format::EventId::attribute_string:
      return format::kExtendedHeaderSize + sizeof(format::AttributeStringPrefix) + text.size() + 1;
    default:
      return format::kExtendedHeaderSize + sizeof(format::AttributeIntPayload);
  }
}

template <typename Payload>
CHRONICLE_INLINE void add_fixed(AttributeGroup& group, format::EventId event, const Payload& payload) {
  if (uint8_t* out = group.add(static_cast<uint32_t>(event), sizeof payload))
    std::memcpy(out, &payload, sizeof payload);
}

[[gnu::noinline]] void add_string(AttributeGroup& group, uint32_t span_site, uint32_t key,
                                  const format::StoredAttributeText& stored) {
  const format::AttributeStringPrefix fixed{span_site, key};
  uint8_t* out = group.add(static_cast<uint32_t>(format::EventId::attribute_string), sizeof fixed + stored.size() + 1);
  if (!out) return;
  std::memcpy(out, &fixed, sizeof fixed);
  uint8_t* text_out = out + sizeof fixed;
  std::memcpy(text_out, stored.kept.data(), stored.kept.size());
  // An embedded NUL would end the CTF string early; keep the event's size honest.
  std::replace(text_out, text_out + stored.kept.size(), uint8_t{'\0'}, uint8_t{' '});
  if (stored.cut)
    std::memcpy(text_out + stored.kept.size(), format::kTruncatedMarker, sizeof format::kTruncatedMarker - 1);
  text_out[stored.size()] = '\0';
}

CHRONICLE_INLINE void add_attribute(AttributeGroup& group, uint32_t span_site, uint32_t key,
                                    const AttributeValue& value, const format::StoredAttributeText& text) {
  switch (value.type) {
    case format::EventId::attribute_uint:
      return add_fixed(group, value.type, format::AttributeUintPayload{span_site, key, value.as_uint});
    case format::EventId::attribute_float:
      return add_fixed(group, value.type, format::AttributeFloatPayload{span_site, key, value.as_float});
    case format::EventId::attribute_bool:
      return add_fixed(group, value.type,
                       format::AttributeBoolPayload{span_site, key, static_cast<uint8_t>(value.as_bool)});
    case format::EventId::attribute_string:
      return add_string(group, span_site, key, text);
    default:
      return add_fixed(group, format::EventId::attribute_int,
                       format::AttributeIntPayload{span_site, key, value.as_int});
  }
}

// Strings too long for one group: the begin, then each attribute at the begin's time, as events
// of their own. A ring that fills between them loses (and counts) the attributes that did not
// fit, never the begin alone with attributes of another span, as an attribute is written only
// after its span's begin was.
Emitted emit_one_by_one(ThreadWriter& writer, Site& site, format::EventId event, const uint32_t* ids,
                        const AttributeArgs& args) {
  uint64_t ticks = read_ticks();
  const uint32_t span_site = site.id.load(std::memory_order_relaxed);
  uint8_t* out =
      begin_event(writer, site.category_index, static_cast<uint32_t>(event), sizeof(format::NamePayload), ticks);
  if (!out) return Emitted::dropped;
  const format::NamePayload payload{span_site};
  std::memcpy(out, &payload, sizeof payload);
  commit_event(writer, site.category_index, out + sizeof payload, ticks);
  ticks = writer.last_ticks;  // the begin's, never moved back
  for (size_t i = 0; i < args.count; ++i) {
    if (ids[i] == 0) continue;
    write_attribute(writer, site.category_index, span_site, ids[i], args.values[i], ticks);
  }
  return Emitted::written;
}

}  // namespace

// The begin and its attributes as one group, at one time: one entry into the trace point, one
// commit; a reader sees all of them or none, and a loss counts each.
Emitted emit_with_attributes(ThreadWriter& writer, Site& site, format::EventId event, AttributeKeys& keys,
                             const AttributeArgs& args) {
  uint32_t ids[kMaxAttributes];
  format::StoredAttributeText texts[kMaxAttributes];  // strings' stored texts, split once
  size_t bytes = format::kExtendedHeaderSize + sizeof(format::NamePayload);
  for (size_t i = 0; i < args.count; ++i) {
    ids[i] = key_id(site, keys, i, args.keys[i]);
    if (args.values[i].type == format::EventId::attribute_string)
      texts[i] = format::split_attribute_text(args.values[i].text());
    if (ids[i] != 0) bytes += attribute_event_bytes(args.values[i], texts[i]);
  }
  if (bytes > kAttributeGroupBytes) [[unlikely]]
    return emit_one_by_one(writer, site, event, ids, args);
  const uint32_t span_site = site.id.load(std::memory_order_relaxed);
  AttributeGroup group(&writer, site.category_index, read_ticks(), bytes);
  uint8_t* begin = group.add(static_cast<uint32_t>(event), sizeof(format::NamePayload));
  if (begin) {
    const format::NamePayload payload{span_site};
    std::memcpy(begin, &payload, sizeof payload);
  }
  for (size_t i = 0; i < args.count; ++i) {
    if (ids[i] != 0) add_attribute(group, span_site, ids[i], args.values[i], texts[i]);
  }
  group.commit();
  return begin ? Emitted::written : Emitted::dropped;
}

void emit_attribute(Site* span, Site& key, const AttributeValue& value) {
  const uint32_t generation = g_generation.load(std::memory_order_acquire);
  if (generation == 0) return;
  ThreadWriter* writer = writer_for(key, generation);
  if (!writer) return;
  write_attribute(*writer, key.category_index, span ? span->id.load(std::memory_order_relaxed) : 0,
                  key.id.load(std::memory_order_relaxed), value, read_ticks());
}

void emit_span_status(Site* span, format::SpanStatus status, std::string_view message) {
  const uint32_t generation = g_generation.load(std::memory_order_acquire);
  if (generation == 0) return;
  Site& site = span ? *span : g_status_site;
  ThreadWriter* writer = nullptr;
  if (span) {  // like its end: written even if the span's category was switched off since
    writer = &t_writer;
    if (writer->generation != generation && !attach_thread(*writer, generation)) return;
  } else {
    writer = writer_for(site, generation);
    if (!writer) return;
  }
  std::string scratch;
  const std::string_view text = format::stored_attribute_text(message, scratch);
  const format::SpanStatusPrefix fixed{span ? span->id.load(std::memory_order_relaxed) : 0,
                                       static_cast<uint8_t>(status)};
  emit_text_at(*writer, site.category_index, format::EventId::span_status, &fixed, sizeof fixed, text.data(),
               text.size(), read_ticks());
}

void mark_span_unwound(Site& site) {
  emit_span_status(&site, format::SpanStatus::error, "an exception left the span");
}

// ---- runtime names ------------------------------------------------------------------------

namespace {

struct DynamicNames {
  std::mutex mutex;
  std::map<std::pair<std::string, std::string>, Site*> by_text;  // (category, name)
  std::map<std::string, Site*> overflow;                         // by category
};

DynamicNames& dynamic_names() {
  static DynamicNames* names = new DynamicNames;
  return *names;
}

// A word at a time: this runs on every runtime-named span.
uint64_t hash_name(const Site* category_site, std::string_view name) {
  constexpr uint64_t kMultiplier = 0x9e3779b97f4a7c15ULL;
  uint64_t hash = reinterpret_cast<uintptr_t>(category_site) ^ (name.size() * kMultiplier);
  size_t at = 0;
  for (; at + sizeof(uint64_t) <= name.size(); at += sizeof(uint64_t)) {
    uint64_t word;
    std::memcpy(&word, name.data() + at, sizeof word);
    hash = (hash ^ word) * kMultiplier;
    hash ^= hash >> 32;
  }
  if (at < name.size()) {
    // The last 8 bytes in one load where the name is that long: a copy of fewer bytes into a
    // word stalls the load that follows it (no store forwarding).
    uint64_t tail = 0;
    if (name.size() >= sizeof tail)
      std::memcpy(&tail, name.data() + name.size() - sizeof tail, sizeof tail);
    else
      for (size_t i = at; i < name.size(); ++i) tail = tail << 8 | static_cast<uint8_t>(name[i]);
    hash = (hash ^ tail) * kMultiplier;
  }
  return hash ^ (hash >> 29);
}

// Whether a's n bytes are b's, a word at a time, inline: names are short, and a call to memcmp
// was a sixth of a runtime-named span's time.
bool same_text(const char* a, const char* b, size_t n) {
  if (n < sizeof(uint64_t)) return n == 0 || std::memcmp(a, b, n) == 0;
  uint64_t wa, wb;
  for (size_t at = 0; at + sizeof wa < n; at += sizeof wa) {
    std::memcpy(&wa, a + at, sizeof wa);
    std::memcpy(&wb, b + at, sizeof wb);
    if (wa != wb) return false;
  }
  std::memcpy(&wa, a + n - sizeof wa, sizeof wa);  // the last word, overlapping the one before
  std::memcpy(&wb, b + n - sizeof wb, sizeof wb);
  return wa == wb;
}

// A thread's recent runtime names: trivially constructed, so the thread_local needs no guard.
constexpr size_t kDynamicNameCacheSize = 64;
thread_local constinit DynamicNameSlot t_dynamic_names[kDynamicNameCacheSize]{};

char* copy_text(std::string_view text) {
  char* stored = new char[text.size() + 1];  // kept for the process's life, as sites are
  std::memcpy(stored, text.data(), text.size());
  stored[text.size()] = '\0';
  return stored;
}

Site& intern_dynamic_name(Site& category_site, std::string_view name) {
  DynamicNames& names = dynamic_names();
  std::lock_guard lock(names.mutex);
  const std::string category = category_site.category;
  auto found = names.by_text.find({category, std::string(name)});
  if (found != names.by_text.end()) return *found->second;
  if (names.by_text.size() >= kMaxDynamicNames) {
    Site*& overflow = names.overflow[category];
    if (!overflow)
      overflow = new Site{category_site.category,
                          kOverflowName,
                          category_site.file,
                          category_site.line,
                          static_cast<uint8_t>(format::SiteKind::span),
                          category_site.level};
    return *overflow;
  }
  Site* site = new Site{category_site.category,
                        copy_text(name),
                        category_site.file,
                        category_site.line,
                        static_cast<uint8_t>(format::SiteKind::span),
                        category_site.level};
  names.by_text.emplace(std::pair{category, std::string(name)}, site);
  return *site;
}

}  // namespace

Site& dynamic_site(Site& category_site, std::string_view name, DynamicNameSlot*& last) {
  // The call site's last slot holds its name unless another name took that slot since.
  if (last != nullptr && last->category_site == &category_site && last->length == name.size() &&
      same_text(last->site->name, name.data(), name.size())) [[likely]]
    return *last->site;
  const uint64_t hash = hash_name(&category_site, name);
  DynamicNameSlot& slot = t_dynamic_names[hash % kDynamicNameCacheSize];
  if (slot.category_site == &category_site && slot.hash == hash && slot.length == name.size() &&
      same_text(slot.site->name, name.data(), name.size())) [[likely]] {
    last = &slot;
    return *slot.site;
  }
  Site& site = intern_dynamic_name(category_site, name);
  if (site.id.load(std::memory_order_acquire) == 0 && intern_site(site) == 0) return site;  // not cached
  // An overflowed name is not cached: its slot would always miss on the text.
  if (site.name != std::string_view(kOverflowName) || name == kOverflowName) {
    slot = DynamicNameSlot{&category_site, hash, &site, name.size()};
    last = &slot;
  }
  return site;
}

}  // namespace detail

void fail_current_span(std::string_view message) {
  detail::emit_span_status(nullptr, format::SpanStatus::error, message);
}

}  // namespace chronicle
