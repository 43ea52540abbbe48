#include "collectives/ring.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/compressed_ring.h"
#include "collectives/cost_model.h"
#include "collectives/fingerprint.h"
#include "collectives/halving_doubling.h"
#include "collectives/rooted.h"
#include "collectives/ring_schedule.h"
#include "collectives/ring_wavefront.h"
#include "collectives/span_cutter.h"
#include "common/ranges.h"

namespace kolo {
Pipeline ring_pipeline(const ScheduleContext& ctx, uint64_t tag) {
  Pipeline p;
  p.transport = ctx.transport;
  p.left = ctx.left;
  p.right = ctx.right;
  p.tag = tag;
  return p;
}

Status ring_fingerprint_exchange(const ScheduleContext& ctx, uint64_t tag) {
  if (ctx.size == 1) return Status::ok();
  Pipeline p = ring_pipeline(ctx, tag);
  p.sends.push_back({nullptr, 0, -1});
  p.recvs.push_back({nullptr, 0, nullptr, 0, false});
  return run_pipeline(p, ctx.pipeline, ctx.memory);
}

Status ring_allreduce(const ScheduleContext& ctx, const void* send, void* recv, size_t count, DataType dtype,
                      ReduceOp op) {
  const Span spans[] = {{send, recv, count}};
  return ring_allreduce_spans(ctx, spans, dtype, op);
}

Status ring_allreduce_spans(const ScheduleContext& ctx, SpanList spans, DataType dtype, ReduceOp op) {
  const size_t elem_size = dtype_size(dtype);
  const SpanCutter buffer(spans);
  const size_t total = buffer.total();
  const uint64_t tag = fingerprint(CollectiveKind::kAllreduce, dtype, op, 0, total);
  if (total == 0) return ring_fingerprint_exchange(ctx, tag);
  if (ctx.size == 1) {
    for (const Span& s : spans) ctx.memory->copy(s.recv, s.send, s.count * elem_size);
    return Status::ok();
  }
  const RingLayout layout(total, ctx.size, elem_size, ctx.segment_bytes);
  Pipeline p = ring_pipeline(ctx, tag);
  p.dtype = dtype;
  p.op = op;
  p.divisor = ctx.size;
  // Partial results live in each span's recv: a chunk's slot there is
  // written once by reduce-scatter and once more by allgather. Steps
  // 0..N-2 reduce, steps N-1..2N-3 gather; step N-1 forwards chunk r, which
  // step N-2 finished.
  const int n = ctx.size, r = ctx.rank, rs_steps = n - 1;
  const bool average = op == ReduceOp::kAvg;
  p.mark_recv = build_wavefront(2 * rs_steps, layout.segments(), elem_size, &p, [&](int st, size_t j, RingStep& v) {
    const bool reducing = st < rs_steps;
    const int send_chunk = reducing ? rs_send_chunk(r, n, st) : ag_send_chunk(r, n, st - rs_steps);
    const int recv_chunk = reducing ? rs_recv_chunk(r, n, st) : ag_recv_chunk(r, n, st - rs_steps);
    // Step 0 sends this rank's own data; later steps what arrived before.
    buffer.for_each_piece(layout.segment(send_chunk, j), [&](const Span& sp, size_t at, size_t count) {
      v.send(st == 0 ? element(sp.send, at, elem_size) : element(static_cast<const void*>(sp.recv), at, elem_size),
             count);
    });
    buffer.for_each_piece(layout.segment(recv_chunk, j), [&](const Span& sp, size_t at, size_t count) {
      if (reducing) {
        // Before the last reducing step the sum is partial: the next step
        // forwards it and allgather overwrites it.
        const bool last = st == rs_steps - 1;
        v.recv_reduce(element(sp.recv, at, elem_size), element(sp.send, at, elem_size), count, last && average,
                      !last);
      } else {
        v.recv_copy(element(sp.recv, at, elem_size), count);
      }
    });
  });
  p.mark_time = ctx.reduce_scatter_done;
  return run_pipeline(p, ctx.pipeline, ctx.memory);
}

Status ring_reduce_scatter(const ScheduleContext& ctx, const void* send, void* recv, size_t recv_count, DataType dtype,
                           ReduceOp op) {
  return ring_reduce_scatter_v(ctx, send, recv, std::vector<size_t>(ctx.size, recv_count), dtype, op);
}

Status ring_reduce_scatter_v(const ScheduleContext& ctx, const void* send, void* recv,
                             const std::vector<size_t>& counts, DataType dtype, ReduceOp op) {
  const size_t elem_size = dtype_size(dtype);
  const RingLayout layout(counts, elem_size, ctx.segment_bytes);
  size_t total = 0;
  for (size_t n : counts) total += n;
  const Range mine = layout.chunk(ctx.rank);
  const uint64_t tag = fingerprint(CollectiveKind::kReduceScatter, dtype, op, 0, total);
  if (total == 0) return ring_fingerprint_exchange(ctx, tag);
  if (ctx.size == 1) {
    ctx.memory->copy(recv, send, mine.count * elem_size);
    ctx.memory->finalize(dtype, op, recv, mine.count, 1);
    return Status::ok();
  }
  Pipeline p = ring_pipeline(ctx, tag);
  p.dtype = dtype;
  p.op = op;
  p.divisor = ctx.size;
  // Partial results need a full-size scratch buffer: recv holds one block.
  void* work = ctx.memory->scratch(total * elem_size);
  if (!work) return device_error("cannot allocate " + std::to_string(total * elem_size) + " bytes of scratch memory");
  // Where this rank's chunk is written. Straight into recv when that is
  // safe; if recv overlaps the input anywhere but this rank's own block
  // (e.g. send == recv), an in-flight send could still read it, so the
  // result goes through scratch and is copied at the end.
  const void* own_block_in_send = element(send, mine.offset, elem_size);
  const bool via_scratch =
      ranges_overlap(send, total * elem_size, recv, mine.count * elem_size) && recv != own_block_in_send;
  void* final_out = via_scratch ? work : static_cast<unsigned char*>(recv) - mine.offset * elem_size;
  const int n = ctx.size, r = ctx.rank;
  const bool average = op == ReduceOp::kAvg;
  build_wavefront(n - 1, layout.segments(), elem_size, &p, [&](int st, size_t j, RingStep& v) {
    // Step 0 sends this rank's own data; later steps forward what the
    // previous step reduced. The last step's result is final.
    const bool last = st == n - 2;
    const Range out = layout.segment(rs_send_chunk(r, n, st), j);
    const Range in = layout.segment(rs_recv_chunk(r, n, st), j);
    v.send(st == 0 ? element(send, out.offset, elem_size) : element(static_cast<const void*>(work), out.offset,
                                                                    elem_size),
           out.count);
    v.recv_reduce(element(last ? final_out : work, in.offset, elem_size), element(send, in.offset, elem_size),
                  in.count, last && average, !last);
  });
  KOLO_RETURN_IF_ERROR(run_pipeline(p, ctx.pipeline, ctx.memory));
  if (via_scratch) ctx.memory->copy(recv, element(work, mine.offset, elem_size), mine.count * elem_size);
  return Status::ok();
}

Status ring_allgather(const ScheduleContext& ctx, const void* send, void* recv, size_t send_count, DataType dtype) {
  return ring_allgather_v(ctx, send, recv, std::vector<size_t>(ctx.size, send_count), dtype);
}

Status ring_allgather_v(const ScheduleContext& ctx, const void* send, void* recv, const std::vector<size_t>& counts,
                        DataType dtype) {
  const size_t elem_size = dtype_size(dtype);
  const RingLayout layout(counts, elem_size, ctx.segment_bytes);
  size_t total = 0;
  for (size_t n : counts) total += n;
  const uint64_t tag = fingerprint(CollectiveKind::kAllgather, dtype, ReduceOp::kSum, 0, total);
  if (total == 0) return ring_fingerprint_exchange(ctx, tag);
  const Range mine = layout.chunk(ctx.rank);
  const size_t block = mine.count * elem_size;
  unsigned char* own = element(recv, mine.offset, elem_size);
  // "In place" is send == recv (the convention) or send == own slot (NCCL's).
  const void* source = (send == recv) ? own : send;
  if (ctx.size == 1) {
    ctx.memory->copy(own, source, block);
    return Status::ok();
  }
  Pipeline p = ring_pipeline(ctx, tag);
  // Step 0 sends chunk r from `source`; later steps forward what arrived in recv.
  const int n = ctx.size, r = ctx.rank;
  build_wavefront(n - 1, layout.segments(), elem_size, &p, [&](int st, size_t j, RingStep& v) {
    const Range out = layout.segment(ag_send_chunk(r, n, st), j);
    const Range in = layout.segment(ag_recv_chunk(r, n, st), j);
    v.send(st == 0 ? element(source, out.offset - mine.offset, elem_size)
                   : element(static_cast<const void*>(recv), out.offset, elem_size),
           out.count);
    v.recv_copy(element(recv, in.offset, elem_size), in.count);
  });
  // Our own block also belongs in recv; a local copy, cheap next to the
  // blocks that cross the wire.
  ctx.memory->copy(own, source, block);
  return run_pipeline(p, ctx.pipeline, ctx.memory);
}

Status ring_broadcast(const ScheduleContext& ctx, void* buf, size_t count, DataType dtype, int root) {
  const size_t elem_size = dtype_size(dtype);
  const uint64_t tag = fingerprint(CollectiveKind::kBroadcast, dtype, ReduceOp::kSum, root, count);
  if (ctx.size == 1) return Status::ok();
  if (count == 0) return ring_fingerprint_exchange(ctx, tag);
  Pipeline p = ring_pipeline(ctx, tag);
  const int n = ctx.size;
  const int position = ring_mod(ctx.rank - root, n);  // hops from root
  const size_t segments = segments_per_chunk(count, elem_size, ctx.segment_bytes);
  for (size_t j = 0; j < segments; ++j) {
    Range seg = partition(count, segments, j);
    unsigned char* data = element(buf, seg.offset, elem_size);
    if (position > 0) p.recvs.push_back({data, seg.count * elem_size, nullptr, seg.count, false});
    // Root sends at once; middle ranks forward each segment as it arrives;
    // the last rank before root only receives.
    if (position < n - 1) p.sends.push_back({data, seg.count * elem_size, position == 0 ? -1 : static_cast<long>(j)});
  }
  // Then an empty token makes one full lap, from the last rank through the
  // root and on to the last rank again. Each rank checks the fingerprint of
  // what its left neighbour sends; the lap makes every rank's completion
  // depend on all of those checks, so ranks that disagree (about the root,
  // say) all fail with MISMATCH instead of some finishing with other data.
  const long last_data = static_cast<long>(p.recvs.size()) - 1;
  if (position == n - 1) {
    p.sends.push_back({nullptr, 0, last_data});             // start the lap
    p.recvs.push_back({nullptr, 0, nullptr, 0, false});      // and see it come back
  } else {
    p.recvs.push_back({nullptr, 0, nullptr, 0, false});
    p.sends.push_back({nullptr, 0, static_cast<long>(p.recvs.size()) - 1});  // pass it on
  }
  return run_pipeline(p, ctx.pipeline, ctx.memory);
}

Status ring_barrier(const ScheduleContext& ctx) {
  if (ctx.size == 1) return Status::ok();
  // A token goes around the ring twice: after the first lap every rank has
  // entered; the second lap tells every rank so.
  Pipeline p = ring_pipeline(ctx, fingerprint(CollectiveKind::kBarrier, DataType::kUint8, ReduceOp::kSum, 0, 0));
  for (int lap = 0; lap < 2; ++lap) {
    if (ctx.rank == 0) {
      p.sends.push_back({nullptr, 0, lap == 0 ? -1 : static_cast<long>(p.recvs.size()) - 1});
      p.recvs.push_back({nullptr, 0, nullptr, 0, false});
    } else {
      p.recvs.push_back({nullptr, 0, nullptr, 0, false});
      p.sends.push_back({nullptr, 0, static_cast<long>(p.recvs.size()) - 1});
    }
  }
  return run_pipeline(p, ctx.pipeline, ctx.memory);
}

namespace {

bool always(const Topology&, const Thresholds&, const Call&) { return true; }

// Everywhere but where halving and doubling outruns it (halving_doubling.h).
bool allreduce_applies(const Topology& t, const Thresholds& th, const Call& c) {
  return is_forced(th, "ring") || !halving_doubling_outruns_ring(t, c);
}

void neighbours(const Topology& t, const Thresholds&, std::vector<int>* out) {
  if (t.size < 2) return;
  add_peer((t.rank + 1) % t.size, t.rank, out);
  add_peer((t.rank + t.size - 1) % t.size, t.rank, out);
}

Status run_allreduce(const ScheduleContext& ctx, const Topology&, const AllreduceArgs& a) {
  if (a.wire != WireFormat::kNative) return ring_allreduce_encoded(ctx, a.spans, a.dtype, a.op, a.wire, a.residuals);
  return ring_allreduce_spans(ctx, a.spans, a.dtype, a.op);
}

Status run_allgather(const ScheduleContext& ctx, const Topology&, const AllgatherArgs& a) {
  return ring_allgather_displs(ctx, a.send, a.recv, a.counts, a.displs, a.dtype);
}

Status run_reduce_scatter(const ScheduleContext& ctx, const Topology&, const ReduceScatterArgs& a) {
  return ring_reduce_scatter_v(ctx, a.send, a.recv, a.counts, a.dtype, a.op);
}

double allreduce_seconds(const Topology& t, const Call& c) { return ring_allreduce_seconds(*t.costs, t, c.bytes); }
double allgather_seconds(const Topology& t, const Call& c) { return ring_allgather_seconds(*t.costs, t, c.bytes); }
double reduce_scatter_seconds(const Topology& t, const Call& c) {
  return ring_reduce_scatter_seconds(*t.costs, t, c.bytes);
}

Status run_broadcast(const ScheduleContext& ctx, const Topology&, const BroadcastArgs& a) {
  return ring_broadcast(ctx, a.buf, a.count, a.dtype, a.root);
}
double broadcast_seconds(const Topology& t, const Call& c) { return chain_seconds(*t.costs, t, c.bytes, false); }

}  // namespace

const AllreduceAlgorithm kRingAllreduce = {"ring", allreduce_applies, neighbours, run_allreduce, allreduce_seconds,
                                           /*carries_wire_formats=*/true};
const AllgatherAlgorithm kRingAllgather = {"ring", always, neighbours, run_allgather, allgather_seconds};
const ReduceScatterAlgorithm kRingReduceScatter = {"ring", always, neighbours, run_reduce_scatter,
                                                   reduce_scatter_seconds};
const BroadcastAlgorithm kRingBroadcast = {"ring", always, neighbours, run_broadcast, broadcast_seconds};

}  // namespace kolo
