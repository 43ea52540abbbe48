#include "collectives/recursive_doubling.h"

#include <cstring>
#include <string>

#include "collectives/cost_model.h"
#include "collectives/fingerprint.h"
#include "collectives/power_of_two_group.h"

namespace kolo {
namespace {

// Sends `out` to and receives `in` from `peer` at the same time.
Status exchange(const ScheduleContext& ctx, int peer, const void* out, void* in, size_t bytes, uint64_t tag) {
  Request sreq, rreq;
  KOLO_RETURN_IF_ERROR(ctx.transport->post_send(peer, out, bytes, tag, &sreq));
  KOLO_RETURN_IF_ERROR(ctx.transport->post_recv(peer, in, bytes, tag, &rreq));
  // One clock read per exchange, not one per progress() call.
  const Deadline deadline = Deadline::after_seconds_coarse(ctx.pipeline.timeout_s);
  while (!sreq.done || !rreq.done) KOLO_RETURN_IF_ERROR(ctx.transport->progress(deadline));
  return Status::ok();
}

Status one_way(const ScheduleContext& ctx, int peer, const void* out, void* in, size_t bytes, uint64_t tag) {
  Request req;
  if (out) KOLO_RETURN_IF_ERROR(ctx.transport->post_send(peer, out, bytes, tag, &req));
  else KOLO_RETURN_IF_ERROR(ctx.transport->post_recv(peer, in, bytes, tag, &req));
  const Deadline deadline = Deadline::after_seconds_coarse(ctx.pipeline.timeout_s);
  while (!req.done) KOLO_RETURN_IF_ERROR(ctx.transport->progress(deadline));
  return Status::ok();
}

}  // namespace

std::vector<int> recursive_doubling_peers(int r, int n) {
  std::vector<int> peers;
  if (n < 2) return peers;
  const PowerOfTwoGroup group(n);
  if (group.folds(r)) peers.push_back(group.fold_partner(r));
  const int g = group.group_rank(r);
  if (g >= 0) {
    for (int mask = 1; mask < group.size; mask <<= 1) peers.push_back(group.rank_of(g ^ mask));
  }
  return peers;
}

Status recursive_doubling_allreduce(const ScheduleContext& ctx, const void* send, void* recv, size_t count,
                                    DataType dtype, ReduceOp op) {
  const size_t bytes = count * dtype_size(dtype);
  Memory* m = ctx.memory;
  m->copy(recv, send, bytes);
  if (count == 0 || ctx.size == 1) {
    m->finalize(dtype, op, recv, count, ctx.size);
    return Status::ok();
  }
  const uint64_t tag = fingerprint(CollectiveKind::kAllreduce, dtype, op, 0, count);
  unsigned char* theirs = static_cast<unsigned char*>(m->staging(bytes));
  if (!theirs) return device_error("cannot allocate " + std::to_string(bytes) + " bytes of staging memory");
  const int n = ctx.size, r = ctx.rank;
  const PowerOfTwoGroup group(n);

  // Fold the extra ranks in: even ranks below 2*extra give their data away.
  // Every partner was connected when the communicator was made
  // (recursive_doubling_peers), so nothing here waits for a connection.
  const int group_rank = group.group_rank(r);
  if (group.folds(r)) {
    if (r % 2 == 0) {
      KOLO_RETURN_IF_ERROR(one_way(ctx, r + 1, recv, nullptr, bytes, tag));
    } else {
      KOLO_RETURN_IF_ERROR(one_way(ctx, r - 1, nullptr, theirs, bytes, tag));
      m->reduce(dtype, op, recv, theirs, recv, count);  // lower rank's data first
    }
  }

  if (group_rank >= 0) {
    for (int mask = 1; mask < group.size; mask <<= 1) {
      const int partner = group.rank_of(group_rank ^ mask);
      KOLO_RETURN_IF_ERROR(exchange(ctx, partner, recv, theirs, bytes, tag));
      if (partner < r) m->reduce(dtype, op, recv, theirs, recv, count);
      else m->reduce(dtype, op, recv, recv, theirs, count);
    }
    m->finalize(dtype, op, recv, count, n);
  }

  // Hand the result back to the folded-out ranks.
  if (group.folds(r)) {
    if (r % 2 == 1) KOLO_RETURN_IF_ERROR(one_way(ctx, r - 1, recv, nullptr, bytes, tag));
    else KOLO_RETURN_IF_ERROR(one_way(ctx, r + 1, nullptr, recv, bytes, tag));
  }
  return Status::ok();
}

namespace {

bool applies(const Topology& t, const Thresholds& th, const Call& c) {
  return t.size > 1 && c.bytes > 0 && (c.bytes <= th.small_bytes || is_forced(th, "recursive_doubling"));
}

void peers(const Topology& t, const Thresholds& th, std::vector<int>* out) {
  if (th.small_bytes == 0 && !is_forced(th, "recursive_doubling")) return;
  for (int peer : recursive_doubling_peers(t.rank, t.size)) add_peer(peer, t.rank, out);
}

Status run(const ScheduleContext& ctx, const Topology&, const AllreduceArgs& a) {
  return allreduce_over_one_buffer(ctx, a, recursive_doubling_allreduce);
}

double seconds(const Topology& t, const Call& c) { return recursive_doubling_seconds(*t.costs, t, c.bytes); }

}  // namespace

const AllreduceAlgorithm kRecursiveDoublingAllreduce = {"recursive_doubling", applies, peers, run, seconds};

}  // namespace kolo
