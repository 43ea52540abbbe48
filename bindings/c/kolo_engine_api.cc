// The C API of the runtime engine: named asynchronous operations, handles
// and the timeline.
#include <cmath>
#include <string>
#include <vector>

#include "bindings/c/api_support.h"

using kolo_c::guarded;
using kolo_c::null_comm;
using kolo_c::raw_enum;
using kolo_c::report;

namespace {

kolo_result_t null_handle() { return report(kolo::invalid_argument("handle is NULL")); }

kolo::Status read_shape(int ndim, const int64_t* shape, std::vector<int64_t>* out) {
  if (ndim < 0 || ndim > 64) return kolo::invalid_argument("ndim " + std::to_string(ndim) + " is not in [0, 64]");
  if (ndim > 0 && !shape) return kolo::invalid_argument("shape is NULL with ndim > 0");
  out->assign(shape, shape + ndim);
  return kolo::Status::ok();
}

// Validates the common arguments, submits, and hands out a C handle.
kolo_result_t submit(kolo_comm_t comm, const char* name, kolo::Submission sub, kolo_handle_t* handle) {
  if (!comm) return null_comm();
  return guarded([&] {
    if (!handle) return kolo::invalid_argument("handle output pointer is NULL");
    *handle = nullptr;
    if (!name) return kolo::invalid_argument("name is NULL");
    sub.request.name = name;
    auto h = std::make_unique<kolo_handle>();
    KOLO_RETURN_IF_ERROR(comm->engine()->submit(std::move(sub), &h->impl));
    *handle = h.release();
    return kolo::Status::ok();
  });
}

kolo::Submission single(kolo::OpKind kind, const void* send, void* recv, std::vector<int64_t> shape, int dtype) {
  kolo::Submission s;
  s.request.kind = kind;
  s.request.dtype = dtype;
  s.request.shapes.push_back(std::move(shape));
  s.sends.push_back(send);
  s.recvs.push_back(recv);
  return s;
}

// The fields allreduce, grouped allreduce and reduce-scatter share.
void set_reduction(kolo::OpRequest* r, kolo_op_t op, double prescale, double postscale) {
  r->op = raw_enum(op);
  r->prescale = prescale;
  r->postscale = postscale;
}

// A reducing operation of one tensor (allreduce, reduce-scatter).
kolo_result_t submit_reduction(kolo::OpKind kind, kolo_comm_t comm, const char* name, const void* sendbuf,
                               void* recvbuf, int ndim, const int64_t* shape, kolo_dtype_t dtype, kolo_op_t op,
                               double prescale, double postscale, kolo_handle_t* handle) {
  std::vector<int64_t> dims;
  kolo::Status s = read_shape(ndim, shape, &dims);
  if (!s.is_ok()) return report(s);
  kolo::Submission sub = single(kind, sendbuf, recvbuf, dims, raw_enum(dtype));
  set_reduction(&sub.request, op, prescale, postscale);
  return submit(comm, name, std::move(sub), handle);
}

}  // namespace

