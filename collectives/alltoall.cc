#include "collectives/alltoall.h"

#include <memory>
#include <string>

#include "collectives/algorithm.h"
#include "collectives/fingerprint.h"

namespace kolo {

Status pairwise_alltoall(const ScheduleContext& ctx, const void* send, const std::vector<size_t>& send_counts,
                         void* recv, const std::vector<size_t>& recv_counts, DataType dtype) {
  return pairwise_alltoall_displs(ctx, send, send_counts, packed_displs(send_counts), recv, recv_counts,
                                  packed_displs(recv_counts), dtype);
}

Status pairwise_alltoall_displs(const ScheduleContext& ctx, const void* send, const std::vector<size_t>& send_counts,
                                const std::vector<size_t>& send_displs, void* recv,
                                const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs,
                                DataType dtype) {
  const int n = ctx.size, r = ctx.rank;
  const size_t es = dtype_size(dtype);
  if (send_counts[r] != recv_counts[r]) {
    return invalid_argument("alltoall: sendcounts[" + std::to_string(r) + "] = " + std::to_string(send_counts[r]) +
                            " differs from recvcounts[" + std::to_string(r) + "] = " + std::to_string(recv_counts[r]));
  }
  ctx.memory->copy(element(recv, recv_displs[r], es), element(send, send_displs[r], es), send_counts[r] * es);
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
    KOLO_RETURN_IF_ERROR(ctx.transport->post_recv(from, element(recv, recv_displs[from], es), recv_counts[from] * es,
                                                  recv_tag, &recvs[k - 1]));
    KOLO_RETURN_IF_ERROR(ctx.transport->post_send(to, element(send, send_displs[to], es), send_counts[to] * es, send_tag,
                                                  &sends[k - 1]));
  }
  for (;;) {
    bool all = true;
    for (int i = 0; i < n - 1 && all; ++i) all = sends[i].done && recvs[i].done;
    if (all) return Status::ok();
    KOLO_RETURN_IF_ERROR(ctx.transport->progress(Deadline::after_seconds_coarse(ctx.pipeline.timeout_s)));
  }
}

}  // namespace kolo
