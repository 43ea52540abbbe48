#include "collectives/compressed_ring.h"

#include <string>

#include "collectives/fingerprint.h"
#include "collectives/half.h"
#include "collectives/ring_schedule.h"
#include "collectives/ring_wavefront.h"
#include "collectives/span_cutter.h"

namespace kolo {
namespace {

// A message of the compressed ring: a piece of one span within one
// segment, encoded on its own at `encoded` in the call's encoded buffer.
struct Piece {
  const Span* span;
  size_t at;     // first element within the span
  size_t count;
  float* residual;  // the span's residuals at `at`, or nullptr
  size_t encoded;   // offset in the encoded buffer
  size_t bytes;     // encoded size
};

// What the pipeline does to each unit: encode this rank's own data before
// step 0 sends it, decode-add-encode at each reducing receive, and decode
// the owner's bytes at the end of each chunk's journey.
class EncodedRingWork : public UnitWork {
 public:
  enum class Act { kReduce, kReduceLast, kGather };

  EncodedRingWork(WireFormat format, DataType dtype, int divisor, unsigned char* encoded,
                  const std::vector<Piece>* pieces)
      : format_(format), dtype_(dtype), divisor_(divisor), encoded_(encoded), pieces_(pieces) {}

  void on_send(size_t send_index, size_t piece) {
    if (send_piece_.size() <= send_index) send_piece_.resize(send_index + 1, kNone);
    send_piece_[send_index] = piece;
  }
  void on_recv(size_t recv_index, size_t piece, Act act) {
    if (recv_.size() <= recv_index) recv_.resize(recv_index + 1);
    recv_[recv_index] = {piece, act};
  }

  void before_send(size_t i) override {
    const Piece& pc = (*pieces_)[send_piece_[i]];
    WireHop hop = hop_of(pc);
    hop.local = element(pc.span->send, pc.at, dtype_size(dtype_));
    wire_hop(format_, hop);
  }

  void after_recv(size_t i, const void* data) override {
    const Piece& pc = (*pieces_)[recv_[i].piece];
    const size_t elem = dtype_size(dtype_);
    if (recv_[i].act == Act::kGather) {
      wire_decode(format_, static_cast<const unsigned char*>(data), pc.count, dtype_,
                  element(pc.span->recv, pc.at, elem));
      return;
    }
    WireHop hop = hop_of(pc);
    hop.received = static_cast<const unsigned char*>(data);
    hop.local = element(pc.span->send, pc.at, elem);
    if (recv_[i].act == Act::kReduceLast) {
      hop.divisor = divisor_;
      hop.decoded = element(pc.span->recv, pc.at, elem);
    }
    wire_hop(format_, hop);
  }

 private:
  static constexpr size_t kNone = ~size_t{0};
  struct RecvAct {
    size_t piece = kNone;
    Act act = Act::kGather;
  };

  WireHop hop_of(const Piece& pc) const {
    WireHop hop;
    hop.residual = pc.residual;
    hop.encoded = encoded_ + pc.encoded;
    hop.dtype = dtype_;
    hop.count = pc.count;
    return hop;
  }

