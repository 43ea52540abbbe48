// kolo_send, kolo_recv, kolo_recv_any, their _async forms, and groups
// (kolo.h). Groups are the runtime's (runtime/point_to_point_group.h): per
// thread, as NCCL's.
#include <memory>
#include <utility>
#include <vector>

#include "bindings/c/api_support.h"
#include "bindings/c/kolo.h"
#include "runtime/point_to_point_group.h"

using kolo_c::guarded;
using kolo_c::null_comm;
using kolo_c::raw_enum;

namespace {

// handle NULL: the blocking call; else the _async one.
// d: the dtype as the C caller's int (any value may come).
kolo_result_t point_to_point(kolo_comm_t comm, kolo::PointToPoint::Direction direction, void* buf, size_t count, int d,
                             int peer, kolo_handle_t* handle) {
  // An invalid dtype is reported as such before it is ever cast.
  auto op = [&] { return kolo::PointToPoint{direction, peer, buf, count, static_cast<kolo::DataType>(d)}; };
  auto check_dtype = [&] {
    return kolo::valid_dtype(d) ? kolo::Status::ok() : kolo::invalid_argument("unknown dtype " + std::to_string(d));
  };
  kolo::PointToPointGroup& group = kolo::PointToPointGroup::of_this_thread();
  if (!group.open()) {
    auto call = [&](const kolo::Launch& launch) {
      KOLO_RETURN_IF_ERROR(check_dtype());
      return comm->impl()->point_to_point({op()}, launch);
    };
    return handle ? kolo_c::asynchronous(comm, handle, call) : kolo_c::blocking(comm, call);
  }
  if (!comm) return null_comm();
  return guarded([&] {
    if (handle) *handle = nullptr;
    KOLO_RETURN_IF_ERROR(check_dtype());
    auto h = handle ? std::make_unique<kolo_handle>() : nullptr;
    if (h) h->impl = std::make_shared<kolo::OpHandle>();
    KOLO_RETURN_IF_ERROR(group.add(comm->impl(), op(), h ? h->impl : nullptr));
    if (h) *handle = h.release();
    return kolo::Status::ok();
  });
}

// kolo_recv_any(_async): handle NULL for the blocking call. Never queued in
// a group: which message it takes depends on every receive posted before
// it, and a group posts all of its own at once.
kolo_result_t receive_any(kolo_comm_t comm, void* recvbuf, size_t count, int d, int* source, kolo_handle_t* handle) {
  auto call = [&](const kolo::Launch& launch) {
    if (kolo::PointToPointGroup::of_this_thread().open()) {
      if (source) *source = -1;
      return kolo::invalid_argument(
          "kolo_recv_any cannot be grouped (called between kolo_group_start and kolo_group_end): which message it "
          "takes depends on the receives posted before it, and a group posts all of its own at once; call it "
          "outside the group");
    }
    return comm->impl()->recv_any(recvbuf, count, static_cast<kolo::DataType>(d), source, launch);
  };
  return handle ? kolo_c::asynchronous(comm, handle, call) : kolo_c::blocking(comm, call);
}

}  // namespace

extern "C" {

kolo_result_t kolo_send(kolo_comm_t comm, const void* sendbuf, size_t count, kolo_dtype_t dtype, int peer) {
  return point_to_point(comm, kolo::PointToPoint::kSend, const_cast<void*>(sendbuf), count, raw_enum(dtype), peer,
                        nullptr);
}

kolo_result_t kolo_recv(kolo_comm_t comm, void* recvbuf, size_t count, kolo_dtype_t dtype, int peer) {
  return point_to_point(comm, kolo::PointToPoint::kRecv, recvbuf, count, raw_enum(dtype), peer, nullptr);
}

kolo_result_t kolo_send_async(kolo_comm_t comm, const void* sendbuf, size_t count, kolo_dtype_t dtype, int peer,
                              kolo_handle_t* handle) {
  if (!handle) return kolo_c::report(kolo::invalid_argument("handle output pointer is NULL"));
  return point_to_point(comm, kolo::PointToPoint::kSend, const_cast<void*>(sendbuf), count, raw_enum(dtype), peer,
                        handle);
}

kolo_result_t kolo_recv_async(kolo_comm_t comm, void* recvbuf, size_t count, kolo_dtype_t dtype, int peer,
                              kolo_handle_t* handle) {
  if (!handle) return kolo_c::report(kolo::invalid_argument("handle output pointer is NULL"));
  return point_to_point(comm, kolo::PointToPoint::kRecv, recvbuf, count, raw_enum(dtype), peer, handle);
}

kolo_result_t kolo_recv_any(kolo_comm_t comm, void* recvbuf, size_t count, kolo_dtype_t dtype, int* source) {
  return receive_any(comm, recvbuf, count, raw_enum(dtype), source, nullptr);
}

kolo_result_t kolo_recv_any_async(kolo_comm_t comm, void* recvbuf, size_t count, kolo_dtype_t dtype, int* source,
                                  kolo_handle_t* handle) {
  if (!handle) return kolo_c::report(kolo::invalid_argument("handle output pointer is NULL"));
  return receive_any(comm, recvbuf, count, raw_enum(dtype), source, handle);
}

kolo_result_t kolo_group_start(void) {
  kolo::PointToPointGroup::of_this_thread().start();
  return KOLO_SUCCESS;
}

kolo_result_t kolo_group_end(void) {
  return guarded([&] { return kolo::PointToPointGroup::of_this_thread().end(); });
}

}  // extern "C"
