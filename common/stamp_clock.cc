#include "common/stamp_clock.h"

#include <time.h>

#include <fstream>
#include <string>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace kolo {

int64_t wall_clock_ns() {
  timespec t;
  ::clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

namespace {

uint64_t ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return 0;
#endif
}

// The kernel checked the counter (invariant, in step across cores and
// sockets) before choosing it to keep time by; it falls back to another
// clocksource when the counter proves unstable.
bool kernel_keeps_time_by_counter() {
#if defined(__x86_64__)
  static const bool yes = [] {
    std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    std::string name;
    return static_cast<bool>(f >> name) && name == "tsc";
  }();
  return yes;
#else
  return false;
#endif
}

// A (counter, wall clock) pair: the wall clock read between two counter
// reads, paired with their midpoint.
void pair(uint64_t* at_ticks, int64_t* at_wall) {
  const uint64_t before = ticks();
  *at_wall = wall_clock_ns();
  const uint64_t after = ticks();
  *at_ticks = before + (after - before) / 2;
}

}  // namespace

StampClock::StampClock() : counter_(kernel_keeps_time_by_counter()) {
  if (counter_) pair(&ticks0_, &wall0_);
}

uint64_t StampClock::now() const {
  if (counter_) return ticks() | 1;  // the lowest bit: under a nanosecond, and never 0
  return static_cast<uint64_t>(wall_clock_ns());
}

StampClock::Reading StampClock::read_out() const {
  Reading r;
  r.counter_ = counter_;
  if (!counter_) return r;
  uint64_t ticks1 = 0;
  int64_t wall1 = 0;
  pair(&ticks1, &wall1);
  r.ticks0_ = ticks0_;
  r.wall0_ = wall0_;
  // Both pairs within a tick of each other (a read-out at once): no rate
  // to draw; a nanosecond a tick errs by little over so short a time.
  r.ns_per_tick_ = ticks1 > ticks0_ ? double(wall1 - wall0_) / double(ticks1 - ticks0_) : 1.0;
  return r;
}

int64_t StampClock::Reading::wall_ns(uint64_t stamp) const {
  if (!counter_) return static_cast<int64_t>(stamp);
  // Signed: a stamp may precede the first pair by a little (the pair's midpoint).
  const double since = double(static_cast<int64_t>(stamp - ticks0_));
  return wall0_ + static_cast<int64_t>(since * ns_per_tick_);
}

}  // namespace kolo
