// The communicator's own ordered thread, as a CUDA stream is for NCCL:
// collectives enqueued on a caller's CUDA stream and the asynchronous calls
// (kolo_*_async) run on it one after another, in the order they were
// enqueued; the call that enqueues returns at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "common/deadline.h"

namespace kolo {

class StreamQueue {
 public:
  StreamQueue() = default;
  ~StreamQueue() { stop(); }

  // Runs what is queued (a failed communicator fails it fast), then ends
  // the thread. Idempotent. (Handles' helpers may hold the queue a moment
  // longer than its communicator: the communicator stops it before it
  // lets go, so nothing runs after the communicator is gone.)
  void stop();

  StreamQueue(const StreamQueue&) = delete;
  StreamQueue& operator=(const StreamQueue&) = delete;

  // Starts the thread on first use. `then` (if any) runs on the same
  // thread after `job`, before the next job, but no longer counts for
  // drain(): it is where completion callbacks run, and a callback that
  // enqueues more work must not wait on a caller blocked in drain().
  //
  // What a `then` pushes runs next, before the jobs other threads pushed
  // meanwhile (in the order the `then` pushed them), as if the callback
  // had run at that point of the stream. So the order of the jobs does not
  // depend on when the callback ran relative to other threads: every rank
  // runs a callback's collectives at the same place in its order (DDP's
  // PowerSGD hook issues its second and third allreduce from callbacks
  // while the autograd thread issues the next bucket's first).
  void push(std::function<void()> job, std::function<void()> then = nullptr);
  // Waits until every job pushed so far has run; false after timeout_s
  // (which start only if there is something to wait for: an idle queue
  // costs no clock read and no lock).
  bool drain(double timeout_s);
  // Whether every job pushed so far has run (drain() would return at once).
  bool idle() const { return unfinished_.load(std::memory_order_acquire) == 0; }

  // For a wait on the queue's own thread (a callback in a `then` waiting
  // for a job it pushed, which would otherwise wait for itself): runs the
  // next job, and its `then`, here and now.
  enum class Ran { kOne, kNotThisThread, kNothingQueued };
  Ran run_next_here();

 private:
  struct Job {
    std::function<void()> run, then;
  };
  void loop();
  // Runs job.run, counted by drain(); called and returns with the lock held.
  void run_job(Job& job, std::unique_lock<std::mutex>& lock);
  // Runs job.then with what it pushes going to the front; called and
  // returns with the lock held.
  void run_then(Job& job, std::unique_lock<std::mutex>& lock);

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool running_then_ = false;  // the thread is in a `then`
  size_t pushed_by_then_ = 0;  // jobs that `then` put at the front so far
  bool stopping_ = false;
  // Jobs pushed whose run has not returned, changed under the lock: an idle
  // queue's drain() reads it without taking the lock (a blocking call
  // drains on every call).
  std::atomic<size_t> unfinished_{0};
  std::thread thread_;
};

}  // namespace kolo
