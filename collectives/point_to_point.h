// Sends and receives between two ranks, many at once (NCCL's grouped
// ncclSend/ncclRecv). Messages between a pair match in posting order, per
// direction, as the transport matches them; every operation is posted
// before any is waited for, so a rank may send to and receive from any set
// of peers in one batch without deadlock (an all-to-all, a pipeline stage).
// A receive checks that the send it meets agrees (dtype, count); the send
// may be done before that, so only the receiving side fails at once.
#pragma once

#include <vector>

#include "collectives/ring.h"

namespace kolo {

struct PointToPoint {
  enum Direction { kSend, kRecv };
  Direction direction;
  int peer;     // this communicator's rank; this rank itself is allowed
  void* data;   // const for a send
  size_t count;  // elements; 0 allowed
  DataType dtype;
};

// Posts every operation, in order, and returns once all are done. A send
// and its receive must agree on dtype and count (else MISMATCH at the
// receive). Messages to this rank itself are copied, matched in order.
// Every peer must be connected already.
Status run_point_to_point(const RingContext& ctx, const std::vector<PointToPoint>& ops);

}  // namespace kolo
