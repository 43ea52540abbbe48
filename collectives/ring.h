// The ring collectives over any Transport. Each builds the unit lists of its
// schedule (ring_schedule.h) and hands them to the pipeline executor. These
// are the ring and only the ring: algorithms.h chooses between it and the
// others.
// Arguments are already validated by the caller (runtime/communicator); these
// functions only move and reduce data.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include "collectives/algorithm.h"
#include "collectives/dtype.h"
#include "collectives/pipeline.h"
#include "collectives/schedule_context.h"
#include "common/status.h"
#include "transport/transport.h"

namespace kolo {

// The ring allreduce over the concatenation of the spans, without copying
// them into one buffer (zero-copy tensor fusion). Every rank must pass spans
// of the same counts in the same order; only the addresses are its own.
// Wire messages are cut at span boundaries, so the ring moves the same bytes
// as over one buffer, in a few more messages.
Status ring_allreduce_spans(const ScheduleContext& ctx, SpanList spans, DataType dtype, ReduceOp op);

// recv = reduction of every rank's send (count elements), by the ring at
// any size. send == recv is in place.
Status ring_allreduce(const ScheduleContext& ctx, const void* send, void* recv, size_t count, DataType dtype,
                      ReduceOp op);

// send holds size * recv_count elements; rank r gets the reduction of block r.
Status ring_reduce_scatter(const ScheduleContext& ctx, const void* send, void* recv, size_t recv_count, DataType dtype,
                           ReduceOp op);

// recv holds size * send_count elements, rank r's contribution at block r.
// send == recv, or send == recv + r * block, means the block is already in place.
Status ring_allgather(const ScheduleContext& ctx, const void* send, void* recv, size_t send_count, DataType dtype);

// The same with blocks of any size: rank q contributes counts[q] elements,
// laid out in rank order in recv. Every rank passes the same counts.
Status ring_allgather_v(const ScheduleContext& ctx, const void* send, void* recv, const std::vector<size_t>& counts,
                        DataType dtype);

// send holds sum(counts) elements; rank r gets the reduction of its block
// (counts[r] elements at offset counts[0] + ... + counts[r-1]).
Status ring_reduce_scatter_v(const ScheduleContext& ctx, const void* send, void* recv,
                             const std::vector<size_t>& counts, DataType dtype, ReduceOp op);

// Pipelined chain from root around the ring.
Status ring_broadcast(const ScheduleContext& ctx, void* buf, size_t count, DataType dtype, int root);

// Returns on each rank only after every rank has entered.
Status ring_barrier(const ScheduleContext& ctx);

// An empty pipeline between this rank's ring neighbours, its messages
// tagged `tag`: what every ring and chain algorithm starts from.
Pipeline ring_pipeline(const ScheduleContext& ctx, uint64_t tag);

// One empty frame to the right, one from the left: for calls with nothing
// to move, so that a rank whose neighbour called something else (another
// count, collective, dtype, op or root) learns it now, as MISMATCH, instead
// of waiting for a message that never comes.
Status ring_fingerprint_exchange(const ScheduleContext& ctx, uint64_t tag);

// The ring's entries in the algorithm tables: it applies always, and
// exchanges with its two neighbours.
extern const AllreduceAlgorithm kRingAllreduce;
extern const AllgatherAlgorithm kRingAllgather;
extern const ReduceScatterAlgorithm kRingReduceScatter;
extern const BroadcastAlgorithm kRingBroadcast;  // the pipelined chain from the root

}  // namespace kolo
