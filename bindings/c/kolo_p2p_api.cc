// kolo_send, kolo_recv, kolo_recv_any, their _async forms, and groups
// (kolo.h). A group is per thread, as NCCL's: between kolo_group_start and
// the outermost kolo_group_end, sends and receives are checked and queued;
// the end posts each communicator's queue as one batch, and waits for it
// unless every call queued for that communicator was an _async one.
#include <memory>
#include <utility>
#include <vector>

#include "bindings/c/api_support.h"
#include "bindings/c/kolo.h"

using kolo_c::guarded;
using kolo_c::null_comm;
using kolo_c::raw_enum;

namespace {

struct Batch {
  std::vector<kolo::PointToPoint> ops;
  std::vector<std::shared_ptr<kolo::OpHandle>> done;  // the handles of its _async calls
  bool blocking = false;                              // one of its calls was not _async
};

struct Group {
  int depth = 0;
  // Per communicator, in the order each first appeared.
  std::vector<std::pair<kolo_comm_t, Batch>> batches;

  Batch& of(kolo_comm_t comm) {
    for (auto& b : batches) {
      if (b.first == comm) return b.second;
    }
    batches.push_back({comm, Batch{}});
    return batches.back().second;
  }
};

thread_local Group group;

// handle NULL: the blocking call; else the _async one.
// d: the dtype as the C caller's int (any value may come).
kolo_result_t point_to_point(kolo_comm_t comm, kolo::PointToPoint::Direction direction, void* buf, size_t count, int d,
                             int peer, kolo_handle_t* handle) {
  // An invalid dtype is reported as such before it is ever cast.
  auto op = [&] { return kolo::PointToPoint{direction, peer, buf, count, static_cast<kolo::DataType>(d)}; };
  auto check_dtype = [&] {
    return kolo::valid_dtype(d) ? kolo::Status::ok() : kolo::invalid_argument("unknown dtype " + std::to_string(d));
  };
  if (group.depth == 0) {
    auto call = [&](kolo::Launch launch) {
      KOLO_RETURN_IF_ERROR(check_dtype());
      return comm->impl->point_to_point({op()}, std::move(launch));
    };
    return handle ? kolo_c::asynchronous(comm, handle, call) : kolo_c::blocking(comm, call);
  }
  if (!comm) return null_comm();
  return guarded([&] {
    if (handle) *handle = nullptr;
    KOLO_RETURN_IF_ERROR(check_dtype());
    KOLO_RETURN_IF_ERROR(comm->impl->check_point_to_point(op()));
    auto h = handle ? std::make_unique<kolo_handle>() : nullptr;
    Batch& batch = group.of(comm);
    batch.ops.push_back(op());
    if (h) {
      h->impl = std::make_shared<kolo::OpHandle>();
      batch.done.push_back(h->impl);
      *handle = h.release();
    } else {
      batch.blocking = true;
    }
    return kolo::Status::ok();
  });
}

kolo::Status post(kolo_comm_t comm, Batch batch) {
  kolo::Launch launch;
  if (!batch.blocking) launch.done = batch.done;
  kolo::Status s = comm->impl->point_to_point(batch.ops, std::move(launch));
  // Blocking, or not queued at all: the handles learn the result here.
  if (batch.blocking || !s.is_ok()) {
    for (const auto& h : batch.done) h->complete(s);
  }
  return s;
}

// kolo_recv_any(_async): handle NULL for the blocking call. Never queued in
// a group: which message it takes depends on every receive posted before
// it, and a group posts all of its own at once.
kolo_result_t receive_any(kolo_comm_t comm, void* recvbuf, size_t count, int d, int* source, kolo_handle_t* handle) {
  auto call = [&](kolo::Launch launch) {
    if (group.depth > 0) {
      if (source) *source = -1;
      return kolo::invalid_argument(
          "kolo_recv_any cannot be grouped (called between kolo_group_start and kolo_group_end): which message it "
          "takes depends on the receives posted before it, and a group posts all of its own at once; call it "
          "outside the group");
    }
    return comm->impl->recv_any(recvbuf, count, d, source, std::move(launch));
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
  ++group.depth;
  return KOLO_SUCCESS;
}

kolo_result_t kolo_group_end(void) {
  return guarded([&] {
    if (group.depth == 0) return kolo::invalid_usage("kolo_group_end without kolo_group_start");
    if (--group.depth > 0) return kolo::Status::ok();
    auto batches = std::move(group.batches);
    group.batches.clear();
    kolo::Status first = kolo::Status::ok();
    for (auto& b : batches) {
      kolo::Status s = post(b.first, std::move(b.second));
      if (first.is_ok()) first = s;
    }
    return first;
  });
}

}  // extern "C"
