// Chooses, run after run, the faster of two ways of doing the same work,
// from the runs' own times: the way that measured faster, and every
// kTryEvery-th run the other, because which is faster can change while a
// job runs (a VM's cores moved apart or together by its host). Runs are
// noisy, so no single run decides: the way in use keeps a moving average,
// and a try of the other that beats it is tried once more at once, the
// two together deciding; of the first runs, each way's fastest counts.
//
// Where a way's time depends on the runs before it (what they left in the
// caches or took out of them), a try of a run or two says little: a 16 MiB
// allreduce that reads its peers' buffers in place took 3.4 ms right after
// the slots' way (whose writes go around the cache), then 2.7, 2.5, 2.3 ...
// and 1.85 from its eighth run on, against the slots' 2.4, and its tries
// never chose it. Such work asks for settling tries (`longest_try` > 1):
// after the first runs, a try's first run, which pays for the switch, is
// not counted; the try goes on while its runs keep getting faster (by
// kStillWarming), up to longest_try runs; the mean of its last two is
// what the way costs; and the first run back is not counted either. The
// first runs stay short, so that a short job soon keeps to one way.
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
  // A settling try's run this much faster than its previous one: the way
  // is still warming up.
  static constexpr double kStillWarming = 0.05;

  // `uncounted`: how many runs, alternating the ways, are not counted at
  // all, for work whose first runs pay for more than first touches.
  // `longest_try`: 1, a try is a run (and its second, where it beats the
  // way in use); more, a settling try of up to that many counted runs.
  explicit FasterOfTwo(int uncounted = 1, int longest_try = 1)
      : uncounted_(uncounted), longest_try_(longest_try) {}

  // The way (0 or 1) the next run takes.
  int pick() const {
    if (warm_runs_ < uncounted_) return warm_runs_ % 2;
    if (runs_ < kFirstRuns) return static_cast<int>(runs_ % 2);
    if (confirming_ || settling_) return 1 - faster_;
    return runs_ % kTryEvery == kTryEvery - 1 ? 1 - faster_ : faster_;
  }

  // Whether the next run tries a way instead of taking the faster: its
  // first (uncounted) run, the first runs, a periodic try and its second
  // (or all of a settling try's, and the run back, uncounted too).
  // Two choices that share their runs' times (collectives/arena_writes.h)
  // let only one try at a time, so that a time says something of one.
  bool trying() const {
    return warm_runs_ < uncounted_ || runs_ < kFirstRuns || confirming_ || pick() != faster_ ||
           (longest_try_ > 1 && pick() != last_way_);
  }

  // A run of `way` took `cost` (seconds per byte, say: the same unit for
  // both ways).
  void record(int way, double cost) {
    const bool switched = way != last_way_;
    last_way_ = way;
    if (warm_runs_ < uncounted_) {
      ++warm_runs_;
      return;
    }
    if (longest_try_ > 1 && runs_ >= kFirstRuns) {
      if (switched) {
        settling_ = way != faster_;  // a try begins; or the run back
        try_runs_ = 0;
        return;  // it paid for the switch
      }
      if (settling_) {
        settle(way, cost);
        return;
      }
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

  // A run of `way` whose time is not recorded: what ran is kept, so that
  // a settling choice knows whether the next run switches.
  void ran(int way) { last_way_ = way; }

  // The way that measured faster (0 until both are measured).
  int faster() const { return faster_; }
  double cost(int way) const { return cost_[way]; }

 private:
  // A counted run of a settling try of `way`.
  void settle(int way, double cost) {
    ++try_runs_;
    const bool warming = try_runs_ == 1 || cost < last_try_cost_ * (1 - kStillWarming);
    if (warming && try_runs_ < longest_try_) {
      last_try_cost_ = cost;
      return;
    }
    settling_ = false;
    ++runs_;
    cost_[way] = 0.5 * (last_try_cost_ + cost);
    faster_ = cost_[1] < cost_[0] ? 1 : 0;
  }

  double cost_[2] = {0, 0};
  double trial_ = 0;         // a try that beat the way in use, awaiting its second
  bool confirming_ = false;  // the next run is that second try
  int uncounted_;
  int warm_runs_ = 0;  // uncounted runs so far
  uint64_t runs_ = 0;  // counted runs
  int faster_ = 0;
  int longest_try_;
  int last_way_ = -1;           // the way of the last run (-1: none yet)
  bool settling_ = false;       // in a settling try
  int try_runs_ = 0;            // its counted runs so far
  double last_try_cost_ = 0;    // its last counted run's cost
};

}  // namespace kolo
