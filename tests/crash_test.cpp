// A traced program that dies of SIGSEGV: the events before the crash are in the trace, and the
// trace says how the program ended, whether the program collects its own trace or `chronicle
// record` does.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support.hpp"

namespace chronicle::test {
namespace {

const std::string kCli = CHRONICLE_CLI;
const std::string kSegvWriter = SEGV_WRITER;
const std::string kCommittedWriter = COMMITTED_WRITER;
constexpr long kLast = 5000;

// No core file from the crash in the test's directory.
std::string without_core(const std::string& command) {
  return "sh -c 'ulimit -c 0; exec " + command + "'";
}

// The crash killed it with SIGSEGV, or a sanitizer's handler, which comes after ours, reported
// it and exited (1) or aborted (abort_on_error=1, as CI runs ASan). `record` exits with the
// program's code.
void expect_died_of_the_crash(int exit_code) {
  EXPECT_TRUE(exit_code == 128 + SIGSEGV || exit_code == 1 || exit_code == 128 + SIGABRT) << "exit code " << exit_code;
}

// The sequence 0..kLast, whole and in order, and after its last value the note that names the
// signal.
void expect_everything_up_to_the_crash(const std::string& path) {
  reader::Trace trace(path);
  std::vector<int64_t> values;
  std::vector<std::string> endings;
  uint64_t last_value_ticks = 0;
  uint64_t ending_ticks = 0;
  trace.for_each_event([&](const reader::Event& event) {
    const reader::Site* site = trace.site(event.name_id);
    if (event.type == format::EventId::counter && site && site->name == "sequence") {
      values.push_back(event.value);
      last_value_ticks = event.ticks;
    }
    if (event.type == format::EventId::note && site && site->name == "fatal signal") {
      endings.emplace_back(event.text);
      ending_ticks = event.ticks;
    }
    return true;
  });
  ASSERT_EQ(values.size(), static_cast<size_t>(kLast + 1));
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], static_cast<int64_t>(i));
  ASSERT_EQ(endings.size(), 1u) << "the trace does not say how the program ended";
  EXPECT_EQ(endings[0].rfind("SIGSEGV (address 0x", 0), 0u) << endings[0];
  EXPECT_GE(ending_ticks, last_value_ticks);
  EXPECT_EQ(trace.events_discarded(), 0u);
}

TEST(Crash, TheProgramsOwnCollectorFinishesTheTraceBeforeTheSignalGoesOn) {
  TemporaryDirectory directory;
  const auto result =
      run(without_core("env CHRONICLE_OUTPUT=" + (directory / "trace") + " CHRONICLE_SHM_DIR=" + directory.path() +
                       " " + kSegvWriter + " " + std::to_string(kLast)));
  expect_died_of_the_crash(result.exit_code);
  expect_everything_up_to_the_crash(directory / "trace");
}

TEST(Crash, UnderRecordTheTraceSaysWhichSignalEndedTheProgram) {
  TemporaryDirectory directory;
  const auto result = run(without_core(kCli + " record -q -o " + (directory / "trace") + " -- " + kSegvWriter + " " +
                                       std::to_string(kLast)));
  expect_died_of_the_crash(result.exit_code);
  expect_everything_up_to_the_crash(directory / "trace");
}

// Runs committed_writer with its session from the environment (its own collector writing
// DIRECTORY/trace, its mapping in DIRECTORY) and kills it with SIGKILL once it has published at
// least `at_least` committed values (or after a minute). Returns what it had published.
long run_until_killed(const TemporaryDirectory& directory, long at_least, const std::string& more_env = "") {
  const std::string committed = directory / "committed";
  const std::string script = "env " + more_env + " CHRONICLE_OUTPUT=" + (directory / "trace") +
                             " CHRONICLE_SHM_DIR=" + directory.path() + " " + kCommittedWriter + " " + committed +
                             " & pid=$!; n=0; until [ \"$(cat " + committed + " 2>/dev/null)\" -ge " +
                             std::to_string(at_least) +
                             " ] 2>/dev/null; do n=$((n+1)); [ $n -gt 6000 ] && break; sleep 0.01; done; "
                             "kill -9 $pid; wait $pid";
  const auto result = run("sh -c '" + script + "'");
  EXPECT_EQ(result.exit_code, 128 + SIGKILL) << result.err;
  long value = 0;
  std::ifstream(committed) >> value;
  return value;
}

// How many of the values 0 .. committed - 1 the trace lacks.
long missing_values(const std::string& path, long committed) {
  reader::Trace trace(path);
  std::vector<bool> seen(static_cast<size_t>(committed), false);
  trace.for_each_event([&](const reader::Event& event) {
    const reader::Site* site = trace.site(event.name_id);
    if (event.type == format::EventId::counter && site && site->name == "sequence" && event.value >= 0 &&
        event.value < committed)
      seen[static_cast<size_t>(event.value)] = true;
    return true;
  });
  return static_cast<long>(std::count(seen.begin(), seen.end(), false));
}

