// Allreduce through memory every rank maps (transport/shared_arena.h), for
// a communicator whose ranks all run on one host: no messages, no hops.
// The buffer goes through in chunks; for each, every rank copies its chunk
// into its slot (all but its own share, where it writes through the cache:
// the reduction reads that from the input), and after a barrier reduces its
// 1/N share reading every peer's slot in place, writing the result into its
// own slot; after a second barrier every rank copies the N reduced shares
// out. Slots are double-buffered, so two barriers per chunk keep the ranks
// apart.
//
// A small buffer may go in one step instead (the one-shot): every rank
// posts it whole to its mailbox and, once all have, reduces the N of them;
// N - 1 reads of the buffer each instead of two barriers and a hop, which
// is what Open MPI's and NCCL's one-shot allreduces trade too. The cost
// model says up to where (cost_model.h).
#pragma once

#include <vector>

#include "collectives/ring.h"

namespace kolo {

// As ring_allreduce_spans, through `arena` (every rank of ctx in it, at its
// own rank).
Status arena_allreduce_spans(const ScheduleContext& ctx, SharedArena& arena, SpanList spans,
                             DataType dtype, ReduceOp op);
// The same, for ranks that have already agreed on the call (arena_agree).
Status arena_allreduce_agreed(const ScheduleContext& ctx, SharedArena& arena, SpanList spans, DataType dtype,
                              ReduceOp op);

// Posts this rank's outbox with its call's fingerprint `mine` and waits
// for every rank's (SharedArena::exchange): MISMATCH naming the first rank
// that posted another call, or that runs a collective of messages instead.
Status arena_agree(const ScheduleContext& ctx, SharedArena& arena, uint64_t mine);

// Where every arena entry applies (this one, arena_collectives.h's): the
// communicator has an arena and the buffers are the host's.
bool arena_applies(const Topology& t, const Thresholds& th, const Call& c);

// Its entries in the allreduce table, both "shared_memory" (which
// KOLO_ALGORITHM names): the one-shot, for a buffer that fits a mailbox,
// and the barriers'. The cost model chooses between them.
extern const AllreduceAlgorithm kSharedMemoryOneShotAllreduce;
extern const AllreduceAlgorithm kSharedMemoryAllreduce;

}  // namespace kolo