extern "C" {

kolo_result_t kolo_submit_allreduce(kolo_comm_t comm, const char* name, const void* sendbuf, void* recvbuf,
                                    int ndim, const int64_t* shape, kolo_dtype_t dtype, kolo_op_t op,
                                    double prescale, double postscale, kolo_handle_t* handle) {
  return submit_reduction(kolo::OpKind::kAllreduce, comm, name, sendbuf, recvbuf, ndim, shape, dtype, op, prescale,
                          postscale, handle);
}

kolo_result_t kolo_submit_grouped_allreduce(kolo_comm_t comm, const char* name, int num_tensors,
                                            const void* const* sendbufs, void* const* recvbufs, const int* ndims,
                                            const int64_t* const* shapes, kolo_dtype_t dtype, kolo_op_t op,
                                            double prescale, double postscale, kolo_handle_t* handle) {
  return kolo_submit_grouped_allreduce_wire(comm, name, num_tensors, sendbufs, recvbufs, ndims, shapes, dtype, op,
                                            prescale, postscale, KOLO_WIRE_DEFAULT, 0, handle);
}

kolo_result_t kolo_submit_allreduce_wire(kolo_comm_t comm, const char* name, const void* sendbuf, void* recvbuf,
                                         int ndim, const int64_t* shape, kolo_dtype_t dtype, kolo_op_t op,
                                         double prescale, double postscale, kolo_wire_format_t wire,
                                         int error_feedback, kolo_handle_t* handle) {
  std::vector<int64_t> dims;
  kolo::Status s = read_shape(ndim, shape, &dims);
  if (!s.is_ok()) return report(s);
  kolo::Submission sub = single(kolo::OpKind::kAllreduce, sendbuf, recvbuf, dims, raw_enum(dtype));
  set_reduction(&sub.request, op, prescale, postscale);
  sub.request.wire = raw_enum(wire);
  sub.request.error_feedback = error_feedback != 0;
  return submit(comm, name, std::move(sub), handle);
}

kolo_result_t kolo_submit_grouped_allreduce_wire(kolo_comm_t comm, const char* name, int num_tensors,
                                                 const void* const* sendbufs, void* const* recvbufs,
                                                 const int* ndims, const int64_t* const* shapes, kolo_dtype_t dtype,
                                                 kolo_op_t op, double prescale, double postscale,
                                                 kolo_wire_format_t wire, int error_feedback,
                                                 kolo_handle_t* handle) {
  if (num_tensors < 1) return report(kolo::invalid_argument("num_tensors must be at least 1"));
  if (!sendbufs || !recvbufs || !ndims || !shapes) {
    return report(kolo::invalid_argument("sendbufs, recvbufs, ndims and shapes must not be NULL"));
  }
  kolo::Submission sub;
  sub.request.kind = kolo::OpKind::kAllreduce;
  sub.request.dtype = raw_enum(dtype);
  set_reduction(&sub.request, op, prescale, postscale);
  sub.request.wire = raw_enum(wire);
  sub.request.error_feedback = error_feedback != 0;
  for (int i = 0; i < num_tensors; ++i) {
    std::vector<int64_t> dims;
    kolo::Status s = read_shape(ndims[i], shapes[i], &dims);
    if (!s.is_ok()) return report(s.with_context("tensor " + std::to_string(i)));
    sub.request.shapes.push_back(std::move(dims));
    sub.sends.push_back(sendbufs[i]);
    sub.recvs.push_back(recvbufs[i]);
  }
  return submit(comm, name, std::move(sub), handle);
}

kolo_result_t kolo_submit_allgather(kolo_comm_t comm, const char* name, const void* sendbuf, int ndim,
                                    const int64_t* shape, kolo_dtype_t dtype, kolo_handle_t* handle) {
  std::vector<int64_t> dims;
  kolo::Status s = read_shape(ndim, shape, &dims);
  if (!s.is_ok()) return report(s);
  kolo::Submission sub = single(kolo::OpKind::kAllgather, sendbuf, nullptr, dims, raw_enum(dtype));
  sub.recvs.clear();
  return submit(comm, name, std::move(sub), handle);
}

kolo_result_t kolo_submit_broadcast(kolo_comm_t comm, const char* name, void* buf, int ndim, const int64_t* shape,
                                    kolo_dtype_t dtype, int root, kolo_handle_t* handle) {
  std::vector<int64_t> dims;
  kolo::Status s = read_shape(ndim, shape, &dims);
  if (!s.is_ok()) return report(s);
  kolo::Submission sub = single(kolo::OpKind::kBroadcast, nullptr, buf, dims, raw_enum(dtype));
  sub.sends.clear();
  sub.request.root = root;
  return submit(comm, name, std::move(sub), handle);
}

kolo_result_t kolo_submit_reduce_scatter(kolo_comm_t comm, const char* name, const void* sendbuf, void* recvbuf,
                                         int ndim, const int64_t* shape, kolo_dtype_t dtype, kolo_op_t op,
                                         double prescale, double postscale, kolo_handle_t* handle) {
  return submit_reduction(kolo::OpKind::kReduceScatter, comm, name, sendbuf, recvbuf, ndim, shape, dtype, op,
                          prescale, postscale, handle);
}

kolo_result_t kolo_submit_alltoall(kolo_comm_t comm, const char* name, const void* sendbuf, int ndim,
                                   const int64_t* shape, const int64_t* splits, kolo_dtype_t dtype,
                                   kolo_handle_t* handle) {
  if (!comm) return null_comm();
  std::vector<int64_t> dims;
  kolo::Status s = read_shape(ndim, shape, &dims);
  if (!s.is_ok()) return report(s);
  kolo::Submission sub = single(kolo::OpKind::kAlltoall, sendbuf, nullptr, dims, raw_enum(dtype));
  sub.recvs.clear();
  const int n = comm->impl()->size();
  if (splits) {
    sub.request.splits.assign(splits, splits + n);
  } else if (!dims.empty()) {
    if (dims[0] % n != 0) {
      return report(kolo::invalid_argument(std::string("alltoall '") + (name ? name : "") + "': " +
                                           std::to_string(dims[0]) + " rows do not split evenly over " +
                                           std::to_string(n) + " ranks; pass splits"));
    }
    sub.request.splits.assign(n, dims[0] / n);
  }
  return submit(comm, name, std::move(sub), handle);
}

kolo_result_t kolo_submit_barrier(kolo_comm_t comm, const char* name, kolo_handle_t* handle) {
  kolo::Submission sub;
  sub.request.kind = kolo::OpKind::kBarrier;
  return submit(comm, name, std::move(sub), handle);
}

kolo_result_t kolo_join(kolo_comm_t comm, kolo_handle_t* handle) {
  if (!comm) return null_comm();
  return guarded([&] {
    if (!handle) return kolo::invalid_argument("handle output pointer is NULL");
    *handle = nullptr;
    auto h = std::make_unique<kolo_handle>();
    KOLO_RETURN_IF_ERROR(comm->engine()->join(&h->impl));
    *handle = h.release();
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_handle_test(kolo_handle_t handle, int* done) {
  if (!handle) return null_handle();
  if (!done) return report(kolo::invalid_argument("done output pointer is NULL"));
  return guarded([&] {
    *done = handle->impl->done() ? 1 : 0;
    return *done ? handle->impl->status() : kolo::Status::ok();
  });
}

kolo_result_t kolo_handle_wait(kolo_handle_t handle, double timeout_s) {
  if (!handle) return null_handle();
  return guarded([&] {
    if (std::isnan(timeout_s)) return kolo::invalid_argument("timeout_s is NaN");
    double t = timeout_s;
    if (t < 0) {
      kolo::Config config;
      KOLO_RETURN_IF_ERROR(kolo::load_config(&config));
      t = config.timeout_s;
    }
    // Its own reference: inside a callback a wait runs the queue forward,
    // whose callbacks may release this handle meanwhile.
    std::shared_ptr<kolo::OpHandle> impl = handle->impl;
    return impl->wait(kolo::Deadline::after_seconds(std::min(t, 1e9)));
  });
}

kolo_result_t kolo_handle_set_callback(kolo_handle_t handle, kolo_callback_t callback, void* user_data) {
  if (!handle) return null_handle();
  if (!callback) return report(kolo::invalid_argument("callback is NULL"));
  return guarded([&] {
    handle->impl->set_callback([callback, user_data](const kolo::Status& s) {
      kolo_result_t r = report(s);  // sets this thread's kolo_last_error() for the callback
      callback(r, user_data);
    });
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_handle_output(kolo_handle_t handle, const void** data, size_t* bytes) {
  if (!handle) return null_handle();
  if (!data || !bytes) return report(kolo::invalid_argument("data and bytes output pointers must not be NULL"));
  return guarded([&] {
    if (!handle->impl->finished()) return kolo::invalid_usage("the operation has not completed");
    const kolo::OpHandle& h = *handle->impl;
    *data = h.device_output ? h.device_output.get() : h.output.data();
    *bytes = h.device_output ? h.device_output_bytes : h.output.size();
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_handle_output_rows(kolo_handle_t handle, int64_t* rows, int world_size) {
  if (!handle) return null_handle();
  if (!rows) return report(kolo::invalid_argument("rows is NULL"));
  return guarded([&] {
    if (!handle->impl->finished()) return kolo::invalid_usage("the operation has not completed");
    const auto& r = handle->impl->output_rows;
    if (r.empty()) return kolo::invalid_usage("only allgather and alltoall have rows per rank");
    if (world_size != static_cast<int>(r.size())) {
      return kolo::invalid_argument("world_size " + std::to_string(world_size) + " is not the world's size " +
                                    std::to_string(r.size()));
    }
    std::copy(r.begin(), r.end(), rows);
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_handle_join_rank(kolo_handle_t handle, int* last_rank) {
  if (!handle) return null_handle();
  if (!last_rank) return report(kolo::invalid_argument("last_rank is NULL"));
  return guarded([&] {
    if (!handle->impl->finished()) return kolo::invalid_usage("the join has not completed");
    if (handle->impl->join_last_rank < 0) return kolo::invalid_usage("not a join handle, or the join failed");
    *last_rank = handle->impl->join_last_rank;
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_handle_release(kolo_handle_t handle) {
  return guarded([&] {
    delete handle;
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_timeline_start(kolo_comm_t comm, const char* path) {
  if (!comm) return null_comm();
  return guarded([&] {
    if (!path || !*path) return kolo::invalid_argument("path is NULL or empty");
    return comm->engine()->start_timeline(path);
  });
}

kolo_result_t kolo_timeline_stop(kolo_comm_t comm) {
  if (!comm) return null_comm();
  return guarded([&] {
    comm->engine()->stop_timeline();
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_engine_get_residual_bytes(kolo_comm_t comm, size_t* bytes) {
  if (!comm) return null_comm();
  if (!bytes) return report(kolo::invalid_argument("bytes is NULL"));
  return guarded([&] {
    *bytes = comm->engine()->residual_bytes();
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_engine_get_stats(kolo_comm_t comm, kolo_engine_stats_t* stats) {
  if (!comm) return null_comm();
  if (!stats) return report(kolo::invalid_argument("stats is NULL"));
  return guarded([&] {
    kolo::EngineStats s = comm->engine()->stats();
    stats->rounds = s.rounds;
    stats->rounds_with_messages = s.rounds_with_messages;
    stats->cache_hits = s.cache_hits;
    stats->operations = s.operations;
    stats->fused_batches = s.fused_batches;
    stats->negotiation_seconds = s.negotiation_seconds;
    return kolo::Status::ok();
  });
}

}  // extern "C"
