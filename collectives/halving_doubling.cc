#include "collectives/halving_doubling.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "collectives/cost_model.h"
#include "collectives/fingerprint.h"
#include "collectives/power_of_two_group.h"
#include "collectives/recursive_doubling.h"
#include "collectives/span_cutter.h"

namespace kolo {
namespace {

// The call's spans, read as one logical buffer (zero-copy fusion, as the
// ring reads them): its input (each span's send) and its result (each
// span's recv). Every rank's spans have the same counts, so a range cut at
// span boundaries makes the same messages on every rank.
enum class Side { kInput, kResult };

// One exchange with a partner: elements `out` of `out_side` go to it while
// elements `in` of the result come from it, each in pieces of the
// pipeline's segment, cut where spans end. Without a reduction the pieces
// land in the result, all posted at once. With one (`reduces`) they land
// in staging slots, as many as the pipeline's (a few pieces, still in the
// cache when they are reduced), and each is reduced into the result (its
// `local_side` OP what arrived, the lower rank's operand first) as soon as
// it has arrived, its slot then taking the next piece while the later ones
// are on the wire. Either range may be empty: the partner computes the
// same ranges.
struct Exchange {
  int peer;
  Range out;
  Side out_side;
  Range in;
  bool reduces = false;
  Side local_side = Side::kInput;
};

class Exchanger {
 public:
  Exchanger(const ScheduleContext& ctx, SpanList spans, DataType dtype, ReduceOp op, uint64_t tag)
      : ctx_(ctx),
        buffer_(spans),
        dtype_(dtype),
        op_(op),
        tag_(tag),
        elem_size_(dtype_size(dtype)),
        piece_(std::max<size_t>(1, ctx.segment_bytes / elem_size_)),
        slots_(std::max<size_t>(1, ctx.pipeline.staging_slots)) {}

  // Takes the staging that reducing exchanges of up to `count` elements
  // need; false if it cannot be had.
  bool take_staging(size_t count) {
    const size_t bytes = std::min(count, piece_ * slots_) * elem_size_;
    staging_ = static_cast<unsigned char*>(ctx_.memory->staging(bytes));
    return staging_ != nullptr;
  }

  Status run(const Exchange& x) {
    plan(x);
    const size_t sends = sends_.size(), recvs = recvs_.size();
    requests_.assign(sends + recvs, Request{});
    for (size_t i = 0; i < sends; ++i) {
      KOLO_RETURN_IF_ERROR(ctx_.transport->post_send(x.peer, sends_[i].data, sends_[i].count * elem_size_, tag_,
                                                     &requests_[i]));
    }
    size_t sent = 0, received = 0, posted = 0;
    // A piece's slot takes the next piece's parts once all of its own have
    // been reduced.
    const auto post_what_fits = [&]() -> Status {
      const size_t open_below = received < recvs ? recvs_[received].piece + slots_ : SIZE_MAX;
      while (posted < recvs && (!x.reduces || recvs_[posted].piece < open_below)) {
        const Part& p = recvs_[posted];
        KOLO_RETURN_IF_ERROR(ctx_.transport->post_recv(x.peer, p.landing, p.count * elem_size_, tag_,
                                                       &requests_[sends + posted]));
        ++posted;
      }
      return Status::ok();
    };
    KOLO_RETURN_IF_ERROR(post_what_fits());
    Deadline deadline = Deadline::after_seconds_coarse(ctx_.pipeline.timeout_s);
    for (;;) {
      while (sent < sends && requests_[sent].done) ++sent;
      const size_t before = received;
      while (received < posted && requests_[sends + received].done) {
        const Part& p = recvs_[received];
        if (x.reduces) {
          const bool theirs_first = x.peer < ctx_.rank;
          ctx_.memory->reduce(dtype_, op_, p.dest, theirs_first ? p.landing : p.local,
                              theirs_first ? p.local : p.landing, p.count);
        }
        ++received;
      }
      if (received != before) {
        KOLO_RETURN_IF_ERROR(post_what_fits());
        deadline = Deadline::after_seconds_coarse(ctx_.pipeline.timeout_s);
      }
      if (sent == sends && received == recvs) return Status::ok();
      KOLO_RETURN_IF_ERROR(ctx_.transport->progress(deadline));
    }
  }

