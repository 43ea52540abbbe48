// A point in time after which a blocking wait gives up. Every blocking call in
// kolo takes one, so no wait is unbounded.
#pragma once

#include <chrono>
#include <cstdint>

namespace kolo {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline after(std::chrono::nanoseconds d) { return Deadline(Clock::now() + d); }
  static Deadline after_seconds(double s) {
    return after(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s)));
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
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

}  // namespace kolo
