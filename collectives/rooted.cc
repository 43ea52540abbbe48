#include "collectives/rooted.h"

#include <algorithm>
#include <memory>
#include <string>

#include "collectives/fingerprint.h"
#include "collectives/ring_schedule.h"

namespace kolo {
namespace {

// Every chain starts with an empty frame each way between neighbours
// (ring_fingerprint_exchange): otherwise ranks that disagree about the root
// could all wait to receive, none sending, until the deadline. One hop of
// latency, next to the chain's N - 1.
//
// The empty token's lap after a chain's data (see rooted.h): the chain's
// tail starts it once its last receive is done and sees it come back; every
// other rank passes it on.
void add_token_lap(Pipeline* p, bool tail) {
  if (tail) {
    p->sends.push_back({nullptr, 0, static_cast<long>(p->recvs.size()) - 1});
    p->recvs.push_back({nullptr, 0, nullptr, 0, false});
  } else {
    p->recvs.push_back({nullptr, 0, nullptr, 0, false});
    p->sends.push_back({nullptr, 0, static_cast<long>(p->recvs.size()) - 1});
  }
}

Status no_scratch(size_t bytes) {
  return device_error("cannot allocate " + std::to_string(bytes) + " bytes of scratch memory");
}

size_t sum(const std::vector<size_t>& v) {
  size_t s = 0;
  for (size_t x : v) s += x;
  return s;
}

}  // namespace

Status ring_reduce(const ScheduleContext& ctx, const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                   int root) {
  const size_t es = dtype_size(dtype);
  const int n = ctx.size;
  if (n == 1) {
    ctx.memory->copy(recv, send, count * es);
    ctx.memory->finalize(dtype, op, recv, count, 1);
    return Status::ok();
  }
  const uint64_t tag = fingerprint(CollectiveKind::kReduce, dtype, op, root, count);
  KOLO_RETURN_IF_ERROR(ring_fingerprint_exchange(ctx, tag));
  Pipeline p = ring_pipeline(ctx, tag);
  p.dtype = dtype;
  p.op = op;
  p.divisor = n;
  const int position = ring_mod(ctx.rank - root - 1, n);  // 0: root + 1, the chain's head; n - 1: root
  const bool head = position == 0, tail = position == n - 1;
  // Where this rank's partial result goes: root's recv; a scratch buffer on
  // the ranks in between (their recv may be NULL); the head forwards its
  // own data as it is.
  void* work = tail ? recv : nullptr;
  if (!head && !tail && count > 0) {
    work = ctx.memory->scratch(count * es);
    if (!work) return no_scratch(count * es);
  }
  const size_t segments = segments_per_chunk(count, es, ctx.segment_bytes);
  const bool average = op == ReduceOp::kAvg;
  for (size_t j = 0; j < segments; ++j) {
    const Range seg = partition(count, segments, j);
    if (!head) {
      // Between head and root a partial sum only goes on to the right.
      p.recvs.push_back({element(work, seg.offset, es), seg.count * es, element(send, seg.offset, es), seg.count,
                         tail && average, /*transient=*/!tail});
    }
    if (!tail) {
      p.sends.push_back({head ? element(send, seg.offset, es) : element(static_cast<const void*>(work), seg.offset, es),
                         seg.count * es, head ? -1 : static_cast<long>(j)});
    }
  }
  add_token_lap(&p, tail);
  return run_pipeline(p, ctx.pipeline, ctx.memory);
}

Status ring_gather_v(const ScheduleContext& ctx, const void* send, void* recv, const std::vector<size_t>& counts,
                     const std::vector<size_t>& displs, DataType dtype, int root) {
  const size_t es = dtype_size(dtype);
  const int n = ctx.size, r = ctx.rank;
  const bool is_root = r == root;
  if (is_root) {
    void* own = element(recv, displs[r], es);
    if (own != send) ctx.memory->copy(own, send, counts[r] * es);
  }
  if (n == 1) return Status::ok();
  const uint64_t tag = fingerprint(CollectiveKind::kGather, dtype, ReduceOp::kSum, root, sum(counts));
  KOLO_RETURN_IF_ERROR(ring_fingerprint_exchange(ctx, tag));
  Pipeline p = ring_pipeline(ctx, tag);
  // Positions along the chain: 0 is root + 1 (the head), n - 1 the root.
  // The rank at position p sends its own block, then forwards the blocks of
  // positions p - 1, p - 2, ..., 0 in the order they arrive (which is that
  // order, by induction), segment by segment.
  const int position = ring_mod(r - root - 1, n);
  auto rank_at = [&](int pos) { return ring_mod(root + 1 + pos, n); };
  size_t forwarded = 0;  // elements this rank relays
  for (int pos = position - 1; pos >= 0 && !is_root; --pos) forwarded += counts[rank_at(pos)];
  void* relay = nullptr;
  if (forwarded > 0) {
    relay = ctx.memory->scratch(forwarded * es);
    if (!relay) return no_scratch(forwarded * es);
  }
  if (!is_root) {
    const size_t segments = segments_per_chunk(counts[r], es, ctx.segment_bytes);
    for (size_t j = 0; j < segments; ++j) {
      const Range seg = partition(counts[r], segments, j);
      p.sends.push_back({element(send, seg.offset, es), seg.count * es, -1});
    }
  }
  size_t relay_at = 0;
  for (int pos = position - 1; pos >= 0; --pos) {
    const int q = rank_at(pos);
    const size_t segments = segments_per_chunk(counts[q], es, ctx.segment_bytes);
    for (size_t j = 0; j < segments; ++j) {
      const Range seg = partition(counts[q], segments, j);
      void* dest = is_root ? element(recv, displs[q] + seg.offset, es) : element(relay, relay_at + seg.offset, es);
      const long received = static_cast<long>(p.recvs.size());
      p.recvs.push_back({dest, seg.count * es, nullptr, seg.count, false});
      if (!is_root) p.sends.push_back({dest, seg.count * es, received});
    }
    relay_at += counts[q];
  }
  add_token_lap(&p, is_root);
  return run_pipeline(p, ctx.pipeline, ctx.memory);
}

Status ring_scatter_v(const ScheduleContext& ctx, const void* send, void* recv, const std::vector<size_t>& counts,
                      const std::vector<size_t>& displs, DataType dtype, int root) {
  const size_t es = dtype_size(dtype);
  const int n = ctx.size, r = ctx.rank;
  const bool is_root = r == root;
  if (is_root) {
    const void* own = element(send, displs[r], es);
    if (own != recv) ctx.memory->copy(recv, own, counts[r] * es);
  }
  if (n == 1) return Status::ok();
  const uint64_t tag = fingerprint(CollectiveKind::kScatter, dtype, ReduceOp::kSum, root, sum(counts));
  KOLO_RETURN_IF_ERROR(ring_fingerprint_exchange(ctx, tag));
  Pipeline p = ring_pipeline(ctx, tag);
  // Positions along the chain: 0 is the root (the head), n - 1 is root - 1.
  // The root sends the blocks of positions n - 1, n - 2, ..., 1, farthest
  // first; the rank at position p receives those of n - 1 down to p,
  // forwards all but the last, and keeps the last (its own) in recv.
  const int position = ring_mod(r - root, n);
  auto rank_at = [&](int pos) { return ring_mod(root + pos, n); };
  if (is_root) {
    for (int pos = n - 1; pos >= 1; --pos) {
      const int q = rank_at(pos);
      const size_t segments = segments_per_chunk(counts[q], es, ctx.segment_bytes);
      for (size_t j = 0; j < segments; ++j) {
        const Range seg = partition(counts[q], segments, j);
        p.sends.push_back({element(send, displs[q] + seg.offset, es), seg.count * es, -1});
      }
    }
  } else {
    size_t forwarded = 0;
    for (int pos = n - 1; pos > position; --pos) forwarded += counts[rank_at(pos)];
    void* relay = nullptr;
    if (forwarded > 0) {
      relay = ctx.memory->scratch(forwarded * es);
      if (!relay) return no_scratch(forwarded * es);
    }
    size_t relay_at = 0;
    for (int pos = n - 1; pos >= position; --pos) {
      const int q = rank_at(pos);
      const size_t segments = segments_per_chunk(counts[q], es, ctx.segment_bytes);
      for (size_t j = 0; j < segments; ++j) {
        const Range seg = partition(counts[q], segments, j);
        const long received = static_cast<long>(p.recvs.size());
        if (pos == position) {
          p.recvs.push_back({element(recv, seg.offset, es), seg.count * es, nullptr, seg.count, false});
        } else {
          void* dest = element(relay, relay_at + seg.offset, es);
          p.recvs.push_back({dest, seg.count * es, nullptr, seg.count, false});
          p.sends.push_back({dest, seg.count * es, received});
        }
      }
      if (pos != position) relay_at += counts[q];
    }
  }
  add_token_lap(&p, position == n - 1);
  return run_pipeline(p, ctx.pipeline, ctx.memory);
}

Status ring_allgather_displs(const ScheduleContext& ctx, const void* send, void* recv, const std::vector<size_t>& counts,
                             const std::vector<size_t>& displs, DataType dtype) {
  const size_t es = dtype_size(dtype);
  const int n = ctx.size, r = ctx.rank;
  bool packed = true;
  size_t offset = 0;
  for (int q = 0; q < n; ++q) {
    packed = packed && displs[q] == offset;
    offset += counts[q];
  }
  if (packed) return ring_allgather_v(ctx, send, recv, counts, dtype);
  const size_t total = offset;
  void* work = total > 0 ? ctx.memory->scratch(total * es) : nullptr;
  if (total > 0 && !work) return no_scratch(total * es);
  // send may be this rank's block of recv (in place): it is only read, and
  // recv is written after the ring is done.
  KOLO_RETURN_IF_ERROR(ring_allgather_v(ctx, send, work, counts, dtype));
  offset = 0;
  for (int q = 0; q < n; ++q) {
    if (q != r || element(static_cast<const void*>(recv), displs[q], es) != send) {
      ctx.memory->copy(element(recv, displs[q], es), element(static_cast<const void*>(work), offset, es), counts[q] * es);
    }
    offset += counts[q];
  }
  return Status::ok();
}

}  // namespace kolo