  // Applies an average's division to elements `range` of the result.
  void finalize(Range range, int divisor) {
    if (range.count == 0) return;
    buffer_.for_each_piece(range, [&](const Span& sp, size_t at, size_t count) {
      ctx_.memory->finalize(dtype_, op_, result(sp, at), count, divisor);
    });
  }

 private:
  // One message: a piece of a segment within one span.
  struct Part {
    size_t piece;                  // the segment-sized piece of the range it belongs to
    unsigned char* landing;        // where it arrives: the result, or a staging slot
    unsigned char* dest;           // where its reduction goes
    const unsigned char* local;    // the reduction's other operand
    size_t count;
  };
  struct Outgoing {
    const unsigned char* data;
    size_t count;
  };

  unsigned char* result(const Span& sp, size_t at) const { return static_cast<unsigned char*>(sp.recv) + at * elem_size_; }
  const unsigned char* side(Side s, const Span& sp, size_t at) const {
    return s == Side::kInput ? static_cast<const unsigned char*>(sp.send) + at * elem_size_ : result(sp, at);
  }

  // The messages of one exchange, in the order both partners post them.
  void plan(const Exchange& x) {
    sends_.clear();
    recvs_.clear();
    for (size_t j = 0; j * piece_ < x.out.count; ++j) {
      const Range r{x.out.offset + j * piece_, std::min(piece_, x.out.count - j * piece_)};
      buffer_.for_each_piece(r, [&](const Span& sp, size_t at, size_t count) {
        sends_.push_back({side(x.out_side, sp, at), count});
      });
    }
    for (size_t j = 0; j * piece_ < x.in.count; ++j) {
      const Range r{x.in.offset + j * piece_, std::min(piece_, x.in.count - j * piece_)};
      unsigned char* slot = staging_ + (j % slots_) * piece_ * elem_size_;
      buffer_.for_each_piece(r, [&](const Span& sp, size_t at, size_t count) {
        unsigned char* dest = result(sp, at);
        recvs_.push_back({j, x.reduces ? slot : dest, dest, x.reduces ? side(x.local_side, sp, at) : nullptr, count});
        slot += count * elem_size_;
      });
    }
  }

