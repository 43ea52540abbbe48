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
Status run_point_to_point(const ScheduleContext& ctx, const std::vector<PointToPoint>& ops);

// What receives from any peer remember between calls: where the next look
// at the peers starts (after the peer taken last, so that none starves).
struct AnySourceState {
  int next_first = 0;
};

// A receive from any peer (kolo_recv_any, MPI_ANY_SOURCE): count elements
// of dtype into data, from the first peer seen to have a point-to-point
// message waiting that no receive was posted for; *source is that peer.
// Each peer's messages stay in its order: the one taken is the peer's
// next, exactly what a receive from that peer would get. Nothing else may
// be posted meanwhile. Peers not yet connected are connected as they come
// (Transport::try_connect). How it waits:
//  - It looks at every connected peer's next message (Transport::peek),
//    starting after the peer taken last. When several have one waiting at
//    that look, which arrived first is not known (no transport stamps
//    arrival times), and the rotation decides; while it waits, the first
//    message to arrive wins.
//  - A peer whose next message belongs to a collective, or who closed its
//    end, is not waited for; when no peer is left, the receive fails at
//    once (MISMATCH, PEER_LOST). Never this rank itself.
//  - It takes the message with an ordinary receive from that peer, so a
//    count or dtype that differs from the send's is MISMATCH naming it.
//  - TIMEOUT after ctx.pipeline.timeout_s with no peer's message, saying
//    which peers were waited for.
// Every peer must be reachable by a transport that can_peek.
Status receive_from_any(const ScheduleContext& ctx, void* data, size_t count, DataType dtype, AnySourceState* state,
                        int* source);

}  // namespace kolo
