// The engine's allreduce: one tensor on the caller's buffers, or a fused
// batch in one ring pass.
#include <chrono>
#include <optional>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/elementwise.h"
#include "runtime/fusion_plan.h"
#include "runtime/operations.h"

namespace kolo {
namespace {

using Clock = SteadyClock;

// dst = src * factor, or a plain copy when the factor is 1.
void copy_scaled(DataType dtype, void* dst, const void* src, size_t count, double factor) {
  if (factor != 1) {
    scale_copy(dtype, dst, src, count, factor);
  } else if (count) {
    std::memcpy(dst, src, count * dtype_size(dtype));
  }
}

void* identity_of(const OpResources& res, DataType dtype, ReduceOp op, size_t count) {
  const size_t bytes = count * dtype_size(dtype);
  if (res.identity->size() < bytes) res.identity->resize(bytes);
  fill_identity(dtype, op, res.identity->data(), count);
  return res.identity->data();
}

// Records where the ring's time went, per tensor: reduce-scatter and
// allgather phases, or one ALLREDUCE for a small (recursive-doubling) one,
// which marks no reduce-scatter end.
class RingTrace {
 public:
  RingTrace(const OpResources& res, const std::vector<const OpRequest*>& specs) : res_(res) {
    if (!res.timeline->active()) return;
    for (const OpRequest* s : specs) names_.push_back(s->name);
    res_.link->set_reduce_scatter_mark(&rs_done_);
  }
  ~RingTrace() { res_.link->set_reduce_scatter_mark(nullptr); }
  bool active() const { return !names_.empty(); }
  void ring(Clock::time_point begin, Clock::time_point end) {
    for (const auto& n : names_) {
      if (rs_done_ == Clock::time_point{}) {
        res_.timeline->phase(n, "ALLREDUCE", begin, end);
      } else {
        res_.timeline->phase(n, "RING_REDUCE_SCATTER", begin, rs_done_);
        res_.timeline->phase(n, "RING_ALLGATHER", rs_done_, end);
      }
    }
  }
  void phase(const char* what, Clock::time_point begin, Clock::time_point end) {
    for (const auto& n : names_) res_.timeline->phase(n, what, begin, end);
  }