  const ScheduleContext& ctx_;
  const SpanCutter buffer_;
  const DataType dtype_;
  const ReduceOp op_;
  const uint64_t tag_;
  const size_t elem_size_;
  const size_t piece_;  // elements
  const size_t slots_;
  unsigned char* staging_ = nullptr;  // slots_ pieces
  std::vector<Outgoing> sends_;
  std::vector<Part> recvs_;
  std::vector<Request> requests_;  // sends, then receives; at fixed addresses while posted
};

// The whole schedule over elements `block` of the logical buffer.
Status halving_doubling_block(const ScheduleContext& ctx, const PowerOfTwoGroup& group, Exchanger& exchanger,
                              Range block) {
  const int n = ctx.size, r = ctx.rank;
  // Where this rank's current values are: its input until a reduction has
  // written them to the result.
  Side values = Side::kInput;
  const Range none{block.offset, 0};

  if (group.folds(r)) {
    const int partner = group.fold_partner(r);
    if (r % 2 == 0) {
      KOLO_RETURN_IF_ERROR(exchanger.run({partner, block, values, none}));
    } else {
      KOLO_RETURN_IF_ERROR(exchanger.run({partner, none, values, block, /*reduces=*/true, values}));
      values = Side::kResult;
    }
  }

  const int g = group.group_rank(r);
  if (g >= 0) {
    // Reduce-scatter: each step keeps half of the range the pair holds.
    // The ranges held before each step, for the allgather to retrace.
    std::vector<Range> held;
    Range mine = block;
    for (int mask = 1; mask < group.size; mask <<= 1) {
      const size_t half = mine.count / 2;
      const Range lower{mine.offset, half}, upper{mine.offset + half, mine.count - half};
      const bool keep_lower = (g & mask) == 0;
      const Range keep = keep_lower ? lower : upper, give = keep_lower ? upper : lower;
      KOLO_RETURN_IF_ERROR(exchanger.run({group.rank_of(g ^ mask), give, values, keep, /*reduces=*/true, values}));
      held.push_back(mine);
      mine = keep;
      values = Side::kResult;
    }
    exchanger.finalize(mine, n);
    // Allgather: the steps in reverse, each pair joining its two halves.
    for (int mask = group.size / 2; mask >= 1; mask >>= 1) {
      const Range whole = held.back();
      held.pop_back();
      const Range theirs = mine.offset == whole.offset ? Range{whole.offset + mine.count, whole.count - mine.count}
                                                       : Range{whole.offset, whole.count - mine.count};
      KOLO_RETURN_IF_ERROR(exchanger.run({group.rank_of(g ^ mask), mine, Side::kResult, theirs}));
      mine = whole;
    }
  }

  // Hand the result back to the folded-out ranks.
  if (group.folds(r)) {
    const int partner = group.fold_partner(r);
    if (r % 2 == 1) KOLO_RETURN_IF_ERROR(exchanger.run({partner, block, Side::kResult, none}));
    else KOLO_RETURN_IF_ERROR(exchanger.run({partner, none, Side::kResult, block}));
  }
  return Status::ok();
}

}  // namespace

size_t halving_doubling_block_bytes(const Topology& t, size_t segment_bytes, size_t cache_bytes) {
  const size_t segments = std::max<size_t>(1, segment_bytes) * PowerOfTwoGroup(t.size).size;
  return t.host_count == 1 ? std::min(segments, std::max<size_t>(1, cache_bytes)) : segments;
}

Status halving_doubling_allreduce(const ScheduleContext& ctx, const Topology& t, SpanList spans, DataType dtype,
                                  ReduceOp op) {
  const size_t elem_size = dtype_size(dtype);
  const size_t count = spans.elements();
  if (count == 0 || ctx.size == 1) {
    for (const Span& s : spans) {
      ctx.memory->copy(s.recv, s.send, s.count * elem_size);
      ctx.memory->finalize(dtype, op, s.recv, s.count, ctx.size);
    }
    return Status::ok();
  }
  const PowerOfTwoGroup group(ctx.size);
  const size_t block =
      std::max<size_t>(1, halving_doubling_block_bytes(t, ctx.segment_bytes, ctx.cache_bytes) / elem_size);
  Exchanger exchanger(ctx, spans, dtype, op, fingerprint(CollectiveKind::kAllreduce, dtype, op, 0, count));
  if (!exchanger.take_staging(std::min(block, count))) {
    return device_error("cannot allocate staging memory for an allreduce of " + std::to_string(count * elem_size) +
                        " bytes");
  }
  for (size_t at = 0; at < count; at += block) {
    KOLO_RETURN_IF_ERROR(halving_doubling_block(ctx, group, exchanger, Range{at, std::min(block, count - at)}));
  }
  return Status::ok();
}

namespace {

// Three ranks or more, on a network transport, where a cost model prices
// it against the others (without one, the tables take the ring). Two ranks
// would make the ring's exchange without its overlap of the two phases.
// Where the ranks share an arena, its schedules cross between ranks
// through memory with no transport message at all. A GPU's buffers take
// the ring's and recursive doubling's paths, which have run on a GPU.
bool applies(const Topology& t, const Thresholds& th, const Call& c) {
  if (is_forced(th, "halving_doubling")) return t.size > 1 && c.bytes > 0;
  return t.costs && t.size > 2 && c.bytes > 0 && c.host_memory && t.arena == nullptr;
}

// Recursive doubling's partners, which it connects by default too. (The
// arena is opened after the peers are connected, so they are connected on
// one host as well.)
void peers(const Topology& t, const Thresholds& th, std::vector<int>* out) {
  if (t.size < 3 && !is_forced(th, "halving_doubling")) return;
  for (int peer : recursive_doubling_peers(t.rank, t.size)) add_peer(peer, t.rank, out);
}

Status run(const ScheduleContext& ctx, const Topology& t, const AllreduceArgs& a) {
  return halving_doubling_allreduce(ctx, t, a.spans, a.dtype, a.op);
}

double seconds(const Topology& t, const Call& c) { return halving_doubling_seconds(*t.costs, t, c.bytes); }

}  // namespace

const AllreduceAlgorithm kHalvingDoublingAllreduce = {"halving_doubling", applies, peers, run, seconds};

bool halving_doubling_outruns_ring(const Topology& t, const Call& c) {
  // Where its entry applies unforced (and so with no arena), in the native
  // format its messages carry.
  return applies(t, Thresholds{}, c) && c.wire == WireFormat::kNative && t.host_count == 1 && t.size >= 4 &&
         PowerOfTwoGroup(t.size).size == t.size;
}

}  // namespace kolo
