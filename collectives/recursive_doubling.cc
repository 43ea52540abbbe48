#include "collectives/recursive_doubling.h"

#include <cstring>

#include "collectives/fingerprint.h"

namespace kolo {
namespace {

// Sends `out` to and receives `in` from `peer` at the same time.
Status exchange(const RingContext& ctx, int peer, const void* out, void* in, size_t bytes, uint64_t tag) {
  Request sreq, rreq;
  KOLO_RETURN_IF_ERROR(ctx.transport->post_send(peer, out, bytes, tag, &sreq));
  KOLO_RETURN_IF_ERROR(ctx.transport->post_recv(peer, in, bytes, tag, &rreq));
  while (!sreq.done || !rreq.done) {
    KOLO_RETURN_IF_ERROR(ctx.transport->progress(Deadline::after_seconds(ctx.pipeline.timeout_s)));
  }
  return Status::ok();
}

Status one_way(const RingContext& ctx, int peer, const void* out, void* in, size_t bytes, uint64_t tag) {
  Request req;
  if (out) KOLO_RETURN_IF_ERROR(ctx.transport->post_send(peer, out, bytes, tag, &req));
  else KOLO_RETURN_IF_ERROR(ctx.transport->post_recv(peer, in, bytes, tag, &req));
  while (!req.done) KOLO_RETURN_IF_ERROR(ctx.transport->progress(Deadline::after_seconds(ctx.pipeline.timeout_s)));
  return Status::ok();
}

}  // namespace

Status recursive_doubling_allreduce(const RingContext& ctx, const void* send, void* recv, size_t count,
                                    DataType dtype, ReduceOp op) {
  const size_t bytes = count * dtype_size(dtype);
  if (send != recv) std::memcpy(recv, send, bytes);
  if (count == 0 || ctx.size == 1) {
    if (FinalizeFn fin = finalize_kernel(dtype, op)) fin(recv, count, ctx.size);
    return Status::ok();
  }
  const uint64_t tag = fingerprint(CollectiveKind::kAllreduce, dtype, op, 0, count);
  const ReduceFn reduce = reduce_kernel(dtype, op);
  const Deadline connect_deadline = Deadline::after_seconds(ctx.pipeline.timeout_s);
  unsigned char* theirs = static_cast<unsigned char*>(ctx.workspace->staging(bytes));
  const int n = ctx.size, r = ctx.rank;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int extra = n - p;

  // Fold the extra ranks in: even ranks below 2*extra give their data away.
  int group_rank;  // rank within the power-of-two group, or -1 when folded out
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      KOLO_RETURN_IF_ERROR(ctx.transport->connect(r + 1, connect_deadline));
      KOLO_RETURN_IF_ERROR(one_way(ctx, r + 1, recv, nullptr, bytes, tag));
      group_rank = -1;
    } else {
      KOLO_RETURN_IF_ERROR(ctx.transport->connect(r - 1, connect_deadline));
      KOLO_RETURN_IF_ERROR(one_way(ctx, r - 1, nullptr, theirs, bytes, tag));
      reduce(recv, theirs, recv, count);  // lower rank's data first
      group_rank = r / 2;
    }
  } else {
    group_rank = r - extra;
  }

  if (group_rank >= 0) {
    for (int mask = 1; mask < p; mask <<= 1) {
      const int partner_group = group_rank ^ mask;
      const int partner = partner_group < extra ? partner_group * 2 + 1 : partner_group + extra;
      KOLO_RETURN_IF_ERROR(ctx.transport->connect(partner, connect_deadline));
      KOLO_RETURN_IF_ERROR(exchange(ctx, partner, recv, theirs, bytes, tag));
      if (partner < r) reduce(recv, theirs, recv, count);
      else reduce(recv, recv, theirs, count);
    }
    if (FinalizeFn fin = finalize_kernel(dtype, op)) fin(recv, count, n);
  }

  // Hand the result back to the folded-out ranks.
  if (r < 2 * extra) {
    if (r % 2 == 1) KOLO_RETURN_IF_ERROR(one_way(ctx, r - 1, recv, nullptr, bytes, tag));
    else KOLO_RETURN_IF_ERROR(one_way(ctx, r + 1, nullptr, recv, bytes, tag));
  }
  return Status::ok();
}

}  // namespace kolo
