// The tables of a sampling profiler (analysis/cpu_profile.hpp) on stacks laid out by hand, whose
// self and total samples, calls and collapsed lines are worked out below by hand: recursion,
// direct and through another function, counts once per sample.
#include "analysis/cpu_profile.hpp"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace chronicle::analysis {
namespace {

enum Function : uint32_t { kMain, kRun, kWork, kParse, kHash, kIdle, kSort };

std::string name_of(uint32_t function) {
  static const char* const kNames[] = {"main", "run", "work", "parse", "hash", "idle", "sort"};
  return kNames[function];
}

// Leaf first, as the recorder unwinds. 26 samples:
//   main > run > work > hash              5 (added as 2 and 3)
//   main > run > work > parse             3
//   main > run > work                     2
//   main > run > work > work > work       4  (direct recursion)
//   main > parse > work > parse           1  (recursion through work)
//   idle                                  5
//   main                                  1
//   idle > main                           1
//   main > run > sort                     4
CpuProfile handcrafted_profile() {
  CpuProfile profile;
  auto add = [&profile](std::vector<uint32_t> frames, uint64_t count) { profile.add(frames, count); };
  add({kHash, kWork, kRun, kMain}, 2);
  add({kHash, kWork, kRun, kMain}, 3);
  add({kParse, kWork, kRun, kMain}, 3);
  add({kWork, kRun, kMain}, 2);
  add({kWork, kWork, kWork, kRun, kMain}, 4);
  add({kParse, kWork, kParse, kMain}, 1);
  add({kIdle}, 5);
  add({kMain}, 1);
  add({kMain, kIdle}, 1);
  add({kSort, kRun, kMain}, 4);
  return profile;
}

using Calls = std::vector<std::pair<uint32_t, uint64_t>>;

TEST(CpuProfile, FlatProfileCountsRecursionOnceAndSortsBySelfThenTotalThenId) {
  const CpuProfile profile = handcrafted_profile();
  EXPECT_EQ(profile.samples(), 26u);
  const std::vector<FlatProfileRow> rows = profile.flat();
  ASSERT_EQ(rows.size(), 7u);
  const std::vector<std::tuple<uint32_t, uint64_t, uint64_t>> expected = {
      {kWork, 6, 15}, {kIdle, 5, 6},   // idle before hash: same self, larger total
      {kHash, 5, 5},  {kParse, 4, 4},  // parse before sort: same self and total, smaller id
      {kSort, 4, 4},  {kMain, 2, 21}, {kRun, 0, 18},
  };
  for (size_t k = 0; k < rows.size(); ++k) {
    EXPECT_EQ(std::make_tuple(rows[k].function, rows[k].self, rows[k].total), expected[k]) << "row " << k;
  }
}

TEST(CpuProfile, CallGraphHasTheTopFunctionsByTotalWithTheirCallersAndCallees) {
  const std::vector<CallGraphEntry> entries = handcrafted_profile().call_graph(3);
  ASSERT_EQ(entries.size(), 3u);

  EXPECT_EQ(entries[0].function, kMain);
  EXPECT_EQ(entries[0].self, 2u);
  EXPECT_EQ(entries[0].total, 21u);
  EXPECT_EQ(entries[0].callers, (Calls{{kIdle, 1}}));
  EXPECT_EQ(entries[0].callees, (Calls{{kRun, 18}, {kParse, 1}}));

  EXPECT_EQ(entries[1].function, kRun);
  EXPECT_EQ(entries[1].self, 0u);
  EXPECT_EQ(entries[1].total, 18u);
  EXPECT_EQ(entries[1].callers, (Calls{{kMain, 18}}));
  EXPECT_EQ(entries[1].callees, (Calls{{kWork, 14}, {kSort, 4}}));

  // work calls itself twice in the recursive stack: 4 samples through that call, not 8.
  EXPECT_EQ(entries[2].function, kWork);
  EXPECT_EQ(entries[2].self, 6u);
  EXPECT_EQ(entries[2].total, 15u);
  EXPECT_EQ(entries[2].callers, (Calls{{kRun, 14}, {kWork, 4}, {kParse, 1}}));
  EXPECT_EQ(entries[2].callees, (Calls{{kHash, 5}, {kWork, 4}, {kParse, 4}}));
}

TEST(CpuProfile, CallGraphOfEveryFunctionBreaksTiesBySelfThenId) {
  const std::vector<CallGraphEntry> entries = handcrafted_profile().call_graph(100);
  std::vector<uint32_t> order;
  for (const CallGraphEntry& entry : entries) order.push_back(entry.function);
  EXPECT_EQ(order, (std::vector<uint32_t>{kMain, kRun, kWork, kIdle, kHash, kParse, kSort}));
  EXPECT_EQ(entries[5].callers, (Calls{{kWork, 4}, {kMain, 1}}));
  EXPECT_EQ(entries[5].callees, (Calls{{kWork, 1}}));
  EXPECT_EQ(entries[3].callers, Calls{});
  EXPECT_EQ(entries[3].callees, (Calls{{kMain, 1}}));
}

TEST(CpuProfile, FoldedStacksAreRootFirstAndSorted) {
  const CpuProfile profile = handcrafted_profile();
  EXPECT_EQ(profile.folded(name_of),
            "idle 5\n"
            "idle;main 1\n"
            "main 1\n"
            "main;parse;work;parse 1\n"
            "main;run;sort 4\n"
            "main;run;work 2\n"
            "main;run;work;hash 5\n"
            "main;run;work;parse 3\n"
            "main;run;work;work;work 4\n");
  EXPECT_EQ(profile.folded(name_of, "worker"),
            "worker;idle 5\n"
            "worker;idle;main 1\n"
            "worker;main 1\n"
            "worker;main;parse;work;parse 1\n"
            "worker;main;run;sort 4\n"
            "worker;main;run;work 2\n"
            "worker;main;run;work;hash 5\n"
            "worker;main;run;work;parse 3\n"
            "worker;main;run;work;work;work 4\n");
}

TEST(CpuProfile, FoldedNamesLoseTheirSeparatorsAndMergeWhenAlike) {
  CpuProfile profile;
  profile.add(std::vector<uint32_t>{1, 0}, 2);
  profile.add(std::vector<uint32_t>{2, 0}, 3);
  profile.add(std::vector<uint32_t>{}, 7);
  auto odd_names = [](uint32_t function) -> std::string {
    if (function == 0) return "f(std::map<int;int>)";
    return "two\nlines";  // ids 1 and 2 share a name
  };
  EXPECT_EQ(profile.samples(), 12u);
  EXPECT_EQ(profile.folded(odd_names), "f(std::map<int:int>);two lines 5\n");
  EXPECT_EQ(profile.folded(odd_names, "thread;1"),
            "thread:1 7\n"
            "thread:1;f(std::map<int:int>);two lines 5\n");
}

TEST(CpuProfile, FlatProfileTextHasSelfAndCumulativeShares) {
  EXPECT_EQ(format_flat_profile(handcrafted_profile(), name_of, 100),
            "     %  cumulative        self     total  name\n"
            "  23.1        23.1           6        15  work\n"
            "  19.2        42.3           5         6  idle\n"
            "  19.2        61.5           5         5  hash\n"
            "  15.4        76.9           4         4  parse\n"
            "  15.4        92.3           4         4  sort\n"
            "   7.7       100.0           2        21  main\n"
            "   0.0       100.0           0        18  run\n");
  EXPECT_EQ(format_flat_profile(handcrafted_profile(), name_of, 1),
            "     %  cumulative        self     total  name\n"
            "  23.1        23.1           6        15  work\n");
  EXPECT_EQ(format_flat_profile(CpuProfile{}, name_of, 10), "     %  cumulative        self     total  name\n");
}

TEST(CpuProfile, CallGraphTextPutsCallersAboveAndCalleesBelow) {
  EXPECT_EQ(format_call_graph(handcrafted_profile(), name_of, 2),
            "index  % total        self     total  name\n"
            "                                   1      idle\n"
            "[1]       80.8           2        21  main [1]\n"
            "                                  18      run [2]\n"
            "                                   1      parse\n"
            "------------------------------------------------\n"
            "                                  18      main [1]\n"
            "[2]       69.2           0        18  run [2]\n"
            "                                  14      work\n"
            "                                   4      sort\n"
            "------------------------------------------------\n");
}

}  // namespace
}  // namespace chronicle::analysis
