#include "runtime/op_handle.h"

namespace kolo {

void OpHandle::complete(Status status) {
  Callback cb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (completing_) return;
    completing_ = true;
    status_ = std::move(status);
    cb = std::move(callback_);
    callback_ = nullptr;
  }
  // The callback runs before waiters wake, so a caller that waited sees
  // its effects.
  if (cb) cb(status_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
}

bool OpHandle::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

bool OpHandle::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completing_;
}

Status OpHandle::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

Status OpHandle::wait(Deadline deadline) {
  // On the thread that runs it (a callback waiting for what it queued):
  // run the queue here until this operation is done.
  for (;;) {
    Helper helper;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) return status_;
      helper = helper_;
    }
    const StreamQueue::Ran ran = helper ? helper() : StreamQueue::Ran::kNotThisThread;
    if (ran == StreamQueue::Ran::kNotThisThread) break;
    if (ran == StreamQueue::Ran::kNothingQueued) {
      return invalid_usage("waiting, on kolo's own thread, for an operation that is not queued there (a callback "
                           "may wait only for operations queued before it returns)");
    }
    if (deadline.expired()) break;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_until(lock, deadline.time_point(), [&] { return done_; })) {
    return timeout_error("the operation did not complete before the wait's deadline (it is still running)");
  }
  return status_;
}

void OpHandle::set_helper(Helper helper) {
  std::lock_guard<std::mutex> lock(mu_);
  helper_ = std::move(helper);
}

void OpHandle::set_callback(Callback cb) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!completing_) {
      callback_ = std::move(cb);
      return;
    }
  }
  if (cb) cb(status_);  // status_ no longer changes once completing_ is set
}

}  // namespace kolo
