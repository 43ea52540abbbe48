#include "collectives/ring.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/fingerprint.h"
#include "collectives/recursive_doubling.h"
#include "collectives/ring_schedule.h"
#include "common/ranges.h"

namespace kolo {
namespace {

unsigned char* at(void* base, size_t elem_offset, size_t elem_size) {
  return static_cast<unsigned char*>(base) + elem_offset * elem_size;
}
const unsigned char* at(const void* base, size_t elem_offset, size_t elem_size) {
  return static_cast<const unsigned char*>(base) + elem_offset * elem_size;
}

Pipeline make_pipeline(const RingContext& ctx, uint64_t tag) {
  Pipeline p;
  p.transport = ctx.transport;
  p.left = ctx.left;
  p.right = ctx.right;
  p.tag = tag;
  return p;
}

// What one ring step does to one segment: where the sent data comes from,
// and where the received data goes (reduced with `local`, or copied).
struct StepUnit {
  const void* send;
  size_t send_count;       // elements sent
  void* recv_dest;
  const void* recv_local;  // nullptr: plain receive
  size_t recv_count;       // elements received (chunks differ by at most one)
  bool finalize;
};

// Appends `steps` ring steps over `segments` segments in wavefront order:
// unit (step s, segment j) belongs to wave s + j, and waves go out in order,
// lower steps first within a wave. A unit forwards what its predecessor
// (s - 1, j) received one wave earlier, so every dependency points to an
// earlier wave (no deadlock: the left neighbour sends in the same order), and
// each segment is forwarded right after it was received and reduced, while
// it is still in cache. All steps of different segments overlap, so the
// wire stays busy as in a step-by-step schedule.
template <typename UnitFn>
void add_wavefront(int steps, size_t segments, size_t es, Pipeline* p, UnitFn unit) {
  std::vector<long> recv_index(static_cast<size_t>(steps) * segments);
  const long waves = steps + static_cast<long>(segments) - 1;
  for (long t = 0; t < waves; ++t) {
    const int first = static_cast<int>(std::max<long>(0, t - static_cast<long>(segments) + 1));
    const int last = static_cast<int>(std::min<long>(steps - 1, t));
    for (int st = first; st <= last; ++st) {
      const size_t j = static_cast<size_t>(t - st);
      StepUnit u = unit(st, j);
      const long after = st == 0 ? -1 : recv_index[(st - 1) * segments + j];
      p->sends.push_back({u.send, u.send_count * es, after});
      recv_index[st * segments + j] = static_cast<long>(p->recvs.size());
      p->recvs.push_back({u.recv_dest, u.recv_count * es, u.recv_local, u.recv_count, u.finalize});
    }
  }
}

// The units of a reduce-scatter step (0 <= s < size - 1) after which rank r
// holds chunk r reduced. `input` is this rank's data, `work` where partial
// results go (forwarded at the next step), `final_out` where chunk r lands.
StepUnit reduce_scatter_unit(const RingContext& ctx, const RingLayout& L, size_t es, int s, size_t j,
                             const void* input, void* work, void* final_out, bool average) {
  const int n = ctx.size, r = ctx.rank;
  const bool last = s == n - 2;
  Range out = L.segment(rs_send_chunk(r, n, s), j);
  Range in = L.segment(rs_recv_chunk(r, n, s), j);
  StepUnit u;
  // Step 0 sends this rank's own data; later steps forward what the previous
  // step reduced.
  u.send = s == 0 ? at(input, out.offset, es) : at(work, out.offset, es);
  u.send_count = out.count;
  u.recv_dest = last ? at(final_out, in.offset, es) : at(work, in.offset, es);
  u.recv_local = at(input, in.offset, es);
  u.recv_count = in.count;
  u.finalize = last && average;
  return u;
}

// The units of an allgather step (0 <= s < size - 1): finished chunks
// circulate, each landing directly in `out`. Step 0 sends chunk r from `first`.
StepUnit allgather_unit(const RingContext& ctx, const RingLayout& L, size_t es, int s, size_t j, const void* first,
                        void* out) {
  const int n = ctx.size, r = ctx.rank;
  Range send = L.segment(ag_send_chunk(r, n, s), j);
  Range recv = L.segment(ag_recv_chunk(r, n, s), j);
  StepUnit u;
  u.send = s == 0 ? at(first, send.offset, es) : at(out, send.offset, es);
  u.send_count = send.count;
  u.recv_dest = at(out, recv.offset, es);
  u.recv_local = nullptr;
  u.recv_count = recv.count;
  u.finalize = false;
  return u;
}

// For calls with nothing to move: one empty frame to the right, one from
// the left, so that a rank whose neighbour called something else (another
// count, collective, dtype, op or root) learns it now, as MISMATCH, instead
// of waiting for a message that never comes.
Status check_fingerprint_only(const RingContext& ctx, uint64_t tag) {
  if (ctx.size == 1) return Status::ok();
  Pipeline p = make_pipeline(ctx, tag);
  p.sends.push_back({nullptr, 0, -1});
  p.recvs.push_back({nullptr, 0, nullptr, 0, false});
  return run_pipeline(p, ctx.pipeline, ctx.memory);
}

}  // namespace

Status ring_allreduce(const RingContext& ctx, const void* send, void* recv, size_t count, DataType dtype,
                      ReduceOp op) {
  const size_t es = dtype_size(dtype);
  if (count == 0) return check_fingerprint_only(ctx, fingerprint(CollectiveKind::kAllreduce, dtype, op, 0, 0));
  if (ctx.size == 1) {
    ctx.memory->copy(recv, send, count * es);
    return Status::ok();
  }
  // Small buffers are latency-bound: log2(N) exchanges beat 2(N-1) hops.
  if (count * es <= ctx.small_allreduce_bytes) return recursive_doubling_allreduce(ctx, send, recv, count, dtype, op);
  RingLayout L(count, ctx.size, es, ctx.segment_bytes);
  Pipeline p = make_pipeline(ctx, fingerprint(CollectiveKind::kAllreduce, dtype, op, 0, count));
  p.dtype = dtype;
  p.op = op;
  p.divisor = ctx.size;
  // Partial results live in recv itself: each chunk's slot there is written
  // once by reduce-scatter and once more by allgather. Steps 0..N-2 reduce,
  // steps N-1..2N-3 gather; step N-1 forwards chunk r, which step N-2 finished.
  const int rs_steps = ctx.size - 1;
  const bool average = op == ReduceOp::kAvg;
  long last_reduce = -1;
  add_wavefront(2 * rs_steps, L.segments(), es, &p, [&](int st, size_t j) {
    if (st < rs_steps) last_reduce = static_cast<long>(p.recvs.size());
    return st < rs_steps ? reduce_scatter_unit(ctx, L, es, st, j, send, recv, recv, average)
                         : allgather_unit(ctx, L, es, st - rs_steps, j, recv, recv);
  });
  p.mark_recv = last_reduce;
  p.mark_time = ctx.reduce_scatter_done;
  return run_pipeline(p, ctx.pipeline, ctx.memory);
}

Status ring_allreduce_spans(const RingContext& ctx, const std::vector<Span>& spans, DataType dtype, ReduceOp op) {
  const size_t es = dtype_size(dtype);
  std::vector<size_t> start(spans.size() + 1, 0);  // each span's first element in the logical buffer
  for (size_t i = 0; i < spans.size(); ++i) start[i + 1] = start[i] + spans[i].count;
  const size_t total = start.back();
  if (spans.size() == 1) return ring_allreduce(ctx, spans[0].send, spans[0].recv, total, dtype, op);
  if (total == 0) return check_fingerprint_only(ctx, fingerprint(CollectiveKind::kAllreduce, dtype, op, 0, 0));
  if (ctx.size == 1 || total * es <= ctx.small_allreduce_bytes) {
    // Small (or alone): through one contiguous buffer, which costs little.
    // Scratch is free here: ring_allreduce itself uses only staging.
    auto* buf = static_cast<unsigned char*>(ctx.memory->scratch(total * es));
    if (!buf) return device_error("cannot allocate " + std::to_string(total * es) + " bytes of scratch memory");
    for (size_t i = 0; i < spans.size(); ++i) ctx.memory->copy(buf + start[i] * es, spans[i].send, spans[i].count * es);
    KOLO_RETURN_IF_ERROR(ring_allreduce(ctx, buf, buf, total, dtype, op));
    for (size_t i = 0; i < spans.size(); ++i) ctx.memory->copy(spans[i].recv, buf + start[i] * es, spans[i].count * es);
    return Status::ok();
  }
  RingLayout L(total, ctx.size, es, ctx.segment_bytes);
  Pipeline p = make_pipeline(ctx, fingerprint(CollectiveKind::kAllreduce, dtype, op, 0, total));
  p.dtype = dtype;
  p.op = op;
  p.divisor = ctx.size;
  const int n = ctx.size, r = ctx.rank, rs_steps = n - 1, steps = 2 * rs_steps;
  const bool average = op == ReduceOp::kAvg;
  const size_t segs = L.segments();
  // Calls fn(span, first element within it, count) for each piece of the
  // logical range, cut at span boundaries.
  auto pieces = [&](Range range, auto&& fn) {
    size_t at = range.offset, left = range.count;
    size_t i = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), at) - start.begin()) - 1;
    while (left > 0) {
      while (start[i + 1] <= at) ++i;  // skip empty spans
      const size_t take = std::min(left, start[i + 1] - at);
      fn(spans[i], at - start[i], take);
      at += take;
      left -= take;
    }
  };
  // The same wavefront order as ring_allreduce; a unit becomes one message
  // per piece. A send at step s forwards the chunk received at step s - 1,
  // cut the same way, so piece k waits for that step's piece k.
  std::vector<std::vector<long>> received(static_cast<size_t>(steps) * segs);
  long last_reduce = -1;
  const long waves = steps + static_cast<long>(segs) - 1;
  for (long t = 0; t < waves; ++t) {
    const int first = static_cast<int>(std::max<long>(0, t - static_cast<long>(segs) + 1));
    const int last = static_cast<int>(std::min<long>(steps - 1, t));
    for (int st = first; st <= last; ++st) {
      const size_t j = static_cast<size_t>(t - st);
      const bool reducing = st < rs_steps;
      const int send_chunk = reducing ? rs_send_chunk(r, n, st) : ag_send_chunk(r, n, st - rs_steps);
      const int recv_chunk = reducing ? rs_recv_chunk(r, n, st) : ag_recv_chunk(r, n, st - rs_steps);
      size_t k = 0;
      pieces(L.segment(send_chunk, j), [&](const Span& sp, size_t off, size_t count) {
        // Step 0 sends this rank's own data; later steps what arrived before.
        const void* from = st == 0 ? at(sp.send, off, es) : at(static_cast<const void*>(sp.recv), off, es);
        const long after = st == 0 ? -1 : received[(st - 1) * segs + j][k];
        p.sends.push_back({from, count * es, after});
        ++k;
      });
      auto& mine = received[st * segs + j];
      pieces(L.segment(recv_chunk, j), [&](const Span& sp, size_t off, size_t count) {
        mine.push_back(static_cast<long>(p.recvs.size()));
        if (reducing) last_reduce = static_cast<long>(p.recvs.size());
        p.recvs.push_back({at(sp.recv, off, es), count * es, reducing ? at(sp.send, off, es) : nullptr, count,
                           reducing && st == rs_steps - 1 && average});
      });
    }
  }
  p.mark_recv = last_reduce;
  p.mark_time = ctx.reduce_scatter_done;
  return run_pipeline(p, ctx.pipeline, ctx.memory);
}

