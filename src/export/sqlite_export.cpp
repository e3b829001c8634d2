#include "export/sqlite_export.hpp"

#include <fmt/format.h>
#include <sqlite3.h>

#include <filesystem>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <variant>

#include "analysis/counter_series.hpp"
#include "format/metadata.hpp"
#include "format/output_file.hpp"

namespace chronicle::exports {
namespace {

constexpr std::string_view kSchema = R"sql(
CREATE TABLE processes (process INTEGER PRIMARY KEY, pid INTEGER, name TEXT, hostname TEXT,
  trace_uuid TEXT, directory TEXT, events_discarded INTEGER);
CREATE TABLE strings (process INTEGER, site INTEGER, kind TEXT, category TEXT, name TEXT,
  file TEXT, line INTEGER, PRIMARY KEY (process, site));
CREATE TABLE threads (process INTEGER, thread INTEGER, name TEXT, events_discarded INTEGER,
  PRIMARY KEY (process, thread));
CREATE TABLE spans (span INTEGER PRIMARY KEY, process INTEGER, thread INTEGER, site INTEGER,
  category TEXT, name TEXT, begin_ns INTEGER, end_ns INTEGER, duration_ns INTEGER, depth INTEGER,
  parent INTEGER, task INTEGER, unfinished INTEGER);
CREATE TABLE span_attributes (span INTEGER, key TEXT, type TEXT, value);
CREATE TABLE span_errors (span INTEGER PRIMARY KEY, message TEXT);
CREATE TABLE tasks (process INTEGER, task INTEGER, task_text TEXT, kind TEXT, name TEXT, label TEXT,
  parent INTEGER, created_ns INTEGER, created_thread INTEGER, resolved_ns INTEGER, outcome TEXT,
  outcome_text TEXT, resolver INTEGER, busy_ns INTEGER, runs INTEGER, parent_span INTEGER,
  PRIMARY KEY (process, task));
CREATE TABLE task_runs (process INTEGER, task INTEGER, thread INTEGER, begin_ns INTEGER, end_ns INTEGER,
  duration_ns INTEGER, unfinished INTEGER);
CREATE TABLE edges (process INTEGER, kind TEXT, from_task INTEGER, to_task INTEGER, at_ns INTEGER);
CREATE TABLE counters (process INTEGER, thread INTEGER, site INTEGER, category TEXT, name TEXT,
  at_ns INTEGER, value NUMERIC, total NUMERIC);
CREATE TABLE notes (process INTEGER, thread INTEGER, site INTEGER, kind TEXT, category TEXT, name TEXT,
  text TEXT, at_ns INTEGER, span INTEGER, task INTEGER);
)sql";

// Made after the rows are in: building an index once is faster than keeping it up to date.
constexpr std::string_view kIndexes = R"sql(
CREATE INDEX spans_by_parent ON spans (parent);
CREATE INDEX spans_by_name ON spans (name, duration_ns);
CREATE INDEX spans_by_thread_time ON spans (process, thread, begin_ns);
CREATE INDEX tasks_by_outcome ON tasks (outcome);
CREATE INDEX tasks_by_parent ON tasks (process, parent);
CREATE INDEX task_runs_by_task ON task_runs (process, task);
CREATE INDEX edges_by_from ON edges (process, from_task);
CREATE INDEX edges_by_to ON edges (process, to_task);
CREATE INDEX counters_by_name_time ON counters (name, at_ns);
CREATE INDEX notes_by_task ON notes (process, task);
CREATE INDEX notes_by_span ON notes (span);
CREATE INDEX span_attributes_by_key ON span_attributes (key, value);
)sql";

using Value = std::variant<std::nullptr_t, int64_t, double, std::string_view>;

class Database {
 public:
  // Opens the empty file `file` made (its temporary name: SQLite opens files by name).
  explicit Database(const format::PrivateFile& file) : path_(file.path()) {
    if (sqlite3_open_v2(file.temporary_path().c_str(), &db_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_EXRESCODE, nullptr) != SQLITE_OK)
      fail("cannot open");
  }
  ~Database() {
    for (auto& [sql, statement] : statements_) sqlite3_finalize(statement);
    sqlite3_close(db_);
  }
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  void execute(std::string_view sql) {
    char* message = nullptr;
    if (sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
      const std::string reason = message ? message : sqlite3_errmsg(db_);
      sqlite3_free(message);
      throw std::runtime_error(fmt::format("{}: {}", path_, reason));
    }
  }

