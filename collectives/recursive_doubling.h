// Latency-optimal allreduce for small buffers: ceil(log2 N) exchanges of the
// whole buffer with partners at distance 1, 2, 4, ... instead of the ring's
// 2(N-1) hops. Bandwidth-wasteful, so only used below a size threshold.
//
// Ranks beyond the largest power of two p fold in first: for the first
// 2(N-p) ranks, each even rank hands its buffer to the odd rank above it and
// waits for the result at the end. Every pairwise reduction computes
// (lower rank's block) OP (higher rank's block), so both partners, and in the
// end all ranks, hold bitwise identical results.
#pragma once

#include <vector>

#include "collectives/dtype.h"
#include "collectives/ring.h"

namespace kolo {

// The ranks `rank` exchanges with, in the order it meets them (the fold
// partner, if any, then distance 1, 2, 4, ...). Connected up front, so a
// failing rank never leaves a peer waiting for a connection.
std::vector<int> recursive_doubling_peers(int rank, int size);

Status recursive_doubling_allreduce(const ScheduleContext& ctx, const void* send, void* recv, size_t count,
                                    DataType dtype, ReduceOp op);

// Its entry in the allreduce table: from 1 byte to the small-message
// threshold, with two ranks or more.
extern const AllreduceAlgorithm kRecursiveDoublingAllreduce;

}  // namespace kolo