// The line of `stats` that counts the events discarded.
std::string discard_line(const std::string& stats) {
  const size_t at = stats.find(" discarded\n");
  if (at == std::string::npos) return stats;
  const size_t begin = stats.rfind('\n', at);
  return stats.substr(begin == std::string::npos ? 0 : begin + 1,
                      at + 10 - (begin == std::string::npos ? 0 : begin + 1));
}

size_t mappings_in(const TemporaryDirectory& directory) {
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(directory.path()))
    count += entry.path().extension() == ".shm";
  return count;
}

// A program killed by SIGKILL while its own collector writes its trace: the events its rings
// still held are in its mapping. Every tool says the trace was cut and how to recover it, and
// `chronicle recover` appends them: every value the program committed is then in the trace.
TEST(Crash, ATraceCutBySigkillSaysSoAndRecoverAppendsEveryCommittedEvent) {
  for (long round = 1; round <= 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    TemporaryDirectory directory;
    const long committed = run_until_killed(directory, 50'000 * round);
    ASSERT_GT(committed, 0);
    const std::string trace = directory / "trace";
    const long missing = missing_values(trace, committed);
    const auto cut = run(kCli + " stats " + trace);
    EXPECT_NE(cut.err.find("was cut"), std::string::npos)
        << missing << " of " << committed << " committed values missing; stats says:\n"
        << discard_line(cut.out) << "\n"
        << cut.err;
    EXPECT_NE(cut.err.find("chronicle recover " + trace), std::string::npos) << cut.err;
    ASSERT_EQ(mappings_in(directory), 1u);
    const auto listed = run(kCli + " recover --list --in " + directory.path());
    EXPECT_NE(listed.out.find(directory.path() + "/chronicle-"), std::string::npos) << listed.out << listed.err;

    const auto recovered = run(kCli + " recover " + trace);
    ASSERT_EQ(recovered.exit_code, 0) << recovered.err;
    EXPECT_EQ(missing_values(trace, committed), 0) << "of " << committed << "\n" << recovered.out;
    EXPECT_EQ(reader::Trace(trace).events_discarded(), 0u);
    EXPECT_EQ(mappings_in(directory), 0u) << "recover leaves the mapping behind";
    const auto after = run(kCli + " stats " + trace);
    EXPECT_EQ(after.exit_code, 0) << after.err;
    EXPECT_EQ(after.err.find("was cut"), std::string::npos) << after.err;
  }
}

// The same for a compressed trace (CHRONICLE_COMPRESS=1): recover cuts each stream file back to
// its last whole unit and appends compressed units.
TEST(Crash, RecoverAppendsToACompressedTraceCutBySigkill) {
  for (long round = 1; round <= 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    TemporaryDirectory directory;
    const long committed = run_until_killed(directory, 50'000 * round, "CHRONICLE_COMPRESS=1");
    ASSERT_GT(committed, 0);
    const std::string trace = directory / "trace";
    ASSERT_TRUE(std::filesystem::exists(trace + "/metadata.ctfz"));
    const auto recovered = run(kCli + " recover " + trace);
    ASSERT_EQ(recovered.exit_code, 0) << recovered.err;
    EXPECT_EQ(missing_values(trace, committed), 0) << "of " << committed << "\n" << recovered.out;
    EXPECT_EQ(reader::Trace(trace).events_discarded(), 0u);
    EXPECT_EQ(mappings_in(directory), 0u) << "recover leaves the mapping behind";
    const auto after = run(kCli + " stats " + trace);
    EXPECT_EQ(after.exit_code, 0) << after.err;
    EXPECT_EQ(after.err.find("was cut"), std::string::npos) << after.err;
    EXPECT_EQ(after.err.find("damaged"), std::string::npos) << after.err;
  }
}

// `recover --clean` removes what dead processes left behind; a trace that named such a mapping
// then says that what it held is lost.
TEST(Crash, RecoverCleanRemovesTheMappingsOfDeadProcessesAndTheCutTraceSaysItsRestIsLost) {
  TemporaryDirectory directory;
  ASSERT_GT(run_until_killed(directory, 10'000), 0);
  ASSERT_EQ(mappings_in(directory), 1u);
  const auto cleaned = run(kCli + " recover --clean --in " + directory.path());
  EXPECT_EQ(cleaned.exit_code, 0) << cleaned.err;
  EXPECT_EQ(mappings_in(directory), 0u) << cleaned.out << cleaned.err;
  const auto stats = run(kCli + " stats " + (directory / "trace"));
  EXPECT_NE(stats.err.find("is gone: the events it held are lost"), std::string::npos) << stats.err;
  EXPECT_EQ(run(kCli + " recover " + (directory / "trace")).exit_code, 2);
}

}  // namespace
}  // namespace chronicle::test
