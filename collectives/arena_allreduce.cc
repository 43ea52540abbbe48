#include "collectives/arena_allreduce.h"

#include <algorithm>

#include "collectives/cost_model.h"
#include "collectives/fingerprint.h"
#include "collectives/ring_schedule.h"
#include "collectives/span_cutter.h"
#include "transport/shared_arena.h"

namespace kolo {

namespace {

// A buffer that fits a mailbox, in one exchange: every rank posts the whole
// of it and reduces all N in rank order, the same on every rank, so the
// results are bit-identical. The mailboxes carry each rank's fingerprint,
// so ranks that disagree about the call all see it here, with no message.
Status one_shot_allreduce(const ScheduleContext& ctx, SharedArena& arena, const SpanCutter& buffer,
                          DataType dtype, ReduceOp op) {
  const size_t elem = dtype_size(dtype);
  const size_t total = buffer.total();
  const int n = arena.size();
  const uint64_t mine = fingerprint(CollectiveKind::kSharedAllreduce, dtype, op, 0, total);
  unsigned char* outbox = arena.outbox();
  size_t taken = 0;
  buffer.for_each_piece(Range{0, total}, [&](const Span& sp, size_t at, size_t c) {
    ctx.memory->copy(outbox + taken * elem, element(sp.send, at, elem), c * elem);
    taken += c;
  });
  // A rank that runs this sends no message: one from a rank this one waits
  // for means that rank runs another collective (which would otherwise
  // wait for this one's reply until the deadline), and so does a rank
  // waiting for a message from this one (check_not_awaited).
  const auto stalled = [&](int q) {
    KOLO_RETURN_IF_ERROR(ctx.transport->check_not_awaited(mine));
    Arrival next;
    if (!ctx.transport->can_peek(q) || !ctx.transport->peek(q, &next).is_ok()) return Status::ok();  // not connected
    if (next.state != Arrival::kArrived) return Status::ok();
    return mismatch("rank " + std::to_string(q) + " sent a message (" + describe_fingerprint(next.tag) +
                    ") where this rank runs " + describe_fingerprint(mine) + ", which sends none");
  };
  int differs = -1;
  KOLO_RETURN_IF_ERROR(
      arena.exchange(mine, Deadline::after_seconds_coarse(ctx.pipeline.timeout_s), stalled, &differs));
  if (differs >= 0) {
    return mismatch("rank " + std::to_string(differs) + " runs " + describe_fingerprint(arena.fingerprint_of(differs)) +
                    " where this rank runs " + describe_fingerprint(mine));
  }
  size_t done = 0;
  buffer.for_each_piece(Range{0, total}, [&](const Span& sp, size_t at, size_t c) {
    unsigned char* out = element(sp.recv, at, elem);
    const size_t from = done * elem;
    ctx.memory->reduce(dtype, op, out, arena.inbox(0) + from, arena.inbox(1) + from, c);
    for (int q = 2; q < n; ++q) ctx.memory->reduce(dtype, op, out, out, arena.inbox(q) + from, c);
    ctx.memory->finalize(dtype, op, out, c, n);
    done += c;
  });
  return Status::ok();
}

}  // namespace

Status arena_allreduce_spans(const ScheduleContext& ctx, SharedArena& arena, SpanList spans,
                             DataType dtype, ReduceOp op) {
  const size_t elem = dtype_size(dtype);
  const SpanCutter buffer(spans);
  const size_t total = buffer.total();
  // The ranks' ordered messages say first whether everyone called this
  // allreduce this way: a rank that called another collective, or runs
  // this one by another algorithm (a device buffer, another KOLO_ALGORITHM),
  // makes both sides fail with MISMATCH now, where the barrier below would
  // wait for the deadline.
  KOLO_RETURN_IF_ERROR(
      ring_fingerprint_exchange(ctx, fingerprint(CollectiveKind::kSharedAllreduce, dtype, op, 0, total)));
  const int n = arena.size(), r = arena.rank();
  const size_t half = arena.slot_bytes() / 2 / elem;  // elements per chunk
  const double timeout_s = ctx.pipeline.timeout_s;
  // A result larger than the cache goes around it (see Memory::copy_streaming).
  const bool stream_out = result_outgrows_cache(total * elem);
  for (size_t done = 0; done < total; done += half) {
    const size_t count = std::min(half, total - done);
    // A rank may still be copying the previous chunk out of the other half.
    const size_t parity = arena.next_half();
    const auto chunk_of = [&](int q) { return arena.slot(q) + parity; };
    // 1. This rank's chunk into its slot.
    unsigned char* mine = chunk_of(r);
    size_t at_in_chunk = 0;
    buffer.for_each_piece(Range{done, count}, [&](const Span& sp, size_t at, size_t c) {
      ctx.memory->copy(mine + at_in_chunk * elem, element(sp.send, at, elem), c * elem);
      at_in_chunk += c;
    });
    KOLO_RETURN_IF_ERROR(arena.barrier(Deadline::after_seconds_coarse(timeout_s)));
    // 2. This rank's share, reduced from every slot over its own.
    const RingLayout shares(count, n, elem, count * elem);
    const Range own = shares.chunk(r);
    unsigned char* out = mine + own.offset * elem;
    for (int k = 1; k < n; ++k) {
      const int q = (r + k) % n;
      ctx.memory->reduce(dtype, op, out, out, chunk_of(q) + own.offset * elem, own.count);
    }
    ctx.memory->finalize(dtype, op, out, own.count, n);
    KOLO_RETURN_IF_ERROR(arena.barrier(Deadline::after_seconds_coarse(timeout_s)));
    // 3. Every share out, from the slot of the rank that reduced it.
    for (int q = 0; q < n; ++q) {
      const Range share = shares.chunk(q);
      const unsigned char* from = chunk_of(q) + share.offset * elem;
      size_t taken = 0;
      buffer.for_each_piece(Range{done + share.offset, share.count}, [&](const Span& sp, size_t at, size_t c) {
        copy_result(ctx.memory, stream_out, element(sp.recv, at, elem), from + taken * elem, c * elem);
        taken += c;
      });
    }
  }
  return Status::ok();
}

bool arena_applies(const Topology& t, const Thresholds&, const Call& c) {
  return t.arena != nullptr && c.host_memory && t.size > 1 && c.bytes > 0;
}

namespace {

double seconds(const Topology& t, const Call& c) { return arena_allreduce_seconds(*t.costs, t, c.bytes); }

Status run(const ScheduleContext& ctx, const Topology& t, const AllreduceArgs& a) {
  return arena_allreduce_spans(ctx, *t.arena, a.spans, a.dtype, a.op);
}

bool one_shot_applies(const Topology& t, const Thresholds& th, const Call& c) {
  return arena_applies(t, th, c) && c.bytes <= SharedArena::kMailboxBytes;
}

double one_shot_seconds(const Topology& t, const Call& c) { return one_shot_allreduce_seconds(*t.costs, t, c.bytes); }

Status run_one_shot(const ScheduleContext& ctx, const Topology& t, const AllreduceArgs& a) {
  const SpanCutter buffer(a.spans);
  return one_shot_allreduce(ctx, *t.arena, buffer, a.dtype, a.op);
}

}  // namespace

const AllreduceAlgorithm kSharedMemoryAllreduce = {"shared_memory", arena_applies, no_peers, run, seconds};
const AllreduceAlgorithm kSharedMemoryOneShotAllreduce = {"shared_memory", one_shot_applies, no_peers, run_one_shot,
                                                          one_shot_seconds};

}  // namespace kolo
