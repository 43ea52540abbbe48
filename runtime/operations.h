// How the engine runs each kind of agreed operation on this rank, once
// negotiation has made it ready everywhere. The engine decides what runs
// (negotiator.h, fusion_plan.h); these functions do the running: copies,
// scaling, the collective itself and the timeline phases.
#pragma once

#include <vector>

#include "common/status.h"
#include "runtime/engine_link.h"
#include "runtime/negotiator.h"
#include "runtime/op_handle.h"
#include "runtime/residual_store.h"
#include "runtime/submission.h"
#include "runtime/timeline.h"
#include "transport/registered_buffer.h"

namespace kolo {

// What an operation needs of the engine. The buffers are declared to the
// link's transport.
struct OpResources {
  EngineLink* link = nullptr;
  int rank = 0;
  int size = 1;
  // Allreduces up to this size run exact whatever their request's wire
  // format (KOLO_SMALL_ALLREDUCE_BYTES).
  size_t small_allreduce_bytes = 0;
  RegisteredBuffer* fusion = nullptr;              // packed small tensors of a fused allreduce
  RegisteredBuffer* scratch = nullptr;             // what a joined rank receives and drops, scaled copies
  std::vector<unsigned char>* identity = nullptr;  // a joined rank's contribution
  Timeline* timeline = nullptr;
  ResidualStore* residuals = nullptr;              // error feedback's, per tensor name
};

// This rank's part in an agreed operation: its submission and the handle
// that gets any output, or neither where this rank has joined (it takes
// part with the op's identity and keeps nothing).
struct Participation {
  Submission* sub = nullptr;
  OpHandle* handle = nullptr;
};

// One allreduce over every tensor of the batch (members share dtype and
// op), with each member's prescale before and postscale after. One tensor
// alone runs on the caller's buffers; several make one ring pass over spans
// of the tensors themselves, small ones packed (fusion_plan.h).
Status run_allreduce_batch(const OpResources& res, const std::vector<const OpRequest*>& specs,
                           const std::vector<Participation>& parts);

// Barrier, broadcast, allgather, reduce-scatter or alltoall.
Status run_collective(const OpResources& res, const OpResponse& agreed, Participation part);

}  // namespace kolo