Status ring_reduce_scatter(const RingContext& ctx, const void* send, void* recv, size_t recv_count, DataType dtype,
                           ReduceOp op) {
  return ring_reduce_scatter_v(ctx, send, recv, std::vector<size_t>(ctx.size, recv_count), dtype, op);
}

Status ring_reduce_scatter_v(const RingContext& ctx, const void* send, void* recv,
                             const std::vector<size_t>& counts, DataType dtype, ReduceOp op) {
  const size_t es = dtype_size(dtype);
  RingLayout L(counts, es, ctx.segment_bytes);
  size_t total = 0;
  for (size_t n : counts) total += n;
  const Range mine = L.chunk(ctx.rank);
  if (total == 0) {
    return check_fingerprint_only(ctx, fingerprint(CollectiveKind::kReduceScatter, dtype, op, 0, 0));
  }
  if (ctx.size == 1) {
    ctx.memory->copy(recv, send, mine.count * es);
    ctx.memory->finalize(dtype, op, recv, mine.count, 1);
    return Status::ok();
  }
  Pipeline p = make_pipeline(ctx, fingerprint(CollectiveKind::kReduceScatter, dtype, op, 0, total));
  p.dtype = dtype;
  p.op = op;
  p.divisor = ctx.size;
  // Partial results need a full-size scratch buffer: recv holds one block.
  void* work = ctx.memory->scratch(total * es);
  if (!work) return device_error("cannot allocate " + std::to_string(total * es) + " bytes of scratch memory");
  // Where this rank's chunk is written. Straight into recv when that is
  // safe; if recv overlaps the input anywhere but this rank's own block
  // (e.g. send == recv), an in-flight send could still read it, so the
  // result goes through scratch and is copied at the end.
  const void* own_block_in_send = at(send, mine.offset, es);
  const bool via_scratch = ranges_overlap(send, total * es, recv, mine.count * es) && recv != own_block_in_send;
  unsigned char* final_out = via_scratch ? static_cast<unsigned char*>(work)
                                         : static_cast<unsigned char*>(recv) - mine.offset * es;
  const bool average = op == ReduceOp::kAvg;
  add_wavefront(ctx.size - 1, L.segments(), es, &p, [&](int st, size_t j) {
    return reduce_scatter_unit(ctx, L, es, st, j, send, work, final_out, average);
  });
  KOLO_RETURN_IF_ERROR(run_pipeline(p, ctx.pipeline, ctx.memory));
  if (via_scratch) ctx.memory->copy(recv, at(work, mine.offset, es), mine.count * es);
  return Status::ok();
}

