// Timestamps taken on every call and read out rarely (the flight
// recorder's two per collective). Where the kernel keeps time by the CPU's
// time-stamp counter (its clocksource is "tsc": the counter ticks at one
// rate on every core, whatever their frequency or sleep), a stamp is the
// counter, read in about 10 ns where clock_gettime takes about 24 in a VM;
// elsewhere a stamp is the wall clock itself. Stamps become wall-clock
// nanoseconds (CLOCK_REALTIME) only when read out, on the line through two
// (counter, wall clock) pairs: one taken when the clock was made, one when
// they are read out.
#pragma once

#include <cstdint>

namespace kolo {

// The wall clock (CLOCK_REALTIME) in nanoseconds: what stamps read out as.
int64_t wall_clock_ns();

class StampClock {
 public:
  StampClock();

  // A stamp for now; never 0 (which callers keep for "none").
  uint64_t now() const;

  // Wall-clock nanoseconds of this clock's stamps, by the line through the
  // clock's first pair and one taken when made (this call's cost: a few
  // clock reads).
  class Reading {
   public:
    int64_t wall_ns(uint64_t stamp) const;

   private:
    friend class StampClock;
    bool counter_ = false;
    uint64_t ticks0_ = 0;
    int64_t wall0_ = 0;
    double ns_per_tick_ = 0;
  };
  Reading read_out() const;

  // Whether stamps are the counter here (else the wall clock).
  bool counter() const { return counter_; }

 private:
  bool counter_;
  uint64_t ticks0_ = 0;
  int64_t wall0_ = 0;
};

}  // namespace kolo
