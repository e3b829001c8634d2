#include "cli/common.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "collector/collector.hpp"
#include "format/output_file.hpp"
#include "reader/trace_directory.hpp"
#include "reader/trace_reader.hpp"
#include "settings/settings.hpp"
#include "shm/reader_mapping.hpp"
#include "shm/shm_file.hpp"
#include "shm/trace_source.hpp"

namespace chronicle::cli {
namespace {

// Whether this process can create files in `directory` (permissions, a read-only or full file
// system), found out by creating one.
void check_writable(const std::string& directory) {
  std::string probe = directory + "/.chronicle-probe.XXXXXX";
  const int fd = ::mkostemp(probe.data(), O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot write into {}: {}", directory, std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

bool stderr_is_terminal() {
  return isatty(STDERR_FILENO) == 1;
}

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

std::string human_count(uint64_t count) {
  std::string digits = std::to_string(count);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string timestamp_for_path() {
  const time_t now = time(nullptr);
  std::tm parts{};
  localtime_r(&now, &parts);
  return fmt::format("{:04}{:02}{:02}-{:02}{:02}{:02}", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                     parts.tm_hour, parts.tm_min, parts.tm_sec);
}

void ignore_broken_pipes() {
  struct sigaction action {};
  action.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &action, nullptr);
}

std::vector<std::string> session_mapping_places() {
  namespace fs = std::filesystem;
  std::vector<std::string> places;
  if (const char* directory = std::getenv(recorder::kEnvShmDir); directory && *directory)
    places.emplace_back(directory);
  places.emplace_back("/dev/shm");
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/dev/shm", error))
    if (entry.path().filename().string().starts_with("chronicle-record-") && entry.is_directory(error))
      places.push_back(entry.path().string());
  return places;
}

std::vector<std::string> find_session_mappings(int pid, std::string* searched) {
  const std::vector<std::string> places = session_mapping_places();
  if (searched) {
    searched->clear();
    for (const auto& place : places) *searched += (searched->empty() ? "" : ", ") + place;
  }
  return shm::find_mapping_files(places, fmt::format("chronicle-{}", pid));
}

namespace {

// The programs whose live sessions are in `chronicle record` `pid`'s directories, by pid.
std::map<int, std::string> programs_recorded_by(int pid) {
  namespace fs = std::filesystem;
  std::map<int, std::string> programs;
  const std::string own = fmt::format("chronicle-record-{}", pid);
  std::error_code error;
  for (const auto& place : fs::directory_iterator("/dev/shm", error)) {
    const std::string name = place.path().filename().string();
    if ((name != own && !name.starts_with(own + "-")) || place.is_symlink(error) || !place.is_directory(error))
      continue;
    for (const auto& entry : fs::directory_iterator(place.path(), error)) {
      const std::optional<int> program = shm::mapping_writer_pid(entry.path().filename().string());
      if (!program || programs.contains(*program)) continue;
      try {
        const collector::SessionMapping mapping(entry.path().string(), ::geteuid());
        if (mapping.writer_alive()) programs[*program] = mapping.header().process_name;
      } catch (const std::exception&) {
        // Not a mapping of ours to act on: the usual search says why, if it comes to that.
      }
    }
  }
  return programs;
}

}  // namespace

int recorded_program_or_itself(int pid) {
  if (!find_session_mappings(pid).empty()) return pid;
  const std::map<int, std::string> programs = programs_recorded_by(pid);
  if (programs.empty()) return pid;
  if (programs.size() == 1) {
    const auto& [program, name] = *programs.begin();
    tell("chronicle: process {} is `chronicle record`: acting on the program it records, {} (process {})\n", pid, name,
         program);
    return program;
  }
  std::string listed;
  for (const auto& [program, name] : programs)
    listed += fmt::format("{}{} ({})", listed.empty() ? "" : ", ", program, name);
  throw std::runtime_error(fmt::format("process {} is `chronicle record`, recording {} programs: {}; name one of them",
                                       pid, programs.size(), listed));
}

std::unique_ptr<collector::SessionMapping> open_session_of(int pid) {
  std::string searched;
  const std::vector<std::string> paths = find_session_mappings(pid, &searched);
  if (paths.empty()) throw std::runtime_error(fmt::format("no chronicle session of process {} in {}", pid, searched));
  if (auto mapping = open_first_owned<collector::SessionMapping>(paths, shm::expected_mapping_owner(pid)))
    return mapping;
  throw std::runtime_error(fmt::format("no chronicle session of process {} made by its user in {}", pid, searched));
}

std::unique_ptr<metrics::MetricsMapping> open_metrics_of(int pid) {
  const std::vector<std::string> paths = metrics::MetricsMapping::candidates_for(pid);
  if (auto mapping = open_first_owned<metrics::MetricsMapping>(paths, shm::expected_mapping_owner(pid))) return mapping;
  throw std::runtime_error(
      fmt::format("no metrics of process {} made by its user at {}", pid, metrics::MetricsMapping::path_for(pid)));
}

bool prepare_output_directory(const std::string& output, bool allow_shared_output) {
  namespace fs = std::filesystem;
  // Before anything looks through it: a link another user planted at the name could lead into a
  // directory of ours they may not write (root's, as root runs the tool).
  if (std::string problem = format::planted_link_problem(output); !problem.empty())
    throw format::OutputRefused(problem);
  std::error_code error;
  const bool existed = fs::exists(output, error);
  if (existed && !fs::is_empty(output, error))
    throw std::runtime_error(fmt::format("{} exists and is not empty: choose another directory with -o", output));
  if (!allow_shared_output) {
    // Another user who may write there could swap the files being written for links to files of
    // ours, or the directory itself (through a parent without the sticky bit).
    std::string problem = collector::shared_directory_problem(output);
    fs::path full = fs::absolute(output, error).lexically_normal();
    if (!full.has_filename()) full = full.parent_path();
    const fs::path parent = full.parent_path();
    struct stat info {};
    if (problem.empty() && ::stat(parent.c_str(), &info) == 0 && (info.st_mode & (S_IWGRP | S_IWOTH)) &&
        !(info.st_mode & S_ISVTX))
      problem = fmt::format("{} is writable by other users and not sticky (mode {:o})", parent.string(),
                            info.st_mode & 07777);
    if (!problem.empty())
      throw format::OutputRefused(
          fmt::format("{}: another user could replace the trace's files; choose a private directory with -o, or pass "
                      "--allow-shared-output",
                      problem));
  }
  collector::create_private_directory(output);
  try {
    check_writable(output);
  } catch (...) {
    if (!existed) fs::remove(output, error);
    throw;
  }
  return existed;
}

void warn_about_damage(const reader::Trace& trace) {
  if (trace.cut()) tell("chronicle: warning: {}\n", shm::describe_cut(trace.directory(), *trace.cut()));
  for (const reader::Damage& damage : trace.damage()) tell("chronicle: warning: {}\n", reader::describe(damage));
  if (trace.first_chunk_number() > 1) tell("chronicle: warning: {}: {}\n", trace.directory(), trace.warnings().back());
}

void warn_if_cut(const std::string& directory) {
  for (const std::string& trace : reader::find_traces(directory))
    if (const auto cut = shm::find_cut(trace)) tell("chronicle: warning: {}\n", shm::describe_cut(trace, *cut));
}

}  // namespace chronicle::cli
