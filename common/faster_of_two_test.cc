#include "common/faster_of_two.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace kolo {
namespace {

// Runs `runs` calls whose ways cost `cost0` and `cost1`; returns how many
// took way 1.
int run(FasterOfTwo& ways, int runs, double cost0, double cost1) {
  int ones = 0;
  for (int i = 0; i < runs; ++i) {
    const int way = ways.pick();
    ones += way;
    ways.record(way, way == 0 ? cost0 : cost1);
  }
  return ones;
}

TEST(FasterOfTwo, AlternatesAtFirstThenKeepsToTheFaster) {
  FasterOfTwo ways;
  EXPECT_EQ(ways.pick(), 0);
  ways.record(0, 100.0);  // the first run: not counted
  for (int i = 0; i < static_cast<int>(FasterOfTwo::kFirstRuns); ++i) {
    EXPECT_EQ(ways.pick(), i % 2) << i;
    ways.record(i % 2, i % 2 == 0 ? 3.0 : 1.0);
  }
  EXPECT_EQ(ways.faster(), 1);
  EXPECT_DOUBLE_EQ(ways.cost(0), 3.0);
  EXPECT_DOUBLE_EQ(ways.cost(1), 1.0);
  // 64 runs more: the slower way only on the tries, one run in kTryEvery.
  const int ones = run(ways, 64, 3.0, 1.0);
  EXPECT_EQ(ones, 64 - 64 / static_cast<int>(FasterOfTwo::kTryEvery));
}

TEST(FasterOfTwo, FollowsAChangeOfTheFasterWayEitherWay) {
  FasterOfTwo ways;
  run(ways, 40, 1.0, 3.0);
  EXPECT_EQ(ways.faster(), 0);
  // The way in use slows down a lot: one run moves its average past the
  // other's, which takes over at once.
  ways.record(ways.pick(), 12.0);
  EXPECT_EQ(ways.faster(), 1);
  run(ways, 2 * FasterOfTwo::kTryEvery, 12.0, 3.0);
  EXPECT_EQ(ways.faster(), 1);
  // The way not in use speeds up: its next try, and the one right after,
  // show it, within kTryEvery + 1 runs.
  run(ways, FasterOfTwo::kTryEvery + 1, 0.5, 3.0);
  EXPECT_EQ(ways.faster(), 0);
  EXPECT_DOUBLE_EQ(ways.cost(0), 0.5);
}

TEST(FasterOfTwo, NoSingleNoisyRunDecides) {
  FasterOfTwo ways;
  run(ways, 10, 1.0, 2.0);
  ASSERT_EQ(ways.faster(), 0);
  ways.record(0, 3.0);  // a hiccup of the way in use: its average, 1.5, stays below 2
  EXPECT_EQ(ways.faster(), 0);
  // A try of the other that happens to beat it, not borne out by the
  // second try: the way in use stays.
  run(ways, FasterOfTwo::kTryEvery, 1.0, 2.0);
  while (ways.pick() == 0) ways.record(0, 1.0);
  ways.record(1, 0.5);
  EXPECT_EQ(ways.faster(), 0);
  EXPECT_EQ(ways.pick(), 1);  // the second try
  ways.record(1, 2.0);
  EXPECT_EQ(ways.faster(), 0);  // 1.25 on average: still slower
  EXPECT_EQ(ways.pick(), 0);
}

TEST(FasterOfTwo, ASlowFirstRunDoesNotDecide) {
  // Way 0 is the faster, but its first counted run was slowed (pages
  // touched for the first time): its faster run counts, not their mean.
  FasterOfTwo ways;
  ways.record(ways.pick(), 9.0);  // uncounted
  const double first_runs[] = {5.0, 1.5, 1.0, 1.6};  // ways 0, 1, 0, 1
  for (double cost : first_runs) ways.record(ways.pick(), cost);
  EXPECT_EQ(ways.faster(), 0);
  EXPECT_DOUBLE_EQ(ways.cost(0), 1.0);
  EXPECT_DOUBLE_EQ(ways.cost(1), 1.5);
}

TEST(FasterOfTwo, SaysWhenItTries) {
  FasterOfTwo ways;
  // The uncounted first run and the first runs are tries, whatever way.
  for (int i = 0; i <= static_cast<int>(FasterOfTwo::kFirstRuns); ++i) {
    EXPECT_TRUE(ways.trying()) << i;
    ways.record(ways.pick(), ways.pick() == 0 ? 1.0 : 2.0);
  }
  // Then only the periodic tries, one run in kTryEvery, and a try's second.
  int tries = 0;
  for (int i = 0; i < 2 * static_cast<int>(FasterOfTwo::kTryEvery); ++i) {
    const int way = ways.pick();
    EXPECT_EQ(ways.trying(), way != ways.faster()) << i;
    tries += ways.trying();
    ways.record(way, way == 0 ? 1.0 : 2.0);
  }
  EXPECT_EQ(tries, 2);
  while (!ways.trying()) ways.record(0, 1.0);
  ways.record(1, 0.5);  // a try that beats the way in use: its second follows
  EXPECT_TRUE(ways.trying());
  EXPECT_EQ(ways.pick(), 1);
}

// A way that, after a run of the other, takes `cold` and then each run
// `warming` times its previous one's time, down to `warm`: what reading
// the peers' buffers costs after the slots' way (faster_of_two.h).
struct Warming {
  double cold, warm, warming;
  double now = 0;
  double run(bool after_other) {
    now = after_other ? cold : std::max(warm, now * warming);
    return now;
  }
};

// Runs `runs` calls of a settling choice between a steady way 1 (cost1) and
// a way 0 that warms up; returns how many took way 0.
int run_warming(FasterOfTwo& ways, int runs, Warming& way0, double cost1, int* last_way) {
  int zeros = 0;
  for (int i = 0; i < runs; ++i) {
    const int way = ways.pick();
    const double cost = way == 0 ? way0.run(*last_way != 0) : cost1;
    ways.record(way, cost);
    zeros += way == 0;
    *last_way = way;
  }
  return zeros;
}

TEST(FasterOfTwo, ASettlingTryFindsAWayThatWarmsUpOverSeveralRuns) {
  // Way 0: 3.4 right after way 1, then 20% faster each run, down to 1.85;
  // way 1: 2.4 always. The first runs alternate, so way 0 is always cold
  // there and way 1 is taken; its first settling try then finds way 0.
  Warming way0{3.4, 1.85, 0.8};
  int last = -1;
  FasterOfTwo ways(1, 12);
  run_warming(ways, 1 + static_cast<int>(FasterOfTwo::kFirstRuns), way0, 2.4, &last);
  EXPECT_EQ(ways.faster(), 1);
  run_warming(ways, static_cast<int>(FasterOfTwo::kTryEvery) + 12, way0, 2.4, &last);
  EXPECT_EQ(ways.faster(), 0);
  EXPECT_LT(ways.cost(0), 2.0);
  // From then on way 0, but for the tries of way 1 (a run to switch and
  // two counted) and the run back, every kTryEvery runs.
  const int zeros = run_warming(ways, 4 * static_cast<int>(FasterOfTwo::kTryEvery), way0, 2.4, &last);
  EXPECT_GE(zeros, 4 * static_cast<int>(FasterOfTwo::kTryEvery) - 4 * 3);
  EXPECT_EQ(ways.faster(), 0);
}

TEST(FasterOfTwo, QuickTriesNeverFindAWayThatWarmsUpOverSeveralRuns) {
  // The same ways under the default one-run tries: way 0 is only ever run
  // cold (3.4 after way 1), and never chosen.
  Warming way0{3.4, 1.85, 0.8};
  int last = -1;
  FasterOfTwo ways;
  run_warming(ways, 8 * static_cast<int>(FasterOfTwo::kTryEvery), way0, 2.4, &last);
  EXPECT_EQ(ways.faster(), 1);
}

TEST(FasterOfTwo, ASettlingTryOfASteadySlowerWayIsShort) {
  // Way 1 in use at 1.0; way 0 steady at 2.0: each try is a run to switch,
  // two counted runs, and the run back (not counted).
  FasterOfTwo ways(1, 12);
  run(ways, 1 + static_cast<int>(FasterOfTwo::kFirstRuns), 2.0, 1.0);
  ASSERT_EQ(ways.faster(), 1);
  const int ones = run(ways, 4 * static_cast<int>(FasterOfTwo::kTryEvery), 2.0, 1.0);
  EXPECT_GE(ones, 4 * static_cast<int>(FasterOfTwo::kTryEvery) - 4 * 3);
  EXPECT_EQ(ways.faster(), 1);
  EXPECT_DOUBLE_EQ(ways.cost(0), 2.0);
  EXPECT_DOUBLE_EQ(ways.cost(1), 1.0);
}

TEST(FasterOfTwo, ASettlingChoiceCountsNoRunThatSwitchesWays) {
  FasterOfTwo ways(1, 12);
  run(ways, 1 + static_cast<int>(FasterOfTwo::kFirstRuns), 2.0, 1.0);
  ASSERT_EQ(ways.faster(), 1);
  while (ways.pick() == 1) ways.record(1, 1.0);
  EXPECT_TRUE(ways.trying());
  ways.record(0, 50.0);  // the switch: not counted
  EXPECT_DOUBLE_EQ(ways.cost(0), 2.0);
  EXPECT_EQ(ways.pick(), 0);
  ways.record(0, 0.5);
  ways.record(0, 0.5);  // settled: way 0 at 0.5 takes over
  EXPECT_EQ(ways.faster(), 0);
  EXPECT_DOUBLE_EQ(ways.cost(0), 0.5);
  // A run recorded elsewhere as not counted (ran) still tells the next run
  // that it switches.
  ways.ran(1);
  ways.record(0, 50.0);
  EXPECT_DOUBLE_EQ(ways.cost(0), 0.5);
}

}  // namespace
}  // namespace kolo
