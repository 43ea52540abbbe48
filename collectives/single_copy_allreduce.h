// Allreduce of one host's ranks where each may read the others' memory
// (SharedArena::reads_peers: the kernel's cross-memory attach). Every rank
// posts where its buffers lie; reduces its 1/N share of the buffer,
// reading each peer's input for it straight out of the peer's process
// into a piece of its own slot; then, after a barrier, reads each peer's
// reduced share straight into its result. A last barrier keeps every
// buffer in place until all have read it. Each byte crosses between
// processes in one copy, where through the slots (arena_allreduce.h) it is
// copied in and then out: Open MPI's shared memory moves large messages
// with the same kernel call. The cost model says from where it is the
// faster (cost_model.h).
#pragma once

#include "collectives/algorithm.h"

namespace kolo {

// Its entry in the allreduce table, named "shared_memory" as the arena's
// others are (KOLO_ALGORITHM=shared_memory lets the cost model choose
// among all three).
extern const AllreduceAlgorithm kSharedMemorySingleCopyAllreduce;

}  // namespace kolo
