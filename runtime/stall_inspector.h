// Rank 0's watch over names that some ranks submitted and others did not
// (Horovod's stall inspector): a stall longer than KOLO_STALL_WARNING_S is
// reported, one longer than KOLO_STALL_SHUTDOWN_S fails the job on every
// rank. Every rank keeps the timers that make it send its long-pending
// requests in full, so rank 0's table names exactly which ranks lack them.
#pragma once

#include <map>
#include <string>

#include "common/deadline.h"
#include "runtime/negotiator.h"

namespace kolo {

class StallInspector {
 public:
  using Clock = SteadyClock;
  StallInspector(double warning_s, double shutdown_s) : warning_s_(warning_s), shutdown_s_(shutdown_s) {}

  // When this rank next needs a round for the stall check: a request pending
  // for a whole period, then every half period. max() when nothing is pending.
  Clock::time_point next_check(const Negotiator& negotiator) const;
  // A round starts because the check is due: requests pending for half the
  // warning period go out in full.
  void begin_check_round(Negotiator* negotiator, Clock::time_point now);
  // After a round, on rank 0: the report of names stalled long enough to
  // report now ("" for none). When one has stalled past the shutdown limit,
  // queues the request that fails every rank with the report.
  std::string inspect(Negotiator* negotiator, Clock::time_point now);

 private:
  // The age at which a pending name is inspected: the warning age, or the
  // shutdown limit when that is shorter.
  double threshold_s() const;
  const double warning_s_;
  const double shutdown_s_;  // 0: never
  Clock::time_point last_check_round_{};
  std::map<std::string, Clock::time_point> reported_;  // name -> when last reported
};

}  // namespace kolo
