// Rabenseifner's allreduce: a reduce-scatter by recursive halving, then an
// allgather by recursive doubling (Open MPI's "redscat_allgather", Gloo's
// halving_doubling). Each rank moves as many bytes as in the ring,
// 2(p - 1)/p of the buffer, but in 2 log2(p) exchanges with one partner
// each instead of the ring's 2(N - 1) hops: where a hop's fixed cost
// counts (TCP's system calls and wake-ups, more so where ranks share
// cores), the mid sizes run faster.
//
// With p the largest power of two up to N, the first 2(N - p) ranks fold
// in first, as in recursive doubling (recursive_doubling.h): each even one
// hands its buffer to the odd rank above it and gets the result back at the
// end, at the cost of the whole buffer twice more on those links.
//
// Step k (distances 1, 2, 4, ...: the largest messages go to the nearest
// partners, on one host where ranks are placed in blocks) halves the range
// a pair holds: each keeps one half and sends the other, and reduces what
// its partner sends of the half it keeps, piece by piece as the pieces
// arrive. Each block of the result is reduced by one rank only and copied
// from there, so every rank ends with bitwise identical results.
#pragma once

#include <vector>

#include "collectives/algorithm.h"
#include "collectives/schedule_context.h"

namespace kolo {

// The ranks `rank` exchanges with (recursive doubling's: the fold partner,
// if any, then distance 1, 2, 4, ...), connected up front.
std::vector<int> halving_doubling_peers(int rank, int size);

// The buffer runs through the schedule in blocks of this many bytes at
// most, one after another: p segments of the pipeline, so that each step
// moves a few segments, which the next step reads back while they are
// still in the cache (where the whole buffer went through each step at
// once, 32 and 64 MiB ran 10-15% slower than in blocks; docs/performance.md).
size_t halving_doubling_block_bytes(int ranks, size_t segment_bytes);

Status halving_doubling_allreduce(const ScheduleContext& ctx, const void* send, void* recv, size_t count,
                                  DataType dtype, ReduceOp op);

// Its entry in the allreduce table: two ranks or more, host or GPU memory,
// the native wire format.
extern const AllreduceAlgorithm kHalvingDoublingAllreduce;

}  // namespace kolo
