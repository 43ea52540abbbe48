// Collectives ordered on a caller's CUDA stream run on a thread of the
// communicator's, one after another in the order they were enqueued (the
// order the caller's streams see them in): the call that enqueues returns
// at once, as NCCL's do.
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

  // Starts the thread on first use.
  void push(std::function<void()> job);
  // Waits until every job pushed so far has run; false at the deadline.
  bool drain(Deadline deadline);

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool running_job_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kolo