Status ring_allgather(const RingContext& ctx, const void* send, void* recv, size_t send_count, DataType dtype) {
  return ring_allgather_v(ctx, send, recv, std::vector<size_t>(ctx.size, send_count), dtype);
}

Status ring_allgather_v(const RingContext& ctx, const void* send, void* recv, const std::vector<size_t>& counts,
                        DataType dtype) {
  const size_t es = dtype_size(dtype);
  RingLayout L(counts, es, ctx.segment_bytes);
  size_t total = 0;
  for (size_t n : counts) total += n;
  if (total == 0) {
    return check_fingerprint_only(ctx, fingerprint(CollectiveKind::kAllgather, dtype, ReduceOp::kSum, 0, 0));
  }
  const Range mine = L.chunk(ctx.rank);
  const size_t block = mine.count * es;
  unsigned char* own = static_cast<unsigned char*>(recv) + mine.offset * es;
  // "In place" is send == recv (the convention) or send == own slot (NCCL's).
  const void* source = (send == recv) ? own : send;
  if (ctx.size == 1) {
    ctx.memory->copy(own, source, block);
    return Status::ok();
  }
  Pipeline p = make_pipeline(ctx, fingerprint(CollectiveKind::kAllgather, dtype, ReduceOp::kSum, 0, total));
  // Step 0 sends chunk r; the layout's chunk r is the block at own, so the
  // units address `first` such that its chunk r offset lands on source.
  const unsigned char* first = static_cast<const unsigned char*>(source) - mine.offset * es;
  add_wavefront(ctx.size - 1, L.segments(), es, &p,
                [&](int st, size_t j) { return allgather_unit(ctx, L, es, st, j, first, recv); });
  // Our own block also belongs in recv; a local copy, cheap next to the
  // blocks that cross the wire.
  ctx.memory->copy(own, source, block);
  return run_pipeline(p, ctx.pipeline, ctx.memory);
}

