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
// from there, so every rank ends with bitwise identical results. Its
// partners are recursive doubling's (recursive_doubling_peers), connected
// up front.
#pragma once

#include <cstddef>

#include "collectives/algorithm.h"
#include "collectives/schedule_context.h"

namespace kolo {

// The buffer runs through the schedule in blocks of this many bytes at
// most, one after another, so that what one step writes and the next reads
// back is still in the cache. Across hosts, p segments of the pipeline:
// each block costs 2 log2(p) of the links' latencies. On one host, where a
// latency is microseconds, the block is what stays in one core's cache
// (`cache_bytes`, pipeline_cache_bytes) if that is smaller: from 4 MiB up,
// 1 MiB blocks ran 1.09-1.24x faster than 8 MiB ones on 4 ranks over
// loopback TCP and 1.13-1.36x faster than 16 MiB ones on 8
// (docs/performance-log.md).
size_t halving_doubling_block_bytes(const Topology& t, size_t segment_bytes, size_t cache_bytes);

// An allreduce over the spans' concatenation, in place where a span's send
// is its recv. The spans are read where they lie (zero-copy fusion, as the
// ring's): every rank's must have the same counts. `t` says how many
// hosts the ranks are on, for the block.
Status halving_doubling_allreduce(const ScheduleContext& ctx, const Topology& t, SpanList spans, DataType dtype,
                                  ReduceOp op);

// Its entry in the allreduce table: three ranks or more, host buffers, the
// native wire format, no arena (KOLO_ALGORITHM=halving_doubling: two ranks
// or more, any buffers).
extern const AllreduceAlgorithm kHalvingDoublingAllreduce;

// Where the ring's allreduce yields to it whatever the estimates say: one
// host's ranks over a transport (no arena), a power of two of four or more,
// host buffers, the native wire format. There the two move the same bytes over
// the same links, and the cost model prices the ring a little ahead (within 2%
// from 16 MiB up with blocks of p segments; about 11% with one core's cache as
// the block, each block paying its latencies), so what it does not price
// decides: where the data sits. Each of
// the ring's steps takes a new chunk of B/N bytes through its staging slots;
// within a block here, each exchange rereads what the one before it just wrote.
// Measured, this schedule ran at 1.11-1.49x the ring's busbw at 4, 16 and 64
// MiB on 4 ranks (the 2-core Intel VM, in place or not) and 1.07-1.15x at 64
// MiB on 8; when its blocks were first measured, at least the ring's at 16-64
// MiB on 4 (docs/performance-log.md). Across hosts, where the links and not the
// caches set the pace, the estimates choose.
bool halving_doubling_outruns_ring(const Topology& t, const Call& c);

}  // namespace kolo
