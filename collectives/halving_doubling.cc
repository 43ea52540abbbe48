#include "collectives/halving_doubling.h"

#include <algorithm>
#include <string>

#include "collectives/cost_model.h"
#include "collectives/fingerprint.h"
#include "collectives/power_of_two_group.h"
#include "collectives/recursive_doubling.h"

namespace kolo {
namespace {

// Elements [offset, offset + count) of a buffer.
struct Range {
  size_t offset = 0;
  size_t count = 0;
};

// One exchange with a partner: `out` goes to it while `in` comes from it,
// each in pieces of the pipeline's segment. Without `local` the pieces land
// in `in`, all posted at once. With it they land in staging slots, as many
// as the pipeline's (a few pieces, still in the cache when they are
// reduced), and each is reduced into `in` (in = local OP received, the
// lower rank's operand first) as soon as it has arrived, its slot then
// taking the next piece while the later ones are on the wire. Either side
// may be empty: the partner computes the same ranges.
struct Exchange {
  int peer;
  const unsigned char* out;
  size_t out_count;
  unsigned char* in;
  size_t in_count;
  const unsigned char* local = nullptr;
};

class Exchanger {
 public:
  Exchanger(const ScheduleContext& ctx, DataType dtype, ReduceOp op, uint64_t tag)
      : ctx_(ctx),
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
    const size_t sends = pieces(x.out_count), recvs = pieces(x.in_count);
    const size_t posted_ahead = x.local ? std::min(recvs, slots_) : recvs;
    requests_.assign(sends + recvs, Request{});
    for (size_t i = 0; i < sends; ++i) {
      const Range p = piece(x.out_count, i);
      KOLO_RETURN_IF_ERROR(ctx_.transport->post_send(x.peer, x.out + p.offset * elem_size_, p.count * elem_size_,
                                                     tag_, &requests_[i]));
    }
    for (size_t i = 0; i < posted_ahead; ++i) KOLO_RETURN_IF_ERROR(post_recv(x, sends, i));
    size_t sent = 0, received = 0;
    Deadline deadline = Deadline::after_seconds_coarse(ctx_.pipeline.timeout_s);
    for (;;) {
      while (sent < sends && requests_[sent].done) ++sent;
      while (received < recvs && requests_[sends + received].done) {
        if (x.local) {
          reduce_piece(x, received);
          if (received + slots_ < recvs) KOLO_RETURN_IF_ERROR(post_recv(x, sends, received + slots_));
        }
        ++received;
        deadline = Deadline::after_seconds_coarse(ctx_.pipeline.timeout_s);
      }
      if (sent == sends && received == recvs) return Status::ok();
      KOLO_RETURN_IF_ERROR(ctx_.transport->progress(deadline));
    }
  }

 private:
  size_t pieces(size_t count) const { return (count + piece_ - 1) / piece_; }
  Range piece(size_t count, size_t i) const { return {i * piece_, std::min(piece_, count - i * piece_)}; }
  unsigned char* slot(size_t i) const { return staging_ + (i % slots_) * piece_ * elem_size_; }

  Status post_recv(const Exchange& x, size_t sends, size_t i) {
    const Range p = piece(x.in_count, i);
    unsigned char* landing = x.local ? slot(i) : x.in + p.offset * elem_size_;
    return ctx_.transport->post_recv(x.peer, landing, p.count * elem_size_, tag_, &requests_[sends + i]);
  }

  void reduce_piece(const Exchange& x, size_t i) {
    const Range p = piece(x.in_count, i);
    const unsigned char* theirs = slot(i);
    const unsigned char* mine = x.local + p.offset * elem_size_;
    const bool theirs_first = x.peer < ctx_.rank;
    ctx_.memory->reduce(dtype_, op_, x.in + p.offset * elem_size_, theirs_first ? theirs : mine,
                        theirs_first ? mine : theirs, p.count);
  }

