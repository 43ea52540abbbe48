#include "runtime/submission.h"

#include <cmath>
#include <string>

#include "collectives/dtype.h"
#include "collectives/ring_schedule.h"
#include "collectives/wire_format.h"

namespace kolo {

Status validate_submission(const Submission& s, int rank, int size) {
  const OpRequest& r = s.request;
  const std::string what = std::string(op_kind_name(r.kind)) + " '" + r.name + "'";
  if (r.name.empty()) return invalid_argument("an operation needs a non-empty name");
  if (r.name.rfind("kolo.", 0) == 0) return invalid_argument("names starting with 'kolo.' are reserved: " + r.name);
  if (!is_user_kind(r.kind)) return invalid_argument("unknown operation kind for '" + r.name + "'");
  if (!valid_dtype(r.dtype)) return invalid_argument(what + ": unknown dtype " + std::to_string(r.dtype));
  const bool reduces = r.kind == OpKind::kAllreduce || r.kind == OpKind::kReduceScatter;
  if (reduces && !valid_op(r.op)) return invalid_argument(what + ": unknown reduction op " + std::to_string(r.op));
  if (!std::isfinite(r.prescale) || !std::isfinite(r.postscale)) {
    return invalid_argument(what + ": scale factors must be finite");
  }
  if (!reduces && (r.prescale != 1 || r.postscale != 1)) {
    return invalid_argument(what + ": scale factors apply to allreduce and reduce_scatter only");
  }
  if (r.wire != -1 && !valid_wire_format(r.wire)) {
    return invalid_argument(what + ": unknown wire format " + std::to_string(r.wire));
  }
  const bool encoded = r.wire > 0;  // a format other than the elements themselves
  if ((encoded || r.error_feedback) && r.kind != OpKind::kAllreduce) {
    return invalid_argument(what + ": wire formats and error feedback apply to allreduce only");
  }
  const std::string refusal =
      encoded ? wire_format_refusal(static_cast<WireFormat>(r.wire), r.data_type(), r.reduce_op()) : "";
  if (!refusal.empty()) return invalid_argument(what + ": " + refusal);
  if (r.error_feedback && !encoded) {
    return invalid_argument(what + ": error feedback needs a wire format (nothing is lost without one)");
  }
  for (const auto& shape : r.shapes) {
    for (int64_t d : shape) {
      if (d < 0) return invalid_argument(what + ": negative dimension");
    }
  }
  const size_t tensors = r.kind == OpKind::kBarrier ? 0 : r.shapes.size();
  if (r.kind == OpKind::kBarrier && !r.shapes.empty()) return invalid_argument(what + ": a barrier has no tensors");
  if (r.kind != OpKind::kBarrier && r.shapes.empty()) return invalid_argument(what + ": no tensor given");
  if (r.kind != OpKind::kAllreduce && r.shapes.size() > 1) {
    return invalid_argument(what + ": only allreduce takes a group of tensors");
  }
  const bool needs_rows = r.kind == OpKind::kAllgather || r.kind == OpKind::kAlltoall ||
                          r.kind == OpKind::kReduceScatter;
  if (needs_rows && r.shapes[0].empty()) return invalid_argument(what + ": the tensor needs at least one dimension");
  if (r.kind == OpKind::kBroadcast && (r.root < 0 || r.root >= size)) {
    return invalid_argument(what + ": root " + std::to_string(r.root) + " is not a rank of a world of " +
                            std::to_string(size));
  }
  if (r.kind == OpKind::kAlltoall) {
    if (r.splits.size() != static_cast<size_t>(size)) {
      return invalid_argument(what + ": needs one split per rank (" + std::to_string(size) + "), got " +
                              std::to_string(r.splits.size()));
    }
    int64_t sum = 0;
    for (int64_t x : r.splits) {
      if (x < 0) return invalid_argument(what + ": negative split");
      sum += x;
    }
    if (sum != r.shapes[0][0]) {
      return invalid_argument(what + ": the splits add up to " + std::to_string(sum) + " rows but the tensor has " +
                              std::to_string(r.shapes[0][0]));
    }
  }
  const bool needs_send = r.kind != OpKind::kBroadcast && r.kind != OpKind::kBarrier;
  const bool needs_recv = r.kind == OpKind::kAllreduce || r.kind == OpKind::kBroadcast ||
                          r.kind == OpKind::kReduceScatter;
  if ((needs_send && s.sends.size() != tensors) || (needs_recv && s.recvs.size() != tensors)) {
    return invalid_argument(what + ": one buffer per tensor is needed");
  }
  for (size_t i = 0; i < tensors; ++i) {
    const bool empty = element_count(r.shapes[i]) == 0;
    if (needs_send && !s.sends[i] && !empty) return invalid_argument(what + ": send buffer is NULL");
    if (needs_recv && !s.recvs[i]) {
      const bool recv_empty =
          r.kind == OpKind::kReduceScatter
              ? partition(static_cast<size_t>(r.shapes[0][0]), size, rank).count * row_elements(r.shapes[0]) == 0
              : empty;
      if (!recv_empty) return invalid_argument(what + ": receive buffer is NULL");
    }
  }
  return Status::ok();
}

Status check_placement(const OpRequest& r) {
  if (!r.on_device) return Status::ok();
  const std::string what = std::string(op_kind_name(r.kind)) + " '" + r.name + "' on GPU memory";
  if (r.wire > 0 || r.error_feedback) {
    return unsupported(what + ": the wire formats' kernels run on the host; pass host buffers or no wire format");
  }
  if (r.kind == OpKind::kReduceScatter && r.prescale != 1) {
    return unsupported(what + ": a prescale factor needs host buffers (scale the input on the GPU first)");
  }
  return Status::ok();
}

}  // namespace kolo