Status ring_broadcast(const RingContext& ctx, void* buf, size_t count, DataType dtype, int root) {
  const size_t es = dtype_size(dtype);
  const uint64_t tag = fingerprint(CollectiveKind::kBroadcast, dtype, ReduceOp::kSum, root, count);
  if (ctx.size == 1) return Status::ok();
  if (count == 0) return check_fingerprint_only(ctx, tag);
  Pipeline p = make_pipeline(ctx, tag);
  const int n = ctx.size;
  const int position = ring_mod(ctx.rank - root, n);  // hops from root
  const size_t segments = segments_per_chunk(count, es, ctx.segment_bytes);
  for (size_t j = 0; j < segments; ++j) {
    Range seg = partition(count, segments, j);
    unsigned char* data = at(buf, seg.offset, es);
    if (position > 0) p.recvs.push_back({data, seg.count * es, nullptr, seg.count, false});
    // Root sends at once; middle ranks forward each segment as it arrives;
    // the last rank before root only receives.
    if (position < n - 1) p.sends.push_back({data, seg.count * es, position == 0 ? -1 : static_cast<long>(j)});
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

Status ring_barrier(const RingContext& ctx) {
  if (ctx.size == 1) return Status::ok();
  // A token goes around the ring twice: after the first lap every rank has
  // entered; the second lap tells every rank so.
  Pipeline p = make_pipeline(ctx, fingerprint(CollectiveKind::kBarrier, DataType::kUint8, ReduceOp::kSum, 0, 0));
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

}  // namespace kolo
