// Stamps read out as the wall clock they were taken at, against
// clock_gettime(CLOCK_REALTIME) read beside them, whichever source the
// machine gives (the counter here where the kernel keeps time by it).
#include "common/stamp_clock.h"

#include <time.h>

#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace kolo {
namespace {

int64_t wall_ns() {
  timespec t;
  ::clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

TEST(StampClock, StampsReadOutAsTheWallClockTheyWereTakenAt) {
  const StampClock clock;
  struct Taken {
    int64_t before, after;
    uint64_t stamp;
  };
  std::vector<Taken> taken;
  for (int i = 0; i < 6; ++i) {
    Taken t;
    t.before = wall_ns();
    t.stamp = clock.now();
    t.after = wall_ns();
    taken.push_back(t);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const StampClock::Reading reading = clock.read_out();
  int64_t last = 0;
  for (const Taken& t : taken) {
    EXPECT_NE(t.stamp, 0u);
    const int64_t at = reading.wall_ns(t.stamp);
    // Between the reads around it, give or take 20 us: the line through
    // two pairs, each read in well under a microsecond, over 100 ms.
    EXPECT_GE(at, t.before - 20000) << "counter: " << clock.counter();
    EXPECT_LE(at, t.after + 20000) << "counter: " << clock.counter();
    EXPECT_GT(at, last);
    last = at;
  }
}

TEST(StampClock, ReadOutAtOnceStillGivesTheWallClock) {
  const StampClock clock;
  const int64_t before = wall_ns();
  const uint64_t stamp = clock.now();
  const int64_t after = wall_ns();
  const int64_t at = clock.read_out().wall_ns(stamp);
  EXPECT_GE(at, before - 20000);
  EXPECT_LE(at, after + 20000);
}

}  // namespace
}  // namespace kolo
