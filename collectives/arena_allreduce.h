// Allreduce through memory every rank maps (transport/shared_arena.h), for
// a communicator whose ranks all run on one host: no messages, no hops.
// The buffer goes through in chunks; for each, every rank copies its chunk
// into its slot, and after a barrier reduces its 1/N share reading every
// rank's slot directly, writing the result over its own share; after a
// second barrier every rank copies the N reduced shares out. Slots are
// double-buffered, so two barriers per chunk keep the ranks apart.
#pragma once

#include <vector>

#include "collectives/ring.h"

namespace kolo {

// As ring_allreduce_spans, through `arena` (every rank of ctx in it, at its
// own rank).
Status arena_allreduce_spans(const ScheduleContext& ctx, SharedArena& arena, SpanList spans,
                             DataType dtype, ReduceOp op);

// Where every arena entry applies (this one, arena_collectives.h's): the
// communicator has an arena and the buffers are the host's.
bool arena_applies(const Topology& t, const Thresholds& th, const Call& c);

// Its entry in the allreduce table.
extern const AllreduceAlgorithm kSharedMemoryAllreduce;

}  // namespace kolo
