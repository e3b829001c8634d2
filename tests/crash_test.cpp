// A traced program that dies of SIGSEGV: the events before the crash are in the trace, and the
// trace says how the program ended, whether the program collects its own trace or `chronicle
// record` does.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support.hpp"

namespace chronicle::test {
namespace {

const std::string kCli = CHRONICLE_CLI;
const std::string kSegvWriter = SEGV_WRITER;
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

}  // namespace
}  // namespace chronicle::test
