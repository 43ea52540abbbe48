#include "runtime/sticky_error.h"

#include <algorithm>
#include <string>

#include "runtime/failure_record.h"

namespace kolo {

namespace {

constexpr char kFailureKey[] = "failure";

}  // namespace

Status StickyError::keep(const Status& failure) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (kept_.is_ok()) kept_ = failure;
  failed_.store(true);
  return kept_;
}

Status StickyError::check() const {
  if (!failed_.load()) return Status::ok();
  std::lock_guard<std::mutex> lock(mutex_);
  return Status(kept_.code(), "communicator failed earlier: " + kept_.message());
}

Status StickyError::get() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return kept_;
}

Status reconcile_with_first_failure(Store* store, int rank, const Status& local, double timeout_s,
                                    FlightRecorder* recorder) {
  const std::string mine = encode_failure({rank, local.code(), local.message()});
  std::string first;
  if (recorder) recorder->report_started();
  // Bounded: the store may be gone with rank 0.
  Status st = store->set_if_absent(kFailureKey, mine, Deadline::after_seconds(std::min(timeout_s, 2.0)), &first);
  FailureRecord root;
  const bool decoded = st.is_ok() && decode_failure(first, &root).is_ok();
  if (recorder) recorder->report_finished(st.is_ok(), decoded ? root.rank : -1);
  if (st.is_ok() && first != mine && decoded && root.rank != rank) {
    return Status(root.code, local.message() + "; the job's first failure was on rank " + std::to_string(root.rank) +
                                 ": " + root.message);
  }
  if (!st.is_ok() && rank != 0) {
    return Status(local.code(), local.message() +
                                    "; the rendezvous store on rank 0 is unreachable too, so rank 0 has probably "
                                    "failed or exited");
  }
  return local;
}

}  // namespace kolo