  WireFormat format_;
  DataType dtype_;
  int divisor_;
  unsigned char* encoded_;
  const std::vector<Piece>* pieces_;
  std::vector<size_t> send_piece_;
  std::vector<RecvAct> recv_;
};

// One rank: nothing crosses a wire, so nothing is encoded; a residual
// left from an earlier call is added in (rounded once to a narrow dtype)
// and spent.
void allreduce_alone(const ScheduleContext& ctx, SpanList spans, DataType dtype,
                     const std::vector<float*>* residuals) {
  const size_t elem = dtype_size(dtype);
  for (size_t s = 0; s < spans.size(); ++s) {
    ctx.memory->copy(spans[s].recv, spans[s].send, spans[s].count * elem);
    float* r = residuals ? (*residuals)[s] : nullptr;
    if (!r) continue;
    for (size_t i = 0; i < spans[s].count; ++i) {
      if (dtype == DataType::kFloat32) {
        static_cast<float*>(spans[s].recv)[i] += r[i];
      } else {
        uint16_t* h = static_cast<uint16_t*>(spans[s].recv) + i;
        *h = dtype == DataType::kFloat16 ? float_to_fp16(fp16_to_float(*h) + r[i])
                                         : float_to_bf16(bf16_to_float(*h) + r[i]);
      }
      r[i] = 0;
    }
  }
}

}  // namespace

Status ring_allreduce_encoded(const ScheduleContext& ctx, SpanList spans, DataType dtype, ReduceOp op,
                              WireFormat format, const std::vector<float*>* residuals) {
  const std::string refusal = wire_format_refusal(format, dtype, op);
  if (!refusal.empty()) return invalid_argument(refusal);
  if (!ctx.memory->is_host()) {
    return unsupported(std::string("wire format ") + wire_format_name(format) +
                       " needs host buffers; device buffers reduce in their own dtype");
  }
  const SpanCutter buffer(spans);
  const size_t total = buffer.total();
  const uint64_t tag = fingerprint(CollectiveKind::kAllreduce, dtype, op, static_cast<int>(format), total);
  if (total == 0) return ring_fingerprint_exchange(ctx, tag);
  if (ctx.size == 1) {
    allreduce_alone(ctx, spans, dtype, residuals);
    return Status::ok();
  }
  const int n = ctx.size, r = ctx.rank, rs_steps = n - 1;
  const RingLayout layout(total, n, wire_element_bytes(format), ctx.segment_bytes);
  const size_t segments = layout.segments();

  // Every piece of every (chunk, segment), in buffer order, with its place
  // in the encoded buffer.
  std::vector<Piece> pieces;
  std::vector<size_t> first(static_cast<size_t>(n) * segments + 1, 0);
  size_t encoded_total = 0;
  for (int c = 0; c < n; ++c) {
    for (size_t j = 0; j < segments; ++j) {
      first[c * segments + j] = pieces.size();
      buffer.for_each_piece(layout.segment(c, j), [&](const Span& sp, size_t at, size_t count) {
        float* res = residuals ? (*residuals)[&sp - spans.data()] : nullptr;
        const size_t bytes = wire_bytes(format, count);
        pieces.push_back({&sp, at, count, res ? res + at : nullptr, encoded_total, bytes});
        encoded_total += bytes;
      });
    }
  }
  first.back() = pieces.size();
  auto pieces_of = [&](int c, size_t j) { return std::make_pair(first[c * segments + j], first[c * segments + j + 1]); };

  unsigned char* encoded = static_cast<unsigned char*>(ctx.memory->scratch(encoded_total));
  if (!encoded) return device_error("cannot allocate " + std::to_string(encoded_total) + " bytes of scratch memory");

  Pipeline p = ring_pipeline(ctx, tag);
  EncodedRingWork work(format, dtype, op == ReduceOp::kAvg ? n : 1, encoded, &pieces);
  p.work = &work;
  // Steps 0..N-2 reduce, N-1..2N-3 gather, as in ring_allreduce_spans; but
  // every send comes from the encoded buffer, and the results reach the
  // caller's recv only through the owner's final decode and the gathers.
  p.mark_recv = build_wavefront(2 * rs_steps, segments, 1, &p, [&](int st, size_t j, RingStep& v) {
    const bool reducing = st < rs_steps;
    const int send_chunk = reducing ? rs_send_chunk(r, n, st) : ag_send_chunk(r, n, st - rs_steps);
    const int recv_chunk = reducing ? rs_recv_chunk(r, n, st) : ag_recv_chunk(r, n, st - rs_steps);
    const auto out = pieces_of(send_chunk, j);
    for (size_t k = out.first; k < out.second; ++k) {
      if (st == 0) work.on_send(p.sends.size(), k);
      v.send(encoded + pieces[k].encoded, pieces[k].bytes);
      if (st == 0) p.sends.back().prepare = true;
    }
    const auto in = pieces_of(recv_chunk, j);
    for (size_t k = in.first; k < in.second; ++k) {
      const size_t index = p.recvs.size();
      if (reducing) {
        // The local operand only marks the unit as staged: the work reads
        // the piece's own elements.
        v.recv_reduce(encoded + pieces[k].encoded, pieces[k].span->send, pieces[k].bytes, false);
        work.on_recv(index, k,
                     st == rs_steps - 1 ? EncodedRingWork::Act::kReduceLast : EncodedRingWork::Act::kReduce);
      } else {
        v.recv_copy(encoded + pieces[k].encoded, pieces[k].bytes);
        work.on_recv(index, k, EncodedRingWork::Act::kGather);
      }
    }
  });
  p.mark_time = ctx.reduce_scatter_done;
  return run_pipeline(p, ctx.pipeline, ctx.memory);
}

}  // namespace kolo
