// A group of point-to-point calls, per thread, as NCCL's ncclGroupStart /
// ncclGroupEnd: between start() and the outermost end(), sends and receives
// are checked and queued per communicator; end() posts each communicator's
// queue as one batch (Communicator::point_to_point, so any pattern
// completes without deadlock) and waits for it unless every call queued for
// that communicator was asynchronous. The C API's kolo_group_start/end and
// kolo_send/kolo_recv inside a group only wrap this.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "collectives/point_to_point.h"
#include "common/status.h"
#include "runtime/op_handle.h"

namespace kolo {

class Communicator;

class PointToPointGroup {
 public:
  // The calling thread's group.
  static PointToPointGroup& of_this_thread();

  void start() { ++depth_; }
  // Between a start() and its end().
  bool open() const { return depth_ > 0; }
  // Checks `op` against comm now (a bad argument is reported here and
  // queues nothing) and queues it. done: the handle of an asynchronous
  // call, completed when its batch is; nullptr for a blocking call.
  Status add(Communicator* comm, const PointToPoint& op, std::shared_ptr<OpHandle> done);
  // The outermost end posts every batch, in the order the communicators
  // first appeared, and returns the first failure; an inner one only
  // closes its start(). Without a start(): INVALID_USAGE.
  Status end();

 private:
  struct Batch {
    std::vector<PointToPoint> ops;
    std::vector<std::shared_ptr<OpHandle>> done;  // the handles of its asynchronous calls
    bool blocking = false;                        // one of its calls was blocking
  };
  static Status post(Communicator* comm, Batch batch);

  int depth_ = 0;
  std::vector<std::pair<Communicator*, Batch>> batches_;
};

}  // namespace kolo
