// Allreduce as callers want it: the algorithm chosen by size and topology.
// Small buffers are latency-bound, and recursive doubling's log2(N)
// exchanges beat the ring's 2(N-1) hops; from RingContext::small_allreduce_bytes
// up, the bandwidth-optimal ring; with ranks on several hosts
// (RingContext::hosts), from RingContext::hierarchical_bytes up, the
// hierarchical schedule, which sends fewer bytes between hosts; with all
// ranks on one host sharing an arena (RingContext::arena), above
// small_allreduce_bytes, the shared-memory allreduce.
#pragma once

#include <vector>

#include "collectives/ring.h"

namespace kolo {

enum class AllreduceAlgorithm { kRing, kRecursiveDoubling, kHierarchical, kSharedMemory };
// "ring", "recursive_doubling", "hierarchical", "shared_memory"
const char* algorithm_name(AllreduceAlgorithm a);

// What allreduce runs for `bytes` in ctx.
AllreduceAlgorithm choose_allreduce(const RingContext& ctx, size_t bytes);

// recv = reduction of every rank's send (count elements). send == recv is in place.
Status allreduce(const RingContext& ctx, const void* send, void* recv, size_t count, DataType dtype, ReduceOp op);

// One allreduce over the concatenation of the spans (see ring_allreduce_spans).
Status allreduce_spans(const RingContext& ctx, const std::vector<Span>& spans, DataType dtype, ReduceOp op);

}  // namespace kolo
