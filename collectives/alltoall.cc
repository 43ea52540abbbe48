#include "collectives/alltoall.h"

#include <cstring>
#include <memory>

#include "collectives/fingerprint.h"

namespace kolo {

Status pairwise_alltoall(const RingContext& ctx, const void* send, const std::vector<size_t>& send_counts,
                         void* recv, const std::vector<size_t>& recv_counts, DataType dtype) {
  const int n = ctx.size, r = ctx.rank;
  const size_t es = dtype_size(dtype);
  std::vector<size_t> send_off(n + 1, 0), recv_off(n + 1, 0);
  for (int q = 0; q < n; ++q) {
    send_off[q + 1] = send_off[q] + send_counts[q];
    recv_off[q + 1] = recv_off[q] + recv_counts[q];
  }
  const auto* in = static_cast<const unsigned char*>(send);
  auto* out = static_cast<unsigned char*>(recv);
  if (send_counts[r] != recv_counts[r]) {
    return internal_error("alltoall: this rank's block to itself has two sizes");
  }
  ctx.memory->copy(out + recv_off[r] * es, in + send_off[r] * es, send_counts[r] * es);
  if (n == 1) return Status::ok();
  // Partner k steps away on each side: send to r + k, receive from r - k.
  // Every message is posted (even empty ones, so each pair checks the
  // other's fingerprint), then progressed together.
  std::unique_ptr<Request[]> sends(new Request[n - 1]);
  std::unique_ptr<Request[]> recvs(new Request[n - 1]);
  for (int k = 1; k < n; ++k) {
    const int to = (r + k) % n, from = (r - k + n) % n;
    const uint64_t send_tag = fingerprint(CollectiveKind::kAlltoall, dtype, ReduceOp::kSum, 0, send_counts[to]);
    const uint64_t recv_tag = fingerprint(CollectiveKind::kAlltoall, dtype, ReduceOp::kSum, 0, recv_counts[from]);
    KOLO_RETURN_IF_ERROR(ctx.transport->post_recv(from, out + recv_off[from] * es, recv_counts[from] * es, recv_tag,
                                                  &recvs[k - 1]));
    KOLO_RETURN_IF_ERROR(
        ctx.transport->post_send(to, in + send_off[to] * es, send_counts[to] * es, send_tag, &sends[k - 1]));
  }
  for (;;) {
    bool all = true;
    for (int i = 0; i < n - 1 && all; ++i) all = sends[i].done && recvs[i].done;
    if (all) return Status::ok();
    KOLO_RETURN_IF_ERROR(ctx.transport->progress(Deadline::after_seconds(ctx.pipeline.timeout_s)));
  }
}

}  // namespace kolo
