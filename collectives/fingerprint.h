// A 64-bit fingerprint of a collective call, carried in every frame header.
// A rank that receives a frame whose fingerprint differs from its own call
// knows the ranks disagree (different collective, count, dtype, op or root)
// and fails with KOLO_ERR_MISMATCH instead of reducing the wrong data.
// The fields are packed, not hashed, so the error can say what each side ran.
#pragma once

#include <cstdint>
#include <string>

#include "collectives/dtype.h"

namespace kolo {

enum class CollectiveKind : uint8_t {
  kAllreduce = 1,
  kAllgather,
  kBroadcast,
  kReduceScatter,
  kBarrier,
  kAlltoall,
  kReduce,
  kGather,
  kScatter,
  kSendRecv,  // point-to-point: a send and its receive
  kSharedAllreduce,  // allreduce through shared memory (arena_allreduce.h), told apart from the ring's
  kTreeAllreduce,    // allreduce by the latency tree (tree.h), told apart likewise
  kSharedAllgather,      // the arena's other collectives (arena_collectives.h)
  kSharedReduceScatter,
  kSharedBroadcast,  // the last that fits the fingerprint's 4 bits
};

const char* collective_name(CollectiveKind kind);

// Layout: kind:4 | dtype:4 | op:4 | root:20 | count (low 32 bits):32. An
// allreduce's root field holds its wire format (wire_format.h).
uint64_t fingerprint(CollectiveKind kind, DataType dtype, ReduceOp op, int root, uint64_t count);

// The collective a fingerprint belongs to.
inline CollectiveKind fingerprint_kind(uint64_t fp) { return static_cast<CollectiveKind>(fp >> 60); }

// "allreduce(count=1024, float32, sum)".
std::string describe_fingerprint(uint64_t fp);

// Makes transports print fingerprints this way in their errors.
void install_fingerprint_describer();

}  // namespace kolo
