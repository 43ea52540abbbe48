// A point in time after which a blocking wait gives up. Every blocking call in
// kolo takes one, so no wait is unbounded.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace kolo {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline after(std::chrono::nanoseconds d) { return Deadline(Clock::now() + d); }
  static Deadline after_seconds(double s) { return after(nanoseconds(s)); }

  // As after_seconds, give or take a tick of the kernel's coarse clock
  // (CLOCK_MONOTONIC_COARSE: the time at a recent tick, read in about 5 ns
  // where the fine clock takes about 24 in a VM; it lags by about a tick,
  // which is added back). For the collectives' "no progress within
  // KOLO_TIMEOUT_S", set on every message and almost never reached: a few
  // milliseconds either way is nothing there, and a small message's whole
  // exchange is some 300 ns.
  static Deadline after_seconds_coarse(double s) {
    static const int64_t tick_ns = [] {
      timespec r;
      return ::clock_getres(CLOCK_MONOTONIC_COARSE, &r) == 0 ? r.tv_sec * 1000000000 + r.tv_nsec : 10000000;
    }();
    timespec t;
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &t);  // steady_clock's CLOCK_MONOTONIC, at the last tick
    const Clock::time_point now{std::chrono::nanoseconds(t.tv_sec * 1000000000 + t.tv_nsec)};
    return Deadline(now + std::chrono::nanoseconds(tick_ns) + nanoseconds(s));
  }

  bool expired() const { return Clock::now() >= at_; }

  // Milliseconds left, rounded up, clamped to [0, INT32_MAX], for poll(2).
  int remaining_ms() const {
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(at_ - Clock::now()).count();
    if (left <= 0) return 0;
    int64_t ms = (left + 999) / 1000;
    return ms > INT32_MAX ? INT32_MAX : static_cast<int>(ms);
  }

  Clock::time_point time_point() const { return at_; }

 private:
  static std::chrono::nanoseconds nanoseconds(double s) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
  }
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

}  // namespace kolo
