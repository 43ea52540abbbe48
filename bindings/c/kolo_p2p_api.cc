// kolo_send, kolo_recv and groups (kolo.h). A group is per thread, as
// NCCL's: between kolo_group_start and the outermost kolo_group_end, sends
// and receives are checked and queued; the end posts each communicator's
// queue as one batch.
#include <utility>
#include <vector>

#include "bindings/c/api_support.h"
#include "bindings/c/kolo.h"

using kolo_c::guarded;
using kolo_c::null_comm;
using kolo_c::raw_enum;

namespace {

struct Group {
  int depth = 0;
  // Per communicator, in the order each first appeared.
  std::vector<std::pair<kolo_comm_t, std::vector<kolo::PointToPoint>>> queues;
};

thread_local Group group;

kolo_result_t point_to_point(kolo_comm_t comm, kolo::PointToPoint::Direction direction, void* buf, size_t count,
                             kolo_dtype_t dtype, int peer) {
  if (!comm) return null_comm();
  return guarded([&] {
    const int d = raw_enum(dtype);
    // An invalid dtype is reported as such before it is ever cast.
    if (!kolo::valid_dtype(d)) return kolo::invalid_argument("unknown dtype " + std::to_string(d));
    const kolo::PointToPoint op{direction, peer, buf, count, static_cast<kolo::DataType>(d)};
    if (group.depth == 0) return comm->impl->point_to_point({op});
    KOLO_RETURN_IF_ERROR(comm->impl->check_point_to_point(op));
    for (auto& q : group.queues) {
      if (q.first == comm) {
        q.second.push_back(op);
        return kolo::Status::ok();
      }
    }
    group.queues.push_back({comm, {op}});
    return kolo::Status::ok();
  });
}

}  // namespace

extern "C" {

kolo_result_t kolo_send(kolo_comm_t comm, const void* sendbuf, size_t count, kolo_dtype_t dtype, int peer) {
  return point_to_point(comm, kolo::PointToPoint::kSend, const_cast<void*>(sendbuf), count, dtype, peer);
}

kolo_result_t kolo_recv(kolo_comm_t comm, void* recvbuf, size_t count, kolo_dtype_t dtype, int peer) {
  return point_to_point(comm, kolo::PointToPoint::kRecv, recvbuf, count, dtype, peer);
}

kolo_result_t kolo_group_start(void) {
  ++group.depth;
  return KOLO_SUCCESS;
}

kolo_result_t kolo_group_end(void) {
  return guarded([&] {
    if (group.depth == 0) return kolo::invalid_usage("kolo_group_end without kolo_group_start");
    if (--group.depth > 0) return kolo::Status::ok();
    auto queues = std::move(group.queues);
    group.queues.clear();
    kolo::Status first = kolo::Status::ok();
    for (auto& q : queues) {
      kolo::Status s = q.first->impl->point_to_point(q.second);
      if (first.is_ok()) first = s;
    }
    return first;
  });
}

}  // extern "C"
