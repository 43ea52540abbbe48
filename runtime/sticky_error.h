// A communicator's failure, as its calls see it: the first one is kept
// (sticky), every later call reports it, any thread reads it; and the job's
// first failure, which the rendezvous store keeps (failure_record.h), is
// reconciled into it so each rank tells the root cause beside its own view.
#pragma once

#include <atomic>
#include <mutex>

#include "common/status.h"
#include "runtime/flight_recorder.h"
#include "transport/store.h"

namespace kolo {

class StickyError {
 public:
  // Keeps `failure` unless one is kept already; returns the one kept.
  Status keep(const Status& failure);
  // OK while healthy, else the kept failure as "communicator failed
  // earlier: ...". Lock-free while healthy (every call asks).
  Status check() const;
  // The kept failure; OK while healthy. Any thread.
  Status get() const;
  bool failed() const { return failed_.load(); }

 private:
  mutable std::mutex mutex_;
  Status kept_;
  std::atomic<bool> failed_{false};
};

// `local` (rank `rank`'s failure) reported to the job's store as the first
// failure unless another rank's came first (first writer wins), and
// returned with that rank's story where one did; where the store does not
// answer within min(timeout_s, 2 s) (it lives in rank 0's process), said so.
// recorder (may be null) notes the exchange in the flight record.
Status reconcile_with_first_failure(Store* store, int rank, const Status& local, double timeout_s,
                                    FlightRecorder* recorder);

}  // namespace kolo
