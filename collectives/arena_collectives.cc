#include "collectives/arena_collectives.h"

#include <algorithm>

#include "collectives/arena_allreduce.h"
#include "collectives/arena_writes.h"
#include "collectives/cost_model.h"
#include "collectives/fingerprint.h"
#include "transport/shared_arena.h"

namespace kolo {
namespace {

// This chunk's half of rank q's slot (SharedArena::next_half).
struct Halves {
  SharedArena& arena;
  size_t parity;
  unsigned char* of(int q) const { return arena.slot(q) + parity; }
};

Halves next_chunk(SharedArena& arena) { return {arena, arena.next_half()}; }

Deadline deadline(const ScheduleContext& ctx) { return Deadline::after_seconds_coarse(ctx.pipeline.timeout_s); }

// The blocks' sizes, all of them, in the fingerprint's count: ranks that
// split the same total differently must fail (MISMATCH), where the ring
// would find frames of other sizes; the arena has no frames.
uint64_t counts_hash(const std::vector<size_t>& counts) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (size_t c : counts) {
    for (int b = 0; b < 8; ++b) h = (h ^ ((c >> (8 * b)) & 0xff)) * 1099511628211ull;
  }
  return h ^ (h >> 32);
}

}  // namespace

Status arena_allgather(const ScheduleContext& ctx, SharedArena& arena, const AllgatherArgs& a) {
  const size_t elem = dtype_size(a.dtype);
  const int n = arena.size(), r = arena.rank();
  size_t largest = 0, result = 0;
  for (int q = 0; q < n; ++q) {
    largest = std::max(largest, a.counts[q]);
    result = std::max(result, a.displs[q] + a.counts[q]);
  }
  KOLO_RETURN_IF_ERROR(
      ring_fingerprint_exchange(ctx, fingerprint(CollectiveKind::kSharedAllgather, a.dtype, ReduceOp::kSum, 0,
                                                 counts_hash(a.counts))));
  const unsigned char* mine = a.send == a.recv ? element(static_cast<const void*>(a.recv), a.displs[r], elem)
                                               : static_cast<const unsigned char*>(a.send);
  const size_t half = arena.slot_bytes() / 2 / elem;
  ArenaWrites writes(arena, ArenaWrites::kAllgather, a.counts[r] * elem * n, result * elem);
  for (size_t done = 0; done < largest; done += half) {
    const Halves h = next_chunk(arena);
    const auto piece = [&](int q) { return a.counts[q] > done ? std::min(half, a.counts[q] - done) : size_t{0}; };
    copy_result(ctx.memory, writes.slots_around_cache(), h.of(r), mine + done * elem, piece(r) * elem);
    KOLO_RETURN_IF_ERROR(arena.barrier(deadline(ctx)));
    for (int q = 0; q < n; ++q) {
      unsigned char* to = element(a.recv, a.displs[q] + done, elem);
      if (q == r && to == mine + done * elem) continue;  // in place
      copy_result(ctx.memory, writes.result_around_cache(), to, h.of(q), piece(q) * elem);
    }
  }
  writes.done();
  return Status::ok();
}

