// The task layer's slow paths: a thread's first task id, and the interning of task names.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "chronicle/detail/task_writer.hpp"

namespace chronicle::detail {

thread_local constinit TaskThreadState t_tasks{};
thread_local constinit TaskNameCacheEntry t_task_names[kTaskNameCacheSize]{};
constinit Site g_task_site{"task", "task", __FILE__, __LINE__, static_cast<uint8_t>(format::SiteKind::task)};

namespace {

// Thread indexes start at 1 so that no id is 0. Taken once per thread: the only shared write
// in making task ids.
std::atomic<uint64_t> g_next_thread_index{1};

// Names are interned once per distinct (strings, line) and kept for the life of the process,
// like the sites of the trace macros: the recorder keeps pointers to them.
struct NameTable {
  std::mutex mutex;
  std::map<std::tuple<const void*, const void*, const void*, uint32_t>, Site*> by_key;
  std::map<std::string, Site*> by_text;  // distinct keys may spell the same name
};

NameTable& names() {
  static NameTable* table = new NameTable;
  return *table;
}

// "chronicle::task<int> {anonymous}::read(int) [with T = int]" -> "read"'s qualified name
// without the anonymous namespace: "read". What is left is what a person would call it.
std::string short_function_name(std::string_view signature) {
  size_t open = std::string_view::npos;
  int depth = 0;
  for (size_t i = 0; i < signature.size(); ++i) {
    const char c = signature[i];
    if (c == '<')
      ++depth;
    else if (c == '>')
      --depth;
    else if (c == '(' && depth == 0 && signature.substr(0, i).find("operator") == std::string_view::npos) {
      open = i;
      break;
    }
  }
  std::string_view head = signature.substr(0, open);
  depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < head.size(); ++i) {
    const char c = head[i];
    if (c == '<')
      ++depth;
    else if (c == '>')
      --depth;
    else if (c == ' ' && depth == 0)
      start = i + 1;  // after the return type
  }
  std::string name(head.substr(start));
  for (std::string_view anonymous : {"{anonymous}::", "(anonymous namespace)::"}) {
    for (size_t at = name.find(anonymous); at != std::string::npos; at = name.find(anonymous))
      name.erase(at, anonymous.size());
  }
  return name.empty() ? std::string(signature) : name;
}

uint32_t intern(const std::tuple<const void*, const void*, const void*, uint32_t>& key, std::string name,
                const char* file, uint32_t line) {
  NameTable& table = names();
  Site* site = nullptr;
  {
    std::lock_guard lock(table.mutex);
    auto found = table.by_key.find(key);
    if (found != table.by_key.end()) {
      site = found->second;
    } else {
      auto& by_text = table.by_text[name + '\0' + (file ? file : "") + '\0' + std::to_string(line)];
      if (!by_text) {
        // Leaked on purpose: the session registry keeps the site for the process's life.
        char* stored = new char[name.size() + 1];
        std::memcpy(stored, name.c_str(), name.size() + 1);
        by_text = new Site{"task", stored, file, line, static_cast<uint8_t>(format::SiteKind::task)};
      }
      site = by_text;
      table.by_key.emplace(key, site);
    }
  }
  // Outside our lock: intern_site takes the session registry's.
  const uint32_t id = site->id.load(std::memory_order_acquire);
  return id != 0 ? id : intern_site(*site);
}

}  // namespace

uint64_t first_task_id_of_thread() {
  const uint64_t index = g_next_thread_index.fetch_add(1, std::memory_order_relaxed);
  return (index << kTaskCounterBits) | 1;
}

uint32_t intern_task_name_slow(const char* function, const char* file, uint32_t line) {
  return intern({function, file, nullptr, line}, short_function_name(function ? function : "?"), file, line);
}

uint32_t intern_operation_name_slow(const char* object, const char* operation, const char* composed) {
  std::string name = std::string(object ? object : "?") + "." + (operation ? operation : "?");
  if (composed && *composed) name += std::string(" in ") + composed;
  return intern({object, operation, composed, kOperationNameLine}, std::move(name), nullptr, 0);
}

uint32_t intern_literal_name_slow(const char* name) {
  return intern({name, nullptr, nullptr, kLiteralNameLine}, name ? name : "?", nullptr, 0);
}

void emit_task_resolve(ThreadWriter& writer, uint64_t task, uint64_t resolver, format::TaskOutcome outcome,
                       const char* text, size_t length) {
  const format::TaskResolvePrefix fixed{task, resolver, static_cast<uint8_t>(outcome)};
  emit_with_text(writer, g_task_site.category_index, format::EventId::task_resolve, &fixed, sizeof fixed, text, length);
}

void emit_task_label(ThreadWriter& writer, uint64_t task, const char* text, size_t length) {
  const format::TaskLabelPrefix fixed{task};
  emit_with_text(writer, g_task_site.category_index, format::EventId::task_label, &fixed, sizeof fixed, text, length);
}

}  // namespace chronicle::detail
