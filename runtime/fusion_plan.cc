#include "runtime/fusion_plan.h"

#include "collectives/dtype.h"

namespace kolo {
namespace {

size_t tensor_bytes(const OpRequest& r, size_t i) {
  return static_cast<size_t>(element_count(r.shapes[i])) * dtype_size(static_cast<DataType>(r.dtype));
}

bool fusable(const OpResponse& a, const OpResponse& b) {
  return b.error.is_ok() && b.spec.kind == OpKind::kAllreduce && b.spec.dtype == a.spec.dtype &&
         b.spec.op == a.spec.op && b.spec.wire == a.spec.wire && b.spec.error_feedback == a.spec.error_feedback &&
         b.spec.on_device == a.spec.on_device;
}

}  // namespace

size_t request_bytes(const OpRequest& r) {
  size_t b = 0;
  for (size_t i = 0; i < r.shapes.size(); ++i) b += tensor_bytes(r, i);
  return b;
}

std::vector<std::vector<size_t>> plan_fusion(const std::vector<OpResponse>& ready, size_t threshold) {
  std::vector<std::vector<size_t>> groups;
  std::vector<bool> taken(ready.size(), false);
  for (size_t i = 0; i < ready.size(); ++i) {
    if (taken[i]) continue;
    taken[i] = true;
    groups.push_back({i});
    const OpResponse& r = ready[i];
    if (!r.error.is_ok() || r.spec.kind != OpKind::kAllreduce) continue;
    size_t bytes = request_bytes(r.spec);
    for (size_t j = i + 1; j < ready.size() && bytes < threshold; ++j) {
      if (taken[j] || !fusable(r, ready[j])) continue;
      const size_t b = request_bytes(ready[j].spec);
      if (bytes + b > threshold) continue;
      groups.back().push_back(j);
      bytes += b;
      taken[j] = true;
    }
  }
  return groups;
}

std::vector<FusionPiece> plan_pieces(const std::vector<const OpRequest*>& batch) {
  std::vector<FusionPiece> pieces;
  for (size_t m = 0; m < batch.size(); ++m) {
    const OpRequest& spec = *batch[m];
    for (size_t t = 0; t < spec.shapes.size(); ++t) {
      const size_t count = static_cast<size_t>(element_count(spec.shapes[t]));
      pieces.push_back({m, t, count, tensor_bytes(spec, t) < kPackBelowBytes});
    }
  }
  return pieces;
}

}  // namespace kolo