  void insert(const char* sql, std::initializer_list<Value> values) {
    sqlite3_stmt*& statement = statements_[sql];
    if (!statement && sqlite3_prepare_v2(db_, sql, -1, &statement, nullptr) != SQLITE_OK) fail("cannot prepare");
    int index = 1;
    for (const Value& value : values) {
      int result = SQLITE_OK;
      if (const auto* number = std::get_if<int64_t>(&value))
        result = sqlite3_bind_int64(statement, index, *number);
      else if (const auto* real = std::get_if<double>(&value))
        result = sqlite3_bind_double(statement, index, *real);
      else if (const auto* text = std::get_if<std::string_view>(&value))
        result = sqlite3_bind_text(statement, index, text->data(), static_cast<int>(text->size()), SQLITE_TRANSIENT);
      else
        result = sqlite3_bind_null(statement, index);
      if (result != SQLITE_OK) fail("cannot bind");
      ++index;
    }
    if (sqlite3_step(statement) != SQLITE_DONE) fail("cannot insert");
    sqlite3_reset(statement);
  }

 private:
  [[noreturn]] void fail(const char* what) {
    throw std::runtime_error(fmt::format("{}: {}: {}", path_, what, db_ ? sqlite3_errmsg(db_) : "out of memory"));
  }
  std::string path_;
  sqlite3* db_ = nullptr;
  std::map<const char*, sqlite3_stmt*> statements_;
};

// Task ids are unsigned; SQLite integers are signed: the same 64 bits.
int64_t task_value(model::TaskId id) {
  return static_cast<int64_t>(id);
}
Value optional_task(model::TaskId id) {
  return id == 0 ? Value(nullptr) : Value(task_value(id));
}

std::string_view site_kind_name(format::SiteKind kind) {
  switch (kind) {
    case format::SiteKind::span:
      return "span";
    case format::SiteKind::instant:
      return "instant";
    case format::SiteKind::note:
      return "note";
    case format::SiteKind::counter:
      return "counter";
    case format::SiteKind::task:
      return "task";
    case format::SiteKind::attribute:
      return "attribute";
    default:
      return "metric";
  }
}

std::string_view edge_kind_column(model::EdgeKind kind) {
  switch (kind) {
    case model::EdgeKind::created_by:
      return "created_by";
    case model::EdgeKind::waits_on:
      return "waits_on";
    case model::EdgeKind::resolved_by:
      return "resolved_by";
  }
  return "?";
}

class SqliteWriter {
 public:
  explicit SqliteWriter(Database& db) : db_(db) {}

  void write_trace(const reader::Trace& trace, int64_t process, ProgressCounter& progress) {
    trace_ = &trace;
    process_ = process;
    const model::TaskGraph graph = build_task_graph(trace, progress);
    const auto& description = trace.description();
    const std::string uuid = format::uuid_to_string(description.uuid);
    db_.insert("INSERT INTO processes VALUES (?,?,?,?,?,?,?)",
               {process, int64_t{description.pid}, description.process_name, description.hostname, uuid,
                trace.directory(), static_cast<int64_t>(trace.events_discarded())});
    for (const reader::Site& site : trace.sites()) {
      if (site.id == 0) continue;
      db_.insert("INSERT INTO strings VALUES (?,?,?,?,?,?,?)",
                 {process, int64_t{site.id}, site_kind_name(site.kind), site.category, site.name, site.file,
                  int64_t{site.line}});
    }
    std::map<uint32_t, uint64_t> discarded;
    for (const auto& stream : trace.streams()) discarded[stream.thread_id] += stream.events_discarded;
    for (const auto& [thread_id, count] : discarded)
      db_.insert("INSERT INTO threads VALUES (?,?,?,?)",
                 {process, int64_t{thread_id}, trace.thread_name(thread_id), static_cast<int64_t>(count)});
    parent_spans_.clear();
    write_events(graph, progress);
    write_tasks(graph);
    span_offset_ += pending_offset_;
  }

