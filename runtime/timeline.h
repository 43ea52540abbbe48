// A Chrome-trace (catapult JSON) record of what the engine does with each
// named tensor: open the file in chrome://tracing or Perfetto. Each tensor
// gets its own row; each phase (queued, negotiating, waiting for other
// ranks, copies into and out of the fusion buffer, each ring phase) is a
// complete event on it. Can be started and stopped while the engine runs;
// when stopped, recording costs one atomic load per event.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"

namespace kolo {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  ~Timeline();
  // Starts writing to `path` (truncated). Fails if already running.
  Status start(const std::string& path, int rank);
  // Finishes the file so it is valid JSON. No-op when not running.
  void stop();
  bool active() const { return active_.load(std::memory_order_relaxed); }

  // A phase of `tensor` from begin to end.
  void phase(const std::string& tensor, const char* name, Clock::time_point begin, Clock::time_point end);
  // A moment (submission, completion).
  void instant(const std::string& tensor, const char* name, Clock::time_point at);

 private:
  int lane_locked(const std::string& tensor);
  double micros(Clock::time_point t) const;
  void write_locked(const std::string& event);

  std::atomic<bool> active_{false};
  std::mutex mu_;
  std::FILE* file_ = nullptr;
  int rank_ = 0;
  bool first_event_ = true;
  Clock::time_point origin_;
  std::map<std::string, int> lanes_;
};

}  // namespace kolo
