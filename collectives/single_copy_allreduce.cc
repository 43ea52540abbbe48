#include "collectives/single_copy_allreduce.h"

#include <sys/uio.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/arena_allreduce.h"
#include "collectives/arena_writes.h"
#include "collectives/cost_model.h"
#include "collectives/fingerprint.h"
#include "collectives/ring_schedule.h"
#include "collectives/span_cutter.h"
#include "common/faster_of_two.h"
#include "transport/shared_arena.h"

namespace kolo {

namespace {

// Each rank's post: how many spans follow (0: too many to read by address),
// the way rank 0 chose for the call (SharedArena::allreduce_crossings),
// then each span's addresses in the rank's own process.
struct Post {
  uint64_t spans;
  uint64_t way;
};
struct PostedSpan {
  uint64_t send, recv, count;
};
constexpr int kOneCopy = 0, kThroughSlots = 1;
// At most this many spans go by their addresses: one iovec each in a
// read (the kernel takes up to 1024 a side), all in a mailbox. A call of
// more (a fusion of hundreds of tensors) goes through the slots instead.
constexpr size_t kMostSpans = 512;
constexpr size_t kPostBytes = sizeof(Post) + kMostSpans * sizeof(PostedSpan);
static_assert(kPostBytes <= SharedArena::kMailboxBytes, "a rank's post fits its mailbox");

enum class Side { kSend, kRecv };

// Appends the pieces of elements `range` of `buffer`, on `side`, to *out.
void add_pieces(const SpanCutter& buffer, Range range, size_t elem, Side side, std::vector<iovec>* out) {
  buffer.for_each_piece(range, [&](const Span& sp, size_t at, size_t count) {
    if (count == 0) return;
    const void* base = side == Side::kSend ? sp.send : sp.recv;
    out->push_back(iovec{const_cast<unsigned char*>(element(base, at, elem)), count * elem});
  });
}

Status read_peers(const ScheduleContext& ctx, SharedArena& arena, const SpanCutter& buffer,
                  const std::vector<std::vector<Span>>& peer_spans, DataType dtype, ReduceOp op);

Status single_copy_allreduce(const ScheduleContext& ctx, SharedArena& arena, SpanList spans, DataType dtype,
                             ReduceOp op) {
  const size_t elem = dtype_size(dtype);
  const SpanCutter buffer(spans);
  const size_t total = buffer.total();
  const int n = arena.size();
  const auto start = std::chrono::steady_clock::now();
  const size_t bytes = total * elem;
  FasterOfTwo& ways = arena.allreduce_crossings[SharedArena::size_class(bytes)];

  unsigned char* box = arena.outbox(kPostBytes);
  const Post mine{spans.size() <= kMostSpans ? spans.size() : 0, static_cast<uint64_t>(ways.pick())};
  std::memcpy(box, &mine, sizeof mine);
  for (size_t i = 0; i < mine.spans; ++i) {
    const PostedSpan p{reinterpret_cast<uintptr_t>(spans[i].send), reinterpret_cast<uintptr_t>(spans[i].recv),
                       spans[i].count};
    std::memcpy(box + sizeof mine + i * sizeof p, &p, sizeof p);
  }
  KOLO_RETURN_IF_ERROR(arena_agree(ctx, arena, fingerprint(CollectiveKind::kSharedAllreduce, dtype, op, 0, total)));
  Post first;
  std::memcpy(&first, arena.inbox(0, kPostBytes), sizeof first);
  int way = static_cast<int>(first.way);
  // Each peer's spans, with its addresses (never dereferenced here).
  std::vector<std::vector<Span>> peer_spans(n);
  for (int q = 0; q < n && way == kOneCopy; ++q) {
    const unsigned char* theirs = arena.inbox(q, kPostBytes);
    Post post;
    std::memcpy(&post, theirs, sizeof post);
    if (post.spans == 0) way = kThroughSlots;
    for (uint64_t i = 0; i < post.spans; ++i) {
      PostedSpan p;
      std::memcpy(&p, theirs + sizeof post + i * sizeof p, sizeof p);
      peer_spans[q].push_back(Span{reinterpret_cast<const void*>(static_cast<uintptr_t>(p.send)),
                                   reinterpret_cast<void*>(static_cast<uintptr_t>(p.recv)), p.count});
    }
  }
  // The slots' own ways of writing (arena_writes.h) learn from their first
  // calls of a size; until they have settled, a call through the slots
  // says little of what the slots cost, and is not counted.
  const bool counts = way == kOneCopy || ArenaWrites::settled(arena, ArenaWrites::kAllreduce, bytes, bytes);
  KOLO_RETURN_IF_ERROR(way == kOneCopy ? read_peers(ctx, arena, buffer, peer_spans, dtype, op)
                                       : arena_allreduce_agreed(ctx, arena, spans, dtype, op));
  if (arena.rank() == 0 && way == static_cast<int>(mine.way) && counts) {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    ways.record(way, took.count() / static_cast<double>(bytes));
  } else {
    ways.ran(way);
  }
  return Status::ok();
}

Status read_peers(const ScheduleContext& ctx, SharedArena& arena, const SpanCutter& buffer,
                  const std::vector<std::vector<Span>>& peer_spans, DataType dtype, ReduceOp op) {
  const size_t elem = dtype_size(dtype);
  const size_t total = buffer.total();
  const int n = arena.size(), r = arena.rank();
  const double timeout_s = ctx.pipeline.timeout_s;
  // A failed read is not aborted here: the communicator's failure path
  // first records the job's first failure (naming the lost rank), then
  // aborts the arena; aborting before it would let a peer, released from
  // the barrier, report this rank as the one lost.
  const auto read = [&](int q, const std::vector<iovec>& local, const std::vector<iovec>& remote) {
    return arena.read_peer(q, local.data(), local.size(), remote.data(), remote.size());
  };

  // This rank's share, piece by piece: each peer's input for the piece
  // read into this rank's slot (it stays in the cache), reduced into the
  // result. (The slot's half is one no peer reads: every rank has left the
  // call before, having posted to this one.)
  const Range own = partition(total, n, r);
  unsigned char* scratch = arena.slot(r) + arena.next_half();
  const size_t piece = std::max<size_t>(1, arena.slot_bytes() / 2 / elem);
  std::vector<iovec> local, remote;
  for (size_t done = 0; done < own.count;) {
    const Range at{own.offset + done, std::min(piece, own.count - done)};
    for (int k = 1; k < n; ++k) {
      const int q = (r + k) % n;
      const SpanCutter theirs(peer_spans[q]);
      local.assign(1, iovec{scratch, at.count * elem});
      remote.clear();
      add_pieces(theirs, at, elem, Side::kSend, &remote);
      KOLO_RETURN_IF_ERROR(read(q, local, remote));
      size_t reduced = 0;
      buffer.for_each_piece(at, [&](const Span& sp, size_t i, size_t c) {
        unsigned char* out = element(sp.recv, i, elem);
        const void* mine = k == 1 ? static_cast<const void*>(element(sp.send, i, elem)) : out;
        ctx.memory->reduce(dtype, op, out, mine, scratch + reduced * elem, c);
        reduced += c;
      });
    }
    buffer.for_each_piece(at, [&](const Span& sp, size_t i, size_t c) {
      ctx.memory->finalize(dtype, op, element(sp.recv, i, elem), c, n);
    });
    done += at.count;
  }
  KOLO_RETURN_IF_ERROR(arena.barrier(Deadline::after_seconds_coarse(timeout_s)));
  // Every peer's reduced share, straight into this rank's result.
  for (int k = 1; k < n; ++k) {
    const int q = (r + k) % n;
    const Range theirs_range = partition(total, n, q);
    if (theirs_range.count == 0) continue;
    const SpanCutter theirs(peer_spans[q]);
    local.clear();
    remote.clear();
    add_pieces(buffer, theirs_range, elem, Side::kRecv, &local);
    add_pieces(theirs, theirs_range, elem, Side::kRecv, &remote);
    KOLO_RETURN_IF_ERROR(read(q, local, remote));
  }
  // No rank's buffers may change until every peer has read them.
  return arena.barrier(Deadline::after_seconds_coarse(timeout_s));
}

bool applies(const Topology& t, const Thresholds& th, const Call& c) {
  return arena_applies(t, th, c) && t.arena_reads_peers;
}

double seconds(const Topology& t, const Call& c) { return single_copy_allreduce_seconds(*t.costs, t, c.bytes); }

Status run(const ScheduleContext& ctx, const Topology& t, const AllreduceArgs& a) {
  return single_copy_allreduce(ctx, *t.arena, a.spans, a.dtype, a.op);
}

}  // namespace

const AllreduceAlgorithm kSharedMemorySingleCopyAllreduce = {"shared_memory", applies, no_peers, run, seconds};

}  // namespace kolo