 private:
  int64_t ns(uint64_t ticks) const { return trace_->to_unix_ns(ticks); }
  Value optional_ns(const std::optional<uint64_t>& ticks) const { return ticks ? Value(ns(*ticks)) : Value(nullptr); }
  int64_t span_id(uint64_t sequence) const { return static_cast<int64_t>(span_offset_ + sequence); }

  void write_tasks(const model::TaskGraph& graph) {
    for (const model::Task& task : graph.tasks()) {
      const std::string id_text = model::task_id_text(task.id);
      db_.insert(
          "INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
          {process_, task_value(task.id), id_text, format::task_kind_name(task.kind), task.name,
           task.label.empty() ? Value(nullptr) : Value(std::string_view(task.label)), optional_task(task.parent),
           optional_ns(task.created), task.created ? Value(int64_t{task.created_on_thread}) : Value(nullptr),
           optional_ns(task.resolved), task.resolved ? Value(format::task_outcome_name(task.outcome)) : Value(nullptr),
           task.outcome_text.empty() ? Value(nullptr) : Value(std::string_view(task.outcome_text)),
           optional_task(task.resolver == task.id ? 0 : task.resolver), ns(task.busy_ticks()) - ns(0),
           static_cast<int64_t>(task.runs.size()), parent_span_of(task.id)});
      for (const model::RunInterval& run : task.runs)
        db_.insert("INSERT INTO task_runs VALUES (?,?,?,?,?,?,?)",
                   {process_, task_value(task.id), int64_t{run.thread_id}, ns(run.begin), ns(run.end),
                    ns(run.end) - ns(run.begin), int64_t{!run.ended}});
    }
    for (const model::Edge& edge : graph.edges())
      db_.insert("INSERT INTO edges VALUES (?,?,?,?,?)",
                 {process_, edge_kind_column(edge.kind), task_value(edge.from), task_value(edge.to), ns(edge.ticks)});
  }

  // The span open where the task was created (its parent in the exports' one rule), if any.
  Value parent_span_of(model::TaskId task) const {
    const auto found = parent_spans_.find(task);
    return found == parent_spans_.end() ? Value(nullptr) : Value(span_id(found->second));
  }

  void write_span(const reader::PairedSpan& span) {
    const reader::Site* site = trace_->site(span.site_id);
    db_.insert("INSERT INTO spans VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
               {span_id(span.sequence), process_, int64_t{span.thread_id}, int64_t{span.site_id},
                site ? Value(std::string_view(site->category)) : Value(nullptr),
                site ? Value(std::string_view(site->name)) : Value(nullptr), ns(span.begin), ns(span.end),
                ns(span.end) - ns(span.begin), int64_t{span.depth},
                span.parent_sequence ? Value(span_id(span.parent_sequence)) : Value(nullptr), optional_task(span.task),
                int64_t{!span.ended}});
    for (const reader::SpanAttribute& attribute : span.attributes)
      db_.insert("INSERT INTO span_attributes VALUES (?,?,?,?)",
                 {span_id(span.sequence), std::string_view(attribute.key), attribute_type(attribute),
                  attribute_value(attribute)});
    if (span.failed)
      db_.insert("INSERT INTO span_errors VALUES (?,?)",
                 {span_id(span.sequence), std::string_view(span.status_message)});
  }

