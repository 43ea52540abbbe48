// Allgather, reduce-scatter and broadcast through the shared-memory arena
// (transport/shared_arena.h), as arena_allreduce.h does allreduce: for a
// communicator whose ranks all run on one host, peers read each other's
// data in their slots instead of passing it around a ring. Each goes
// through in chunks of half a slot, alternating halves across chunks and
// calls (arena.chunks), so one barrier per chunk keeps the ranks apart:
// a rank writes a half only after every rank has passed the barrier of the
// chunk that last used the other. Each starts with one empty message to
// each ring neighbour, so that ranks that called something else fail with
// MISMATCH at once instead of at the barrier's deadline.
//   allgather:      each rank writes its block's chunk, then copies every
//                   rank's chunk out;
//   reduce-scatter: each rank writes the chunk of every block of its input,
//                   then reduces its own block's chunk from every slot;
//   broadcast:      the root writes the chunk, every other rank copies it.
#pragma once

#include "collectives/algorithm.h"
#include "collectives/ring.h"

namespace kolo {

// As ring_allgather_displs: rank q's counts[q] elements land at
// recv + displs[q]; send == recv, or send at this rank's place in recv, is
// in place.
Status arena_allgather(const ScheduleContext& ctx, SharedArena& arena, const AllgatherArgs& args);

// As ring_reduce_scatter_v: send holds every rank's block in rank order
// (counts); this rank's reduced block lands in recv.
Status arena_reduce_scatter(const ScheduleContext& ctx, SharedArena& arena, const ReduceScatterArgs& args);

// As ring_broadcast: root's count elements of buf into every rank's buf.
Status arena_broadcast(const ScheduleContext& ctx, SharedArena& arena, void* buf, size_t count, DataType dtype,
                       int root);

// Their entries: where the communicator has an arena and the buffers are
// the host's.
extern const AllgatherAlgorithm kSharedMemoryAllgather;
extern const ReduceScatterAlgorithm kSharedMemoryReduceScatter;
extern const BroadcastAlgorithm kSharedMemoryBroadcast;

}  // namespace kolo
