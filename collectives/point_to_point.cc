#include "collectives/point_to_point.h"

#include <memory>
#include <string>

#include "collectives/fingerprint.h"
#include "collectives/ring_schedule.h"

namespace kolo {
namespace {

std::string describe(const PointToPoint& op) {
  return std::string(op.direction == PointToPoint::kSend ? "send of " : "receive of ") + std::to_string(op.count) +
         " " + dtype_name(op.dtype) + " " + (op.direction == PointToPoint::kSend ? "to" : "from") + " rank " +
         std::to_string(op.peer);
}

// Messages to this rank itself: the k-th send meets the k-th receive.
Status copy_to_self(const RingContext& ctx, const std::vector<PointToPoint>& ops) {
  std::vector<const PointToPoint*> sends, recvs;
  for (const auto& op : ops) {
    if (op.peer != ctx.rank) continue;
    (op.direction == PointToPoint::kSend ? sends : recvs).push_back(&op);
  }
  if (sends.size() != recvs.size()) {
    return mismatch("rank " + std::to_string(ctx.rank) + " posted " + std::to_string(sends.size()) +
                    " send(s) to itself and " + std::to_string(recvs.size()) + " receive(s) from itself");
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i]->count != recvs[i]->count || sends[i]->dtype != recvs[i]->dtype) {
      return mismatch(describe(*sends[i]) + " meets a " + describe(*recvs[i]));
    }
    ctx.memory->copy(recvs[i]->data, sends[i]->data, sends[i]->count * dtype_size(sends[i]->dtype));
  }
  return Status::ok();
}

}  // namespace

Status run_point_to_point(const RingContext& ctx, const std::vector<PointToPoint>& ops) {
  KOLO_RETURN_IF_ERROR(copy_to_self(ctx, ops));
  // Each message goes in segments, cut the same way on both sides (both
  // know the count), so that no message outgrows what a transport stages.
  struct Posted {
    Request request;
  };
  size_t messages = 0;
  for (const auto& op : ops) {
    if (op.peer == ctx.rank) continue;
    messages += segments_per_chunk(op.count, dtype_size(op.dtype), ctx.segment_bytes);
  }
  std::unique_ptr<Posted[]> posted(new Posted[messages]);  // fixed addresses: the transport holds them
  size_t next = 0;
  for (const auto& op : ops) {
    if (op.peer == ctx.rank) continue;
    const size_t elem = dtype_size(op.dtype);
    const size_t segments = segments_per_chunk(op.count, elem, ctx.segment_bytes);
    const uint64_t tag = fingerprint(CollectiveKind::kSendRecv, op.dtype, ReduceOp::kSum, 0, op.count);
    for (size_t j = 0; j < segments; ++j) {
      const Range seg = partition(op.count, segments, j);
      auto* at = static_cast<unsigned char*>(op.data) + seg.offset * elem;
      Request* r = &posted[next++].request;
      KOLO_RETURN_IF_ERROR(op.direction == PointToPoint::kSend
                               ? ctx.transport->post_send(op.peer, at, seg.count * elem, tag, r)
                               : ctx.transport->post_recv(op.peer, at, seg.count * elem, tag, r));
    }
  }
  // Every wait has a deadline: KOLO_TIMEOUT_S without any message finishing.
  for (size_t done = 0; done < messages;) {
    done = 0;
    for (size_t i = 0; i < messages; ++i) done += posted[i].request.done ? 1 : 0;
    if (done == messages) break;
    KOLO_RETURN_IF_ERROR(ctx.transport->progress(Deadline::after_seconds(ctx.pipeline.timeout_s)));
  }
  return Status::ok();
}

}  // namespace kolo