  // SQLite's integers are int64: a uint64 past its range is its decimal text.
  static std::string_view attribute_type(const reader::SpanAttribute& attribute) {
    using Type = reader::SpanAttribute::Type;
    switch (attribute.type) {
      case Type::uint64:
        return "uint64";
      case Type::float64:
        return "double";
      case Type::boolean:
        return "bool";
      case Type::string:
        return "string";
      case Type::int64:
        break;
    }
    return "int64";
  }
  Value attribute_value(const reader::SpanAttribute& attribute) {
    using Type = reader::SpanAttribute::Type;
    switch (attribute.type) {
      case Type::uint64:
        if (attribute.uint_value <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(attribute.uint_value);
        uint_text_ = std::to_string(attribute.uint_value);
        return std::string_view(uint_text_);
      case Type::float64:
        return attribute.float_value;
      case Type::string:
        return std::string_view(attribute.text);
      case Type::int64:
      case Type::boolean:
        break;
    }
    return attribute.int_value;
  }
  std::string uint_text_;

  void write_events(const model::TaskGraph& graph, ProgressCounter& progress) {
    reader::SpanPairing spans(*trace_);
    uint64_t last_sequence = 0;
    analysis::CounterReader counters(*trace_);
    trace_->for_each_event(spans, [&](const reader::Event& event) {
      progress.count();
      switch (event.type) {
        case format::EventId::span_begin:
          last_sequence = event.span->sequence;
          break;
        case format::EventId::span_end:
          if (event.span) write_span(*event.span);
          break;
        case format::EventId::task_create:
          if (const reader::PairedSpan* open = spans.innermost_on(event.thread_id))
            parent_spans_[event.task] = open->sequence;
          break;
        case format::EventId::counter:
        case format::EventId::counter_float: {
          const reader::Site* site = trace_->site(event.name_id);
          // A metric counter's total, added up from its increments (analysis/counter_series.hpp).
          const std::optional<analysis::CounterReading> reading = counters.read(event);
          const bool increments =
              reading && counters.series()[reading->series].kind == analysis::SeriesKind::increments;
          db_.insert("INSERT INTO counters VALUES (?,?,?,?,?,?,?,?)",
                     {process_, int64_t{event.thread_id}, int64_t{event.name_id},
                      site ? Value(std::string_view(site->category)) : Value(nullptr),
                      site ? Value(std::string_view(site->name)) : Value(nullptr), ns(event.ticks),
                      event.type == format::EventId::counter ? Value(event.value) : Value(event.value_float),
                      increments ? Value(reading->value) : Value(nullptr)});
          break;
        }
        case format::EventId::note:
        case format::EventId::instant: {
          const reader::Site* site = trace_->site(event.name_id);
          const reader::PairedSpan* open = spans.innermost_on(event.thread_id);
          const bool note = event.type == format::EventId::note;
          db_.insert(
              "INSERT INTO notes VALUES (?,?,?,?,?,?,?,?,?,?)",
              {process_, int64_t{event.thread_id}, int64_t{event.name_id}, std::string_view(note ? "note" : "instant"),
               site ? Value(std::string_view(site->category)) : Value(nullptr),
               site ? Value(std::string_view(site->name)) : Value(nullptr), note ? Value(event.text) : Value(nullptr),
               ns(event.ticks), open ? Value(span_id(open->sequence)) : Value(nullptr),
               optional_task(spans.running_task(event.thread_id))});
          break;
        }
        default:
          break;
      }
      return true;
    });
    for (const reader::PairedSpan& span : spans.close_all(graph.last_ticks())) write_span(span);
    // The next process's span ids follow this one's (after this process's tasks are written).
    pending_offset_ = last_sequence;
  }

  Database& db_;
  const reader::Trace* trace_ = nullptr;
  int64_t process_ = 0;
  uint64_t span_offset_ = 0;
  uint64_t pending_offset_ = 0;
  std::unordered_map<model::TaskId, uint64_t> parent_spans_;  // by task: the span's sequence
};

}  // namespace

void export_sqlite(const std::vector<reader::Trace>& traces, const std::string& path, const ExportOptions& options) {
  ProgressCounter progress(options);
  format::PrivateFile file(path, options.when_exists);
  file.close();
  {
    Database db(file);
    // A new file written in one go under a temporary name: a crash leaves no database under the
    // name asked for, so the journal would only cost time.
    db.execute("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;");
    db.execute("BEGIN");
    db.execute(kSchema);
    SqliteWriter writer(db);
    for (size_t i = 0; i < traces.size(); ++i) writer.write_trace(traces[i], static_cast<int64_t>(i + 1), progress);
    db.execute(kIndexes);
    db.execute("COMMIT");
  }
  file.commit();
}

}  // namespace chronicle::exports
