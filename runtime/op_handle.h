// The completion state of one submitted operation, shared by the engine
// (which completes it) and the caller (who polls, waits or is called back).
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "runtime/stream_queue.h"

namespace kolo {

class OpHandle {
 public:
  using Callback = std::function<void(const Status&)>;

  // Marks the operation finished. The callback, if any, runs on the calling
  // thread (the engine's), before waiters are woken.
  void complete(Status status);

  bool done() const;
  // Whether its results (status, outputs) are final: from the moment its
  // callback starts, which is before done().
  bool finished() const;
  // The result once done(); OK before.
  Status status() const;
  // Waits until done or the deadline (then KOLO_ERR_TIMEOUT; the operation
  // goes on and may still complete).
  Status wait(Deadline deadline);
  // Runs `cb` once the operation is done: at once (on this thread) if it
  // already is. Replaces an earlier callback not yet run.
  void set_callback(Callback cb);

  // How a wait on the thread that runs the operation gets it done: the
  // helper runs the next queued operation on the waiting thread (kOne),
  // says this is not that thread, or that nothing is queued there (the
  // wait then could never end: an error at once, not a hang).
  using Helper = std::function<StreamQueue::Ran()>;
  void set_helper(Helper helper);

  // Results that only exist after negotiation (allgather, alltoall: the
  // gathered data and the rows each rank contributed; join: the last rank).
  std::vector<unsigned char> output;
  std::vector<int64_t> output_rows;
  // The output in GPU memory instead (an allgather or alltoall of GPU
  // buffers), complete, and kept while the handle lives.
  std::shared_ptr<void> device_output;
  size_t device_output_bytes = 0;
  int join_last_rank = -1;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool completing_ = false;  // status set; the callback may be running
  bool done_ = false;
  Status status_;
  Callback callback_;
  Helper helper_;
};

}  // namespace kolo
