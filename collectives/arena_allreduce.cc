#include "collectives/arena_allreduce.h"

#include <algorithm>

#include "collectives/arena_writes.h"
#include "collectives/cost_model.h"
#include "collectives/fingerprint.h"
#include "collectives/ring_schedule.h"
#include "collectives/span_cutter.h"
#include "transport/any_source.h"
#include "transport/shared_arena.h"

namespace kolo {

Status arena_agree(const ScheduleContext& ctx, SharedArena& arena, uint64_t mine) {
  // A rank that runs this sends no message: one from a rank this one waits
  // for means that rank runs another collective (which would otherwise
  // wait for this one's reply until the deadline), and so does a rank
  // waiting for a message from this one (check_not_awaited).
  const auto stalled = [&](int q) {
    KOLO_RETURN_IF_ERROR(ctx.transport->check_not_awaited(mine));
    AnySource* any = ctx.transport->any_source();
    Arrival next;
    if (!any || !any->can_peek(q) || !any->peek(q, &next).is_ok()) return Status::ok();  // not connected
    if (next.state != Arrival::kArrived) return Status::ok();
    return mismatch("rank " + std::to_string(q) + " sent a message (" + describe_fingerprint(next.tag) +
                    ") where this rank runs " + describe_fingerprint(mine) + ", which sends none");
  };
  int differs = -1;
  KOLO_RETURN_IF_ERROR(
      arena.exchange(mine, ctx.pipeline.timeout_s, stalled, &differs));
  if (differs >= 0) {
    return mismatch("rank " + std::to_string(differs) + " runs " + describe_fingerprint(arena.fingerprint_of(differs)) +
                    " where this rank runs " + describe_fingerprint(mine));
  }
  return Status::ok();
}

namespace {

// A buffer that fits a mailbox, in one exchange: every rank posts the whole
// of it and reduces all N in rank order, the same on every rank, so the
// results are bit-identical. The mailboxes carry each rank's fingerprint,
// so ranks that disagree about the call all see it here, with no message.
// The spans lie one after another in the mailbox: the whole buffer moves,
// so nothing is cut.
Status one_shot_allreduce(const ScheduleContext& ctx, SharedArena& arena, SpanList spans, DataType dtype,
                          ReduceOp op) {
  const size_t elem = dtype_size(dtype);
  const size_t total = spans.elements();
  const int n = arena.size();
  const size_t bytes = total * elem;
  const uint64_t mine = fingerprint(CollectiveKind::kSharedAllreduce, dtype, op, 0, total);
  unsigned char* outbox = arena.outbox(bytes);
  size_t at = 0;  // bytes into the mailbox
  for (const Span& sp : spans) {
    if (sp.count == 0) continue;  // its pointers may be NULL
    ctx.memory->copy(outbox + at, sp.send, sp.count * elem);
    at += sp.count * elem;
  }
  KOLO_RETURN_IF_ERROR(arena_agree(ctx, arena, mine));
  at = 0;
  for (const Span& sp : spans) {
    if (sp.count == 0) continue;  // its pointers may be NULL
    unsigned char* out = static_cast<unsigned char*>(sp.recv);
    ctx.memory->reduce(dtype, op, out, arena.inbox(0, bytes) + at, arena.inbox(1, bytes) + at, sp.count);
    for (int q = 2; q < n; ++q) ctx.memory->reduce(dtype, op, out, out, arena.inbox(q, bytes) + at, sp.count);
    ctx.memory->finalize(dtype, op, out, sp.count, n);
    at += sp.count * elem;
  }
  return Status::ok();
}

}  // namespace

Status arena_allreduce_spans(const ScheduleContext& ctx, SharedArena& arena, SpanList spans,
                             DataType dtype, ReduceOp op) {
  const size_t total = spans.elements();
  // The ranks' ordered messages say first whether everyone called this
  // allreduce this way: a rank that called another collective, or runs
  // this one by another algorithm (a device buffer, another KOLO_ALGORITHM),
  // makes both sides fail with MISMATCH now, where the barrier below would
  // wait for the deadline.
  KOLO_RETURN_IF_ERROR(
      ring_fingerprint_exchange(ctx, fingerprint(CollectiveKind::kSharedAllreduce, dtype, op, 0, total)));
  return arena_allreduce_agreed(ctx, arena, spans, dtype, op);
}

Status arena_allreduce_agreed(const ScheduleContext& ctx, SharedArena& arena, SpanList spans, DataType dtype,
                              ReduceOp op) {
  const size_t elem = dtype_size(dtype);
  const SpanCutter buffer(spans);
  const size_t total = buffer.total();
  const int n = arena.size(), r = arena.rank();
  const size_t half = arena.slot_bytes() / 2 / elem;  // elements per chunk
  const double timeout_s = ctx.pipeline.timeout_s;
  ArenaWrites writes(arena, ArenaWrites::kAllreduce, total * elem, total * elem);
  // Writing through the cache, this rank's own share of each chunk is not
  // copied into its slot: the reduction reads it from the input where it
  // lies, a copy fewer. Around the cache it is copied: the copy's stores
  // take the slot's lines from the caches of the peers that read them a
  // chunk ago without waiting, where the reduction's ordinary stores into
  // them would each wait for a line's round trip between the cores.
  const bool own_from_input = !writes.slots_around_cache();
  // Chunk [done, done + count) of the buffer, in the slots' half at `parity`.
  struct Chunk {
    size_t done = 0, count = 0, parity = 0;
  };
  const auto next_chunk = [&](size_t done) {
    // A rank may still be copying the previous chunk out of the other half.
    return Chunk{done, std::min(half, total - done), done < total ? arena.next_half() : 0};
  };
  // This rank's input for chunk `next` into its slot (but for its own
  // share, where that stays in the input), while chunk `c`'s result goes
  // out, each share from the slot of the rank that reduced it. Most of
  // their time is spent past the cache: one after the other, memory would
  // only read and then only write; together (copy_together) they keep it
  // reading and writing at once, as a plain copy does. (Chunk `next` has
  // the half that the chunk before `c` had, which every rank copied out
  // before the barrier that ended `c`'s reduction.)
  const auto copy_out_and_in = [&](const Chunk& c, const Chunk& next) {
    size_t in = 0, out = 0;  // elements of `next` copied in, of `c` copied out
    int q = 0;               // the rank whose share `out` lies in
    Range share = partition(c.count, n, 0);
    const Range own = partition(next.count, n, r);
    while (in < next.count || out < c.count) {
      Memory::CopyJob in_job{nullptr, nullptr, 0, writes.slots_around_cache()},
          out_job{nullptr, nullptr, 0, writes.result_around_cache()};
      size_t in_n = 0, out_n = 0;  // the elements each can take in one piece
      if (own_from_input && in == own.offset) in += own.count;
      if (in < next.count) {
        const SpanCutter::Place p = buffer.place_of(next.done + in);
        const size_t until = own_from_input && in < own.offset ? own.offset : next.count;
        in_n = std::min(p.left, until - in);
        in_job.dst = arena.slot(r) + next.parity + in * elem;
        in_job.src = element(p.span->send, p.at, elem);
      }
      if (out < c.count) {
        while (share.offset + share.count <= out) share = partition(c.count, n, ++q);
        const SpanCutter::Place p = buffer.place_of(c.done + out);
        out_n = std::min(p.left, share.offset + share.count - out);
        out_job.dst = element(p.span->recv, p.at, elem);
        out_job.src = arena.slot(q) + c.parity + out * elem;
      }
      if (in_n > 0 && out_n > 0) in_n = out_n = std::min(in_n, out_n);  // the two advance together
      in_job.bytes = in_n * elem;
      out_job.bytes = out_n * elem;
      ctx.memory->copy_together(in_job, out_job);
      in += in_n;
      out += out_n;
    }
  };
  Chunk chunk = next_chunk(0);
  copy_out_and_in(Chunk{}, chunk);
  while (chunk.done < total) {
    KOLO_RETURN_IF_ERROR(arena.barrier(Deadline::after_seconds_coarse(timeout_s)));
    // This rank's share, reduced from every peer's slot over its own (or
    // its input), where the peers copy it out from.
    const Range own = partition(chunk.count, n, r);
    const auto slot = [&](int q) { return arena.slot(q) + chunk.parity + own.offset * elem; };
    unsigned char* out = slot(r);
    if (own_from_input) {
      size_t reduced = 0;  // the input may lie in several spans
      buffer.for_each_piece(Range{chunk.done + own.offset, own.count}, [&](const Span& sp, size_t at, size_t c) {
        const size_t from = reduced * elem;
        ctx.memory->reduce(dtype, op, out + from, element(sp.send, at, elem), slot((r + 1) % n) + from, c);
        reduced += c;
      });
    } else {
      ctx.memory->reduce(dtype, op, out, out, slot((r + 1) % n), own.count);
    }
    for (int k = 2; k < n; ++k) ctx.memory->reduce(dtype, op, out, out, slot((r + k) % n), own.count);
    ctx.memory->finalize(dtype, op, out, own.count, n);
    KOLO_RETURN_IF_ERROR(arena.barrier(Deadline::after_seconds_coarse(timeout_s)));
    const Chunk next = next_chunk(chunk.done + chunk.count);
    copy_out_and_in(chunk, next);
    chunk = next;
  }
  writes.done();
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
  return one_shot_allreduce(ctx, *t.arena, a.spans, a.dtype, a.op);
}

}  // namespace

const AllreduceAlgorithm kSharedMemoryAllreduce = {"shared_memory", arena_applies, no_peers, run, seconds};
const AllreduceAlgorithm kSharedMemoryOneShotAllreduce = {"shared_memory", one_shot_applies, no_peers, run_one_shot,
                                                          one_shot_seconds};

}  // namespace kolo