  const ScheduleContext& ctx_;
  const DataType dtype_;
  const ReduceOp op_;
  const uint64_t tag_;
  const size_t elem_size_;
  const size_t piece_;  // elements
  const size_t slots_;
  unsigned char* staging_ = nullptr;  // slots_ pieces
  std::vector<Request> requests_;     // sends, then receives; at fixed addresses while posted
};

// The whole schedule over one block of the buffer.
Status halving_doubling_block(const ScheduleContext& ctx, const PowerOfTwoGroup& group, Exchanger& exchanger,
                              const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  const size_t elem_size = dtype_size(dtype);
  Memory* m = ctx.memory;
  const int n = ctx.size, r = ctx.rank;
  auto* result = static_cast<unsigned char*>(recv);
  // Where this rank's current values are: its input until a reduction has
  // written them to recv.
  const unsigned char* values = static_cast<const unsigned char*>(send);

  if (group.folds(r)) {
    const int partner = group.fold_partner(r);
    if (r % 2 == 0) {
      KOLO_RETURN_IF_ERROR(exchanger.run({partner, values, count, nullptr, 0}));
    } else {
      KOLO_RETURN_IF_ERROR(exchanger.run({partner, nullptr, 0, result, count, values}));
      values = result;
    }
  }

  const int g = group.group_rank(r);
  if (g >= 0) {
    // Reduce-scatter: each step keeps half of the range the pair holds.
    // The ranges held before each step, for the allgather to retrace.
    std::vector<Range> held;
    Range mine{0, count};
    for (int mask = 1; mask < group.size; mask <<= 1) {
      const size_t half = mine.count / 2;
      const Range lower{mine.offset, half}, upper{mine.offset + half, mine.count - half};
      const bool keep_lower = (g & mask) == 0;
      const Range keep = keep_lower ? lower : upper, give = keep_lower ? upper : lower;
      KOLO_RETURN_IF_ERROR(exchanger.run({group.rank_of(g ^ mask), values + give.offset * elem_size, give.count,
                                          result + keep.offset * elem_size, keep.count,
                                          values + keep.offset * elem_size}));
      held.push_back(mine);
      mine = keep;
      values = result;
    }
    m->finalize(dtype, op, result + mine.offset * elem_size, mine.count, n);
    // Allgather: the steps in reverse, each pair joining its two halves.
    for (int mask = group.size / 2; mask >= 1; mask >>= 1) {
      const Range whole = held.back();
      held.pop_back();
      const Range theirs = mine.offset == whole.offset ? Range{whole.offset + mine.count, whole.count - mine.count}
                                                       : Range{whole.offset, whole.count - mine.count};
      KOLO_RETURN_IF_ERROR(exchanger.run({group.rank_of(g ^ mask), result + mine.offset * elem_size, mine.count,
                                          result + theirs.offset * elem_size, theirs.count}));
      mine = whole;
    }
  }

  // Hand the result back to the folded-out ranks.
  if (group.folds(r)) {
    const int partner = group.fold_partner(r);
    if (r % 2 == 1) KOLO_RETURN_IF_ERROR(exchanger.run({partner, result, count, nullptr, 0}));
    else KOLO_RETURN_IF_ERROR(exchanger.run({partner, nullptr, 0, result, count}));
  }
  return Status::ok();
}

}  // namespace

size_t halving_doubling_block_bytes(int ranks, size_t segment_bytes) {
  return std::max<size_t>(1, segment_bytes) * PowerOfTwoGroup(ranks).size;
}

Status halving_doubling_allreduce(const ScheduleContext& ctx, const void* send, void* recv, size_t count,
                                  DataType dtype, ReduceOp op) {
  const size_t elem_size = dtype_size(dtype);
  const size_t bytes = count * elem_size;
  Memory* m = ctx.memory;
  if (count == 0 || ctx.size == 1) {
    m->copy(recv, send, bytes);
    m->finalize(dtype, op, recv, count, ctx.size);
    return Status::ok();
  }
  const PowerOfTwoGroup group(ctx.size);
  const size_t block = std::max<size_t>(1, halving_doubling_block_bytes(ctx.size, ctx.segment_bytes) / elem_size);
  Exchanger exchanger(ctx, dtype, op, fingerprint(CollectiveKind::kAllreduce, dtype, op, 0, count));
  if (!exchanger.take_staging(std::min(block, count))) {
    return device_error("cannot allocate staging memory for an allreduce of " + std::to_string(bytes) + " bytes");
  }
  for (size_t at = 0; at < count; at += block) {
    const size_t offset = at * elem_size;
    KOLO_RETURN_IF_ERROR(halving_doubling_block(ctx, group, exchanger, static_cast<const unsigned char*>(send) + offset,
                                                static_cast<unsigned char*>(recv) + offset,
                                                std::min(block, count - at), dtype, op));
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

Status run(const ScheduleContext& ctx, const Topology&, const AllreduceArgs& a) {
  return allreduce_over_one_buffer(ctx, a, halving_doubling_allreduce);
}

double seconds(const Topology& t, const Call& c) { return halving_doubling_seconds(*t.costs, t, c.bytes); }

}  // namespace

const AllreduceAlgorithm kHalvingDoublingAllreduce = {"halving_doubling", applies, peers, run, seconds};

}  // namespace kolo
