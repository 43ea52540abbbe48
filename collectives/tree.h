// The latency tree: allreduce over NCCL's double binary tree
// (tree_schedule.h). Each tree carries half of the buffer, in segments:
// every rank reduces a segment from its children into its own and passes
// it to its parent, the roots finish it, and it comes back down. Depth
// log2(N) where the ring has N - 1 hops, at about the ring's bytes per
// link: for many hosts at the sizes between recursive doubling's (whole
// buffer each round) and the ring's (2(N - 1) hops). The roots' results
// are what every rank receives, so all ranks end bit-identical.
#pragma once

#include <vector>

#include "collectives/algorithm.h"
#include "collectives/dtype.h"
#include "collectives/ring.h"

namespace kolo {

// Every rank `rank` exchanges with in either tree (its parents and
// children), connected up front.
std::vector<int> tree_peers(int rank, int size);

// recv = reduction of every rank's send (count elements); send == recv is
// in place.
Status tree_allreduce(const ScheduleContext& ctx, const void* send, void* recv, size_t count, DataType dtype,
                      ReduceOp op);

// Its entry in the allreduce table: ranks on two or more hosts (or
// KOLO_ALGORITHM=tree), chosen by the cost model where its time is least.
extern const AllreduceAlgorithm kTreeAllreduce;

}  // namespace kolo