 private:
  const OpResources& res_;
  std::vector<std::string> names_;
  Clock::time_point rs_done_{};
};

// What the request asks its allreduce of `bytes` to carry: nullopt for the
// communicator's default. A call small enough for recursive doubling goes
// exact, as the default does: its time is latency, which fewer bytes do not
// shorten, and the ring that carries the formats would be slower (Horovod
// programs compress every gradient, biases too).
std::optional<WireFormat> wire_of(const OpResources& res, const OpRequest& spec, size_t bytes) {
  if (spec.wire < 0) return std::nullopt;
  if (bytes <= res.small_allreduce_bytes) return WireFormat::kNative;
  return static_cast<WireFormat>(spec.wire);
}

// Where tensor `tensor` of the request keeps its error feedback.
std::string residual_key(const OpRequest& spec, size_t tensor) {
  return spec.shapes.size() == 1 ? spec.name : spec.name + "#" + std::to_string(tensor);
}

Status run_single_tensor(const OpResources& res, const OpRequest& spec, Participation part, RingTrace* trace) {
  const auto dtype = static_cast<DataType>(spec.dtype);
  const auto op = static_cast<ReduceOp>(spec.op);
  const size_t count = static_cast<size_t>(element_count(spec.shapes[0]));
  const void* send;
  void* recv;
  if (part.sub) {
    send = part.sub->sends[0];
    recv = part.sub->recvs[0];
    if (spec.prescale != 1) {
      scale_copy(dtype, recv, send, count, spec.prescale);
      send = recv;
    }
  } else {
    recv = identity_of(res, dtype, op, count);
    send = recv;
  }
  const auto begin = Clock::now();
  if (spec.error_feedback) {
    const std::vector<float*> residuals = {res.residuals->get(residual_key(spec, 0), count)};
    KOLO_RETURN_IF_ERROR(res.link->allreduce_spans({Span{send, recv, count}}, spec.data_type(), spec.reduce_op(),
                                                   wire_of(res, spec, count * dtype_size(dtype)), &residuals));
  } else {
    KOLO_RETURN_IF_ERROR(res.link->allreduce(send, recv, count, spec.data_type(), spec.reduce_op(),
                                             wire_of(res, spec, count * dtype_size(dtype)), nullptr));
  }
  if (trace->active()) trace->ring(begin, Clock::now());
  if (part.sub && spec.postscale != 1) scale_copy(dtype, recv, recv, count, spec.postscale);
  return Status::ok();
}

// A batch in GPU memory: every tensor reduced where it lies, one span
// each, and scaled by the GPU's kernels (the link's scales). Nothing is
// packed: the fusion buffer is host memory, and a small tensor's trip
// there and back would cost two copies across the bus and a wait for each.
// A joined rank takes part from GPU memory of the link's filled with the
// op's identity, cut where the others' tensors end.
Status run_device_batch(const OpResources& res, const std::vector<const OpRequest*>& specs,
                        const std::vector<Participation>& parts, RingTrace* trace) {
  const OpRequest& first = *specs[0];
  const size_t elem = dtype_size(first.data_type());
  const std::vector<FusionPiece> pieces = plan_pieces(specs);  // each piece one span: none packed here
  unsigned char* identity = nullptr;  // a joined rank's, where it has no submissions
  if (!parts[0].sub) {
    size_t total = 0;
    for (const FusionPiece& pc : pieces) total += pc.count;
    void* memory = nullptr;
    KOLO_RETURN_IF_ERROR(res.link->identity_on_device(first.data_type(), first.reduce_op(), total, &memory));
    identity = static_cast<unsigned char*>(memory);
  }
  std::vector<Span> spans;
  std::vector<SpanScale> scales;
  for (const FusionPiece& pc : pieces) {
    const Submission* sub = parts[pc.member].sub;
    if (!sub) {
      spans.push_back({identity, identity, pc.count});
      scales.push_back({});  // nothing of the identity is kept
      identity += pc.count * elem;
      continue;
    }
    spans.push_back({sub->sends[pc.tensor], sub->recvs[pc.tensor], pc.count});
    scales.push_back({specs[pc.member]->prescale, specs[pc.member]->postscale});
  }
  const auto begin = Clock::now();
  KOLO_RETURN_IF_ERROR(
      res.link->allreduce_spans(spans, first.data_type(), first.reduce_op(), WireFormat::kNative, nullptr, &scales));
  if (trace->active()) trace->ring(begin, Clock::now());
  return Status::ok();
}

}  // namespace

Status run_allreduce_batch(const OpResources& res, const std::vector<const OpRequest*>& specs,
                           const std::vector<Participation>& parts) {
  RingTrace trace(res, specs);
  const OpRequest& first = *specs[0];
  // Every member's tensors are where the first's are: the negotiation
  // compared them, and fusion takes only like requests (fusion_plan.cc).
  if (first.on_device) return run_device_batch(res, specs, parts, &trace);
  if (specs.size() == 1 && first.shapes.size() == 1) return run_single_tensor(res, first, parts[0], &trace);

  // The batch is one logical buffer, the concatenation of its tensors,
  // reduced in one ring pass over spans that point into the tensors
  // themselves; only small tensors go through the fusion buffer. Span
  // boundaries depend only on the agreed shapes, so every rank cuts the same.
  const auto dtype = static_cast<DataType>(first.dtype);
  const auto op = static_cast<ReduceOp>(first.op);
  const size_t elem = dtype_size(dtype);
  const std::vector<FusionPiece> pieces = plan_pieces(specs);
  size_t fusion_bytes = 0;  // a joined rank packs everything
  for (const FusionPiece& pc : pieces) fusion_bytes += pc.count * elem;
  res.fusion->get(fusion_bytes);

  const auto copy_in_start = Clock::now();
  std::vector<Span> spans;
  bool last_packed = false;
  size_t offset = 0;  // in the fusion buffer
  for (const FusionPiece& pc : pieces) {
    const Submission* sub = parts[pc.member].sub;
    const double pre = specs[pc.member]->prescale;
    unsigned char* slot = res.fusion->data() + offset;
    Span span;
    if (!sub) {  // joined: the op's identity, all in the fusion buffer
      fill_identity(dtype, op, slot, pc.count);
      span = {slot, slot, pc.count};
      offset += pc.count * elem;
    } else if (pc.packed) {
      copy_scaled(dtype, slot, sub->sends[pc.tensor], pc.count, pre);
      span = {slot, slot, pc.count};
      offset += pc.count * elem;
    } else {
      const void* src = sub->sends[pc.tensor];
      void* dst = sub->recvs[pc.tensor];
      if (pre != 1) {
        scale_copy(dtype, dst, src, pc.count, pre);
        src = dst;
      }
      span = {src, dst, pc.count};
    }
    // Neighbouring small tensors make one span (by the size rule alone, not
    // by where this rank keeps them: a joined rank keeps everything packed).
    if (pc.packed && last_packed) {
      spans.back().count += span.count;
    } else {
      spans.push_back(span);
    }
    last_packed = pc.packed;
  }
  // Error feedback: the members' residuals laid out as the logical buffer,
  // one array per span, copied in and back around the call.
  float* fused_residuals = nullptr;
  std::vector<float*> span_residuals;
  if (first.error_feedback) {
    size_t total = 0;
    for (const FusionPiece& pc : pieces) total += pc.count;
    fused_residuals = res.residuals->batch(total);
    size_t at = 0;
    for (const FusionPiece& pc : pieces) {
      const float* kept = res.residuals->get(residual_key(*specs[pc.member], pc.tensor), pc.count);
      if (pc.count) std::memcpy(fused_residuals + at, kept, pc.count * sizeof(float));
      at += pc.count;
    }
    at = 0;
    for (const Span& s : spans) {
      span_residuals.push_back(fused_residuals + at);
      at += s.count;
    }
  }
  const auto copied_in = Clock::now();
  size_t batch_elements = 0;
  for (const Span& s : spans) batch_elements += s.count;
  KOLO_RETURN_IF_ERROR(res.link->allreduce_spans(spans, first.data_type(), first.reduce_op(),
                                                 wire_of(res, first, batch_elements * elem),
                                                 fused_residuals ? &span_residuals : nullptr));
  const auto reduced = Clock::now();
  if (fused_residuals) {
    size_t at = 0;
    for (const FusionPiece& pc : pieces) {
      float* kept = res.residuals->get(residual_key(*specs[pc.member], pc.tensor), pc.count);
      if (pc.count) std::memcpy(kept, fused_residuals + at, pc.count * sizeof(float));
      at += pc.count;
    }
  }

  offset = 0;
  for (const FusionPiece& pc : pieces) {
    Submission* sub = parts[pc.member].sub;
    const double post = specs[pc.member]->postscale;
    if (!sub) {
      offset += pc.count * elem;
      continue;
    }
    void* dst = sub->recvs[pc.tensor];
    if (pc.packed) {
      copy_scaled(dtype, dst, res.fusion->data() + offset, pc.count, post);
      offset += pc.count * elem;
    } else if (post != 1) {
      scale_copy(dtype, dst, dst, pc.count, post);
    }
  }
  if (trace.active()) {
    trace.phase("MEMCPY_IN_FUSION_BUFFER", copy_in_start, copied_in);
    trace.ring(copied_in, reduced);
    trace.phase("MEMCPY_OUT_FUSION_BUFFER", reduced, Clock::now());
  }
  return Status::ok();
}

}  // namespace kolo
