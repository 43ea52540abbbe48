// A coarse deadline is the fine one asked at the same moment, give or take
// the coarse clock's tick (it lags by about one, which is added back).
#include "common/deadline.h"

#include <time.h>

#include <chrono>

#include <gtest/gtest.h>

namespace kolo {
namespace {

TEST(Deadline, ACoarseDeadlineIsTheFineOneGiveOrTakeATick) {
  timespec r;
  ASSERT_EQ(::clock_getres(CLOCK_MONOTONIC_COARSE, &r), 0);
  const auto tick = std::chrono::nanoseconds(r.tv_sec * 1000000000 + r.tv_nsec);
  for (double s : {0.0, 0.001, 0.05, 300.0}) {
    const auto want = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
    const auto before = Deadline::Clock::now();
    const Deadline d = Deadline::after_seconds_coarse(s);
    const auto after = Deadline::Clock::now();
    EXPECT_GE(d.time_point(), before + want - tick) << s << " s";
    EXPECT_LE(d.time_point(), after + want + tick) << s << " s";
  }
  EXPECT_FALSE(Deadline::after_seconds_coarse(1).expired());
  const Deadline soon = Deadline::after_seconds_coarse(0.001);
  while (!soon.expired()) {
  }
  EXPECT_GE(Deadline::Clock::now(), soon.time_point());
}

}  // namespace
}  // namespace kolo