Status arena_reduce_scatter(const ScheduleContext& ctx, SharedArena& arena, const ReduceScatterArgs& a) {
  const size_t elem = dtype_size(a.dtype);
  const int n = arena.size(), r = arena.rank();
  std::vector<size_t> at(n + 1, 0);  // block q of the input starts at at[q]
  for (int q = 0; q < n; ++q) at[q + 1] = at[q] + a.counts[q];
  const size_t largest = *std::max_element(a.counts.begin(), a.counts.end());
  KOLO_RETURN_IF_ERROR(
      ring_fingerprint_exchange(ctx, fingerprint(CollectiveKind::kSharedReduceScatter, a.dtype, a.op, 0,
                                                 counts_hash(a.counts))));
  // A chunk holds the same stretch of every block: half a slot over N.
  const size_t step = std::max<size_t>(1, arena.slot_bytes() / 2 / elem / n);
  const auto* in = static_cast<const unsigned char*>(a.send);
  auto* out = static_cast<unsigned char*>(a.recv);
  ArenaWrites writes(arena, ArenaWrites::kReduceScatter, at[n] * elem, 0);
  for (size_t done = 0; done < largest; done += step) {
    const Halves h = next_chunk(arena);
    const auto piece = [&](int q) { return a.counts[q] > done ? std::min(step, a.counts[q] - done) : size_t{0}; };
    for (int q = 0; q < n; ++q) {
      copy_result(ctx.memory, writes.slots_around_cache(), h.of(r) + q * step * elem, in + (at[q] + done) * elem,
                  piece(q) * elem);
    }
    KOLO_RETURN_IF_ERROR(arena.barrier(deadline(ctx)));
    // This rank's block, reduced in rank order from every slot: the same
    // order on every rank, as the ring's results are bitwise the same.
    const size_t c = piece(r);
    unsigned char* dest = out + done * elem;
    if (c == 0) continue;
    ctx.memory->copy(dest, h.of(0) + r * step * elem, c * elem);
    for (int q = 1; q < n; ++q) ctx.memory->reduce(a.dtype, a.op, dest, dest, h.of(q) + r * step * elem, c);
    ctx.memory->finalize(a.dtype, a.op, dest, c, n);
  }
  writes.done();
  return Status::ok();
}

Status arena_broadcast(const ScheduleContext& ctx, SharedArena& arena, void* buf, size_t count, DataType dtype,
                       int root) {
  const size_t elem = dtype_size(dtype);
  KOLO_RETURN_IF_ERROR(
      ring_fingerprint_exchange(ctx, fingerprint(CollectiveKind::kSharedBroadcast, dtype, ReduceOp::kSum, root, count)));
  const size_t half = arena.slot_bytes() / 2 / elem;
  auto* data = static_cast<unsigned char*>(buf);
  const bool is_root = arena.rank() == root;
  ArenaWrites writes(arena, ArenaWrites::kBroadcast, count * elem, is_root ? 0 : count * elem);
  for (size_t done = 0; done < count; done += half) {
    const Halves h = next_chunk(arena);
    const size_t c = std::min(half, count - done);
    unsigned char* mine = data + done * elem;
    if (is_root) copy_result(ctx.memory, writes.slots_around_cache(), h.of(root), mine, c * elem);
    KOLO_RETURN_IF_ERROR(arena.barrier(deadline(ctx)));
    if (!is_root) copy_result(ctx.memory, writes.result_around_cache(), mine, h.of(root), c * elem);
  }
  writes.done();
  return Status::ok();
}

namespace {

Status run_allgather(const ScheduleContext& ctx, const Topology& t, const AllgatherArgs& a) {
  return arena_allgather(ctx, *t.arena, a);
}
Status run_reduce_scatter(const ScheduleContext& ctx, const Topology& t, const ReduceScatterArgs& a) {
  return arena_reduce_scatter(ctx, *t.arena, a);
}
Status run_broadcast(const ScheduleContext& ctx, const Topology& t, const BroadcastArgs& a) {
  return arena_broadcast(ctx, *t.arena, a.buf, a.count, a.dtype, a.root);
}

double allgather_seconds(const Topology& t, const Call& c) { return arena_allgather_seconds(*t.costs, t, c.bytes); }
double reduce_scatter_seconds(const Topology& t, const Call& c) {
  return arena_reduce_scatter_seconds(*t.costs, t, c.bytes);
}
double broadcast_seconds(const Topology& t, const Call& c) { return arena_broadcast_seconds(*t.costs, t, c.bytes); }

}  // namespace

const AllgatherAlgorithm kSharedMemoryAllgather = {"shared_memory", arena_applies, no_peers, run_allgather,
                                                   allgather_seconds};
const ReduceScatterAlgorithm kSharedMemoryReduceScatter = {"shared_memory", arena_applies, no_peers,
                                                           run_reduce_scatter, reduce_scatter_seconds};
const BroadcastAlgorithm kSharedMemoryBroadcast = {"shared_memory", arena_applies, no_peers, run_broadcast,
                                                   broadcast_seconds};

}  // namespace kolo
