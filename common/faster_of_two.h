// Chooses, run after run, the faster of two ways of doing the same work,
// from the runs' own times: the way that measured faster, and every
// kTryEvery-th run the other, because which is faster can change while a
// job runs (a VM's cores moved apart or together by its host). Runs are
// noisy, so no single run decides: the way in use keeps a moving average,
// and a try of the other that beats it is tried once more at once, the
// two together deciding; of the first runs, each way's fastest counts.
// Not thread-safe: one per place that runs the work.
#pragma once

#include <algorithm>
#include <cstdint>

namespace kolo {

class FasterOfTwo {
 public:
  static constexpr uint64_t kTryEvery = 32;
  // Runs after the first that alternate the ways (0, 1, 0, 1) before the
  // faster is known; the first run is not counted at all: it pays for
  // first touches (of memory, say).
  static constexpr uint64_t kFirstRuns = 4;

  // `uncounted`: how many runs, alternating the ways, are not counted at
  // all, for work whose first runs pay for more than first touches.
  explicit FasterOfTwo(int uncounted = 1) : uncounted_(uncounted) {}

  // The way (0 or 1) the next run takes.
  int pick() const {
    if (warm_runs_ < uncounted_) return warm_runs_ % 2;
    if (runs_ < kFirstRuns) return static_cast<int>(runs_ % 2);
    if (confirming_) return 1 - faster_;
    return runs_ % kTryEvery == kTryEvery - 1 ? 1 - faster_ : faster_;
  }

  // Whether the next run tries a way instead of taking the faster: its
  // first (uncounted) run, the first runs, a periodic try and its second.
  // Two choices that share their runs' times (collectives/arena_writes.h)
  // let only one try at a time, so that a time says something of one.
  bool trying() const { return warm_runs_ < uncounted_ || runs_ < kFirstRuns || confirming_ || pick() != faster_; }

  // A run of `way` took `cost` (seconds per byte, say: the same unit for
  // both ways).
  void record(int way, double cost) {
    if (warm_runs_ < uncounted_) {
      ++warm_runs_;
      return;
    }
    ++runs_;
    if (runs_ <= kFirstRuns) {
      // Noise only ever adds time (a page touched first, a core taken
      // away), and early runs get the most of it: of a way's first runs,
      // the fastest counts.
      cost_[way] = runs_ <= 2 ? cost : std::min(cost_[way], cost);
      if (runs_ == kFirstRuns) faster_ = cost_[1] < cost_[0] ? 1 : 0;
      return;
    }
    if (way == faster_) {
      cost_[way] = 0.75 * cost_[way] + 0.25 * cost;
    } else if (confirming_) {
      cost_[way] = 0.5 * (trial_ + cost);
      confirming_ = false;
    } else if (cost < cost_[faster_]) {
      trial_ = cost;  // looks faster: once more before it counts
      confirming_ = true;
      return;
    } else {
      cost_[way] = cost;  // what was known of it is old news
    }
    faster_ = cost_[1] < cost_[0] ? 1 : 0;
  }

  // The way that measured faster (0 until both are measured).
  int faster() const { return faster_; }
  double cost(int way) const { return cost_[way]; }

 private:
  double cost_[2] = {0, 0};
  double trial_ = 0;         // a try that beat the way in use, awaiting its second
  bool confirming_ = false;  // the next run is that second try
  int uncounted_;
  int warm_runs_ = 0;  // uncounted runs so far
  uint64_t runs_ = 0;  // counted runs
  int faster_ = 0;
};

}  // namespace kolo
