// A session's definitions (sites, threads, categories) in its strings packet, and the interning
// of sites and categories, which every session of the process shares.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

#include "chronicle/detail/writer.hpp"
#include "recorder/session_internal.hpp"
#include "recorder/test_pause.hpp"

namespace chronicle {
namespace session_internal {

// Appends one definition event (extended header) to the strings packet. Registry mutex held.
void write_definition(Session& session, format::DefinitionId id, const std::string& payload) {
  auto* packet = reinterpret_cast<PacketHeader*>(session.file.base + session.header->strings_offset);
  const uint64_t used = packet->content_size_bits.load(std::memory_order_relaxed) / 8;
  const size_t size = format::kExtendedHeaderSize + payload.size();
  if (used + size > session.header->strings_size) {
    session.header->strings_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t ticks = std::max(detail::read_ticks(), session.strings_last_ticks);
  session.strings_last_ticks = ticks;
  uint8_t* out = session.file.base + session.header->strings_offset + used;
  const uint32_t event_id = static_cast<uint32_t>(id);
  out[0] = static_cast<uint8_t>(format::kExtendedId);
  std::memcpy(out + 1, &event_id, 4);
  std::memcpy(out + 5, &ticks, 8);
  std::memcpy(out + format::kExtendedHeaderSize, payload.data(), payload.size());
  packet->timestamp_end.store(ticks, std::memory_order_relaxed);
  packet->content_size_bits.store((used + size) * 8, std::memory_order_release);
}

void append_string(std::string& out, std::string_view text) {
  out.append(text.data(), text.size());
  out.push_back('\0');
}

void define_site(Session& session, const Site& site, uint32_t id) {
  std::string payload;
  append_value(payload, id);
  append_value(payload, site.kind);
  append_string(payload, site.category);
  append_string(payload, site.name);
  append_string(payload, site.file ? site.file : "");
  append_value(payload, site.line);
  write_definition(session, format::DefinitionId::site, payload);
}

void define_thread(Session& session, int32_t thread_id, std::string_view name) {
  std::string payload;
  append_value(payload, static_cast<uint32_t>(thread_id));
  append_string(payload, name);
  write_definition(session, format::DefinitionId::thread, payload);
}

}  // namespace session_internal

namespace {

uint16_t category_index(Registry& reg, std::string_view category) {
  for (size_t i = 0; i < reg.categories.size(); ++i)
    if (reg.categories[i] == category) return static_cast<uint16_t>(i);
  if (reg.categories.size() >= format::kMaxCategories) return format::kMaxCategories - 1;  // shares the last
  reg.categories.emplace_back(category);
  return static_cast<uint16_t>(reg.categories.size() - 1);
}

}  // namespace

namespace session_internal {

// Registry mutex held. Category `index` takes the state the session's rules give it; the first
// time, its name goes into the mapping's category table.
void set_category_state(Session& session, Registry& reg, uint16_t index) {
  const uint8_t state = session.rules.state_of(reg.categories[index]);
  ShmHeader& header = *session.header;
  header.category_enabled[index].store(state, std::memory_order_relaxed);
  detail::g_category_state[index].store(state, std::memory_order_relaxed);
  if (index < header.category_count.load(std::memory_order_relaxed)) return;
  auto* table = reinterpret_cast<format::CategoryEntry*>(session.file.base + header.categories_offset);
  const std::string& name = reg.categories[index];
  const size_t length = std::min(name.size(), format::kCategoryNameSize - 1);
  std::memcpy(table[index].name, name.data(), length);
  table[index].name[length] = '\0';
  header.category_count.store(index + 1u, std::memory_order_release);
}

}  // namespace session_internal

namespace detail {

uint32_t intern_site_locked(Registry& reg, Site& site);

uint32_t intern_site(Site& site) {
  SlowPathScope scope;
  if (!scope.entered()) {
    count_nested_drop(t_writer, format::kNoCategory);
    return 0;
  }
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  return intern_site_locked(reg, site);
}

// Registry mutex held.
uint32_t intern_site_locked(Registry& reg, Site& site) {
  uint32_t id = site.id.load(std::memory_order_relaxed);
  if (id != 0) return id;
  site.category_index = category_index(reg, site.category);
  reg.sites.push_back(&site);
  id = static_cast<uint32_t>(reg.sites.size());
  recorder::test_pause(recorder::TestPoint::site_interning);
  if (Session* session = reg.session.get()) {
    set_category_state(*session, reg, site.category_index);
    define_site(*session, site, id);
  }
  site.id.store(id, std::memory_order_release);
  return id;
}

}  // namespace detail
}  // namespace chronicle
