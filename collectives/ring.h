// The ring collectives over any Transport. Each builds the unit lists of its
// schedule (ring_schedule.h) and hands them to the pipeline executor.
// Arguments are already validated by the caller (runtime/communicator); these
// functions only move and reduce data.
#pragma once

#include <cstddef>

#include "collectives/dtype.h"
#include "collectives/pipeline.h"
#include "common/status.h"
#include "transport/transport.h"

namespace kolo {

struct RingContext {
  Transport* transport;
  int rank;
  int size;
  int left;   // rank - 1
  int right;  // rank + 1
  size_t segment_bytes;
  size_t small_allreduce_bytes;  // at or below: recursive doubling (fewer hops)
  PipelineOptions pipeline;
  Workspace* workspace;
};

// recv = reduction of every rank's send (count elements). send == recv is in place.
Status ring_allreduce(const RingContext& ctx, const void* send, void* recv, size_t count, DataType dtype,
                      ReduceOp op);

// send holds size * recv_count elements; rank r gets the reduction of block r.
Status ring_reduce_scatter(const RingContext& ctx, const void* send, void* recv, size_t recv_count, DataType dtype,
                           ReduceOp op);

// recv holds size * send_count elements, rank r's contribution at block r.
// send == recv, or send == recv + r * block, means the block is already in place.
Status ring_allgather(const RingContext& ctx, const void* send, void* recv, size_t send_count, DataType dtype);

// Pipelined chain from root around the ring.
Status ring_broadcast(const RingContext& ctx, void* buf, size_t count, DataType dtype, int root);

// Returns on each rank only after every rank has entered.
Status ring_barrier(const RingContext& ctx);

}  // namespace kolo
