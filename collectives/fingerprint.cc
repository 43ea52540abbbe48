#include "collectives/fingerprint.h"

#include "collectives/wire_format.h"
#include "transport/frame.h"

namespace kolo {

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllreduce: return "allreduce";
    case CollectiveKind::kAllgather: return "allgather";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kBarrier: return "barrier";
    case CollectiveKind::kAlltoall: return "alltoall";
    case CollectiveKind::kReduce: return "reduce";
    case CollectiveKind::kGather: return "gather";
    case CollectiveKind::kScatter: return "scatter";
    case CollectiveKind::kSendRecv: return "send/recv";
    case CollectiveKind::kSharedAllreduce: return "allreduce through shared memory";
    case CollectiveKind::kTreeAllreduce: return "allreduce by the latency tree";
    case CollectiveKind::kSharedAllgather: return "allgather through shared memory";
    case CollectiveKind::kSharedReduceScatter: return "reduce_scatter through shared memory";
    case CollectiveKind::kSharedBroadcast: return "broadcast through shared memory";
  }
  return "unknown collective";
}

uint64_t fingerprint(CollectiveKind kind, DataType dtype, ReduceOp op, int root, uint64_t count) {
  return (static_cast<uint64_t>(kind) & 0xf) << 60 | (static_cast<uint64_t>(dtype) & 0xf) << 56 |
         (static_cast<uint64_t>(op) & 0xf) << 52 | (static_cast<uint64_t>(root) & 0xfffff) << 32 |
         (count & 0xffffffffull);
}

std::string describe_fingerprint(uint64_t fp) {
  auto kind = static_cast<CollectiveKind>(fp >> 60);
  auto dtype = static_cast<DataType>((fp >> 56) & 0xf);
  auto op = static_cast<ReduceOp>((fp >> 52) & 0xf);
  int root = static_cast<int>((fp >> 32) & 0xfffff);
  uint64_t count = fp & 0xffffffffull;
  std::string s = std::string(collective_name(kind)) + "(count=" + std::to_string(count);
  if (valid_dtype(static_cast<int>(dtype))) s += std::string(", ") + dtype_name(dtype);
  if (kind == CollectiveKind::kAllreduce || kind == CollectiveKind::kReduceScatter ||
      kind == CollectiveKind::kReduce || kind == CollectiveKind::kTreeAllreduce ||
      kind == CollectiveKind::kSharedReduceScatter || kind == CollectiveKind::kSharedAllreduce) {
    s += std::string(", ") + op_name(op);
  }
  // An allreduce's root field holds its wire format (compressed_ring.h).
  if (kind == CollectiveKind::kAllreduce && root != 0 && valid_wire_format(root)) {
    s += std::string(", wire ") + wire_format_name(static_cast<WireFormat>(root));
  }
  if (kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce || kind == CollectiveKind::kGather ||
      kind == CollectiveKind::kScatter || kind == CollectiveKind::kSharedBroadcast) {
    s += ", root=" + std::to_string(root);
  }
  return s + ")";
}

void install_fingerprint_describer() { set_tag_describer(&describe_fingerprint); }

}  // namespace kolo
