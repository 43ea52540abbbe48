// The communicator's own ordered thread, as a CUDA stream is for NCCL:
// collectives enqueued on a caller's CUDA stream and the asynchronous calls
// (kolo_*_async) run on it one after another, in the order they were
// enqueued; the call that enqueues returns at once.
#pragma once

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
  ~StreamQueue();  // runs what is queued (a failed communicator fails it fast), then stops

  StreamQueue(const StreamQueue&) = delete;
  StreamQueue& operator=(const StreamQueue&) = delete;

  // Starts the thread on first use. `then` (if any) runs on the same
  // thread after `job`, before the next job, but no longer counts for
  // drain(): it is where completion callbacks run, and a callback that
  // enqueues more work must not wait on a caller blocked in drain().
  void push(std::function<void()> job, std::function<void()> then = nullptr);
  // Waits until every job pushed so far has run; false at the deadline.
  bool drain(Deadline deadline);

 private:
  struct Job {
    std::function<void()> run, then;
  };
  void loop();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool running_job_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kolo
