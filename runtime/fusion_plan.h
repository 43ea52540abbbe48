// Which agreed operations run together, and how a fused allreduce lays out
// its tensors. Pure functions of what every rank agreed on, so every rank
// plans the same.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/negotiator.h"

namespace kolo {

// Groups of indices into `ready`, in execution order. Greedy in the agreed
// order: an allreduce takes the later allreduces of its dtype and op while
// their bytes fit under `threshold`; a failed or non-allreduce operation is
// a group of its own. Tensors in GPU memory fuse only with each other.
std::vector<std::vector<size_t>> plan_fusion(const std::vector<OpResponse>& ready, size_t threshold);

// One tensor of a fused allreduce. Tensors under kPackBelowBytes are packed
// into the fusion buffer, where a copy costs less than the extra messages
// they would cut the ring into; larger ones are reduced where they are.
struct FusionPiece {
  size_t member;  // index into the batch
  size_t tensor;  // index into that member's tensors
  size_t count;   // elements
  bool packed;
};
constexpr size_t kPackBelowBytes = 64 << 10;

// The batch's tensors in order. Depends only on the agreed shapes.
std::vector<FusionPiece> plan_pieces(const std::vector<const OpRequest*>& batch);

size_t request_bytes(const OpRequest& r);

}  // namespace kolo
