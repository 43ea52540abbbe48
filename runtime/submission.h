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

// What the engine takes on GPU memory (request.on_device): every kind, in
// the tensors' own dtype (allreduce and reduce-scatter scaled by the GPU's
// kernels; allgather's and alltoall's output in GPU memory the handle
// keeps), but no wire format or error feedback, and no prescale of a
// reduce-scatter: those are UNSUPPORTED, saying why.
Status check_placement(const OpRequest& request);

}  // namespace kolo
