// One submission to the engine: what the ranks must agree on, and this
// rank's buffers for it.
#pragma once

#include <vector>

#include "common/status.h"
#include "runtime/op_request.h"

namespace kolo {

// Buffers by kind:
//  - allreduce: per tensor, sends[i] -> recvs[i] (equal means in place)
//  - broadcast: recvs[0] is the buffer (root's data goes out, others' is replaced)
//  - reduce_scatter: sends[0] holds shape[0] rows; recvs[0] gets this rank's
//    partition(shape[0], size, rank) rows
//  - allgather, alltoall: sends[0]; the result is in the handle's output
//  - barrier: no buffers
struct Submission {
  OpRequest request;
  std::vector<const void*> sends;
  std::vector<void*> recvs;
};

// Checks a submission on its own, before any rank hears of it: names,
// dtype, op, shapes, root, splits, buffers. A bad one is INVALID_ARGUMENT
// naming the operation and what is wrong.
Status validate_submission(const Submission& s, int rank, int size);

// What the engine takes on GPU memory (request.on_device): allreduce (one
// tensor or a group, scaled by the GPU's kernels), broadcast and
// reduce-scatter, in the tensors' own dtype. Anything else is UNSUPPORTED,
// saying why.
Status check_placement(const OpRequest& request);

}  // namespace kolo
