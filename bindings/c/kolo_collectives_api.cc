// The C API's collectives (kolo.h), each written once as a function of how
// it is launched (kolo::Launch), so the blocking entry point, its _async
// twin and, for four of them, the _stream one differ only in that.
#include <string>
#include <optional>
#include <utility>
#include <vector>

#include "bindings/c/api_support.h"
#include "bindings/c/kolo.h"

using kolo::Launch;
using kolo::Status;
// At the entry points a C caller may pass any int as a dtype or op:
// kolo_c::dtype_of and op_of carry it to the C++ API, which checks it.

namespace {

// A C array of one entry per rank, copied (an asynchronous call keeps no
// pointer into the caller's arrays); NULL is an error unless `optional`
// (then *out stays empty: blocks packed in rank order).
Status per_rank(kolo_comm_t comm, const size_t* values, const char* name, bool optional, std::vector<size_t>* out) {
  if (!values) {
    if (optional) return Status::ok();
    return kolo::invalid_argument(std::string(name) + " is NULL");
  }
  out->assign(values, values + comm->impl()->size());
  return Status::ok();
}

Status allreduce(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, kolo::DataType dtype,
                 kolo::ReduceOp op, const Launch& launch) {
  return comm->impl()->allreduce(sendbuf, recvbuf, count, dtype, op, launch);
}

Status allreduce_wire(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, kolo::DataType dtype,
                      kolo::ReduceOp op, int wire, float* residuals, const Launch& launch) {
  std::optional<kolo::WireFormat> format;
  if (wire != KOLO_WIRE_DEFAULT) {
    if (!kolo::valid_wire_format(wire)) {
      return kolo::invalid_argument("wire = " + std::to_string(wire) +
                                    ": use KOLO_WIRE_DEFAULT, KOLO_WIRE_NATIVE, KOLO_WIRE_BF16, KOLO_WIRE_FP16, "
                                    "KOLO_WIRE_FP8_E4M3, KOLO_WIRE_FP8_E5M2 or KOLO_WIRE_INT8");
    }
    format = static_cast<kolo::WireFormat>(wire);
  }
  return comm->impl()->allreduce(sendbuf, recvbuf, count, dtype, op, format, residuals, launch);
}

Status allreduce_many(kolo_comm_t comm, const void* const* sendbufs, void* const* recvbufs, const size_t* counts,
                      size_t n, kolo::DataType dtype, kolo::ReduceOp op, const Launch& launch) {
  if (!sendbufs || !recvbufs || !counts) {
    return kolo::invalid_argument(std::string(!sendbufs ? "sendbufs" : !recvbufs ? "recvbufs" : "counts") +
                                  " is NULL");
  }
  std::vector<kolo::Span> spans;  // copied: an asynchronous call keeps no pointer into the caller's arrays
  spans.reserve(n);
  for (size_t i = 0; i < n; ++i) spans.push_back({sendbufs[i], recvbufs[i], counts[i]});
  return comm->impl()->allreduce_many(std::move(spans), dtype, op, launch);
}

Status allgather(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount, kolo::DataType dtype,
                 const Launch& launch) {
  return comm->impl()->allgather(sendbuf, recvbuf, sendcount, dtype, launch);
}

Status broadcast(kolo_comm_t comm, void* buf, size_t count, kolo::DataType dtype, int root, const Launch& launch) {
  return comm->impl()->broadcast(buf, count, dtype, root, launch);
}

Status reduce_scatter(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t recvcount, kolo::DataType dtype, kolo::ReduceOp op,
                      const Launch& launch) {
  return comm->impl()->reduce_scatter(sendbuf, recvbuf, recvcount, dtype, op, launch);
}

Status reduce(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, kolo::DataType dtype, kolo::ReduceOp op, int root,
              const Launch& launch) {
  return comm->impl()->reduce(sendbuf, recvbuf, count, dtype, op, root, launch);
}

Status gatherv(kolo_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf, const size_t* recvcounts,
               const size_t* displs, kolo::DataType dtype, int root, const Launch& launch) {
  std::vector<size_t> counts, offsets;
  KOLO_RETURN_IF_ERROR(per_rank(comm, recvcounts, "recvcounts", false, &counts));
  if (comm->impl()->rank() == root) KOLO_RETURN_IF_ERROR(per_rank(comm, displs, "displs", true, &offsets));
  return comm->impl()->gatherv(sendbuf, sendcount, recvbuf, counts, offsets, dtype, root, launch);
}

Status gather(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount, kolo::DataType dtype, int root,
              const Launch& launch) {
  const std::vector<size_t> counts(comm->impl()->size(), sendcount);
  return comm->impl()->gatherv(sendbuf, sendcount, recvbuf, counts, {}, dtype, root, launch);
}

Status scatterv(kolo_comm_t comm, const void* sendbuf, const size_t* sendcounts, const size_t* displs, void* recvbuf,
                size_t recvcount, kolo::DataType dtype, int root, const Launch& launch) {
  std::vector<size_t> counts, offsets;
  KOLO_RETURN_IF_ERROR(per_rank(comm, sendcounts, "sendcounts", false, &counts));
  if (comm->impl()->rank() == root) KOLO_RETURN_IF_ERROR(per_rank(comm, displs, "displs", true, &offsets));
  return comm->impl()->scatterv(sendbuf, counts, offsets, recvbuf, recvcount, dtype, root, launch);
}

Status scatter(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t recvcount, kolo::DataType dtype, int root,
               const Launch& launch) {
  const std::vector<size_t> counts(comm->impl()->size(), recvcount);
  return comm->impl()->scatterv(sendbuf, counts, {}, recvbuf, recvcount, dtype, root, launch);
}

Status allgatherv(kolo_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf, const size_t* recvcounts,
                  const size_t* displs, kolo::DataType dtype, const Launch& launch) {
  std::vector<size_t> counts, offsets;
  KOLO_RETURN_IF_ERROR(per_rank(comm, recvcounts, "recvcounts", false, &counts));
  KOLO_RETURN_IF_ERROR(per_rank(comm, displs, "displs", true, &offsets));
  return comm->impl()->allgatherv(sendbuf, sendcount, recvbuf, counts, offsets, dtype, launch);
}

Status reduce_scatterv(kolo_comm_t comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts, kolo::DataType dtype,
                       kolo::ReduceOp op, const Launch& launch) {
  std::vector<size_t> counts;
  KOLO_RETURN_IF_ERROR(per_rank(comm, recvcounts, "recvcounts", false, &counts));
  return comm->impl()->reduce_scatterv(sendbuf, recvbuf, counts, dtype, op, launch);
}

Status alltoall(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, kolo::DataType dtype,
                const Launch& launch) {
  const std::vector<size_t> counts(comm->impl()->size(), count);
  return comm->impl()->alltoallv(sendbuf, counts, {}, recvbuf, counts, {}, dtype, launch);
}

Status alltoallv(kolo_comm_t comm, const void* sendbuf, const size_t* sendcounts, const size_t* sdispls, void* recvbuf,
                 const size_t* recvcounts, const size_t* rdispls, kolo::DataType dtype, const Launch& launch) {
  std::vector<size_t> scounts, rcounts, soffsets, roffsets;
  KOLO_RETURN_IF_ERROR(per_rank(comm, sendcounts, "sendcounts", false, &scounts));
  KOLO_RETURN_IF_ERROR(per_rank(comm, recvcounts, "recvcounts", false, &rcounts));
  KOLO_RETURN_IF_ERROR(per_rank(comm, sdispls, "sdispls", true, &soffsets));
  KOLO_RETURN_IF_ERROR(per_rank(comm, rdispls, "rdispls", true, &roffsets));
  return comm->impl()->alltoallv(sendbuf, scounts, soffsets, recvbuf, rcounts, roffsets, dtype, launch);
}

}  // namespace

// Each collective's entry points: blocking, _async (the handle last), and
// _stream (the stream last) where it exists.
#define KOLO_BLOCKING_AND_ASYNC(name, params, args)                                               \
  kolo_result_t kolo_##name params {                                                              \
    return kolo_c::blocking(comm, [&](const Launch& launch) { return name args; });               \
  }                                                                                               \
  kolo_result_t kolo_##name##_async(KOLO_UNPAREN params, kolo_handle_t* handle) {                 \
    return kolo_c::asynchronous(comm, handle, [&](const Launch& launch) { return name args; });   \
  }
#define KOLO_UNPAREN(...) __VA_ARGS__

extern "C" {

KOLO_BLOCKING_AND_ASYNC(allreduce,
                        (kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, kolo_dtype_t dtype,
                         kolo_op_t op),
                        (comm, sendbuf, recvbuf, count, kolo_c::dtype_of(dtype), kolo_c::op_of(op), launch))
KOLO_BLOCKING_AND_ASYNC(allreduce_wire,
                        (kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, kolo_dtype_t dtype,
                         kolo_op_t op, kolo_wire_format_t wire, float* residuals),
                        (comm, sendbuf, recvbuf, count, kolo_c::dtype_of(dtype), kolo_c::op_of(op),
                         kolo_c::raw_enum(wire), residuals, launch))
KOLO_BLOCKING_AND_ASYNC(allreduce_many,
                        (kolo_comm_t comm, const void* const* sendbufs, void* const* recvbufs, const size_t* counts,
                         size_t n, kolo_dtype_t dtype, kolo_op_t op),
                        (comm, sendbufs, recvbufs, counts, n, kolo_c::dtype_of(dtype), kolo_c::op_of(op),
                         launch))
KOLO_BLOCKING_AND_ASYNC(allgather,
                        (kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount, kolo_dtype_t dtype),
                        (comm, sendbuf, recvbuf, sendcount, kolo_c::dtype_of(dtype), launch))
KOLO_BLOCKING_AND_ASYNC(broadcast, (kolo_comm_t comm, void* buf, size_t count, kolo_dtype_t dtype, int root),
                        (comm, buf, count, kolo_c::dtype_of(dtype), root, launch))
KOLO_BLOCKING_AND_ASYNC(reduce_scatter,
                        (kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t recvcount, kolo_dtype_t dtype,
                         kolo_op_t op),
                        (comm, sendbuf, recvbuf, recvcount, kolo_c::dtype_of(dtype), kolo_c::op_of(op), launch))
KOLO_BLOCKING_AND_ASYNC(reduce,
                        (kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, kolo_dtype_t dtype,
                         kolo_op_t op, int root),
                        (comm, sendbuf, recvbuf, count, kolo_c::dtype_of(dtype), kolo_c::op_of(op), root, launch))
KOLO_BLOCKING_AND_ASYNC(gather,
                        (kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount, kolo_dtype_t dtype,
                         int root),
                        (comm, sendbuf, recvbuf, sendcount, kolo_c::dtype_of(dtype), root, launch))
KOLO_BLOCKING_AND_ASYNC(gatherv,
                        (kolo_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                         const size_t* recvcounts, const size_t* displs, kolo_dtype_t dtype, int root),
                        (comm, sendbuf, sendcount, recvbuf, recvcounts, displs, kolo_c::dtype_of(dtype), root,
                         launch))
KOLO_BLOCKING_AND_ASYNC(scatter,
                        (kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t recvcount, kolo_dtype_t dtype,
                         int root),
                        (comm, sendbuf, recvbuf, recvcount, kolo_c::dtype_of(dtype), root, launch))
KOLO_BLOCKING_AND_ASYNC(scatterv,
                        (kolo_comm_t comm, const void* sendbuf, const size_t* sendcounts, const size_t* displs,
                         void* recvbuf, size_t recvcount, kolo_dtype_t dtype, int root),
                        (comm, sendbuf, sendcounts, displs, recvbuf, recvcount, kolo_c::dtype_of(dtype), root,
                         launch))
KOLO_BLOCKING_AND_ASYNC(allgatherv,
                        (kolo_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                         const size_t* recvcounts, const size_t* displs, kolo_dtype_t dtype),
                        (comm, sendbuf, sendcount, recvbuf, recvcounts, displs, kolo_c::dtype_of(dtype), launch))
KOLO_BLOCKING_AND_ASYNC(reduce_scatterv,
                        (kolo_comm_t comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts,
                         kolo_dtype_t dtype, kolo_op_t op),
                        (comm, sendbuf, recvbuf, recvcounts, kolo_c::dtype_of(dtype), kolo_c::op_of(op), launch))
KOLO_BLOCKING_AND_ASYNC(alltoall,
                        (kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count, kolo_dtype_t dtype),
                        (comm, sendbuf, recvbuf, count, kolo_c::dtype_of(dtype), launch))
KOLO_BLOCKING_AND_ASYNC(alltoallv,
                        (kolo_comm_t comm, const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                         void* recvbuf, const size_t* recvcounts, const size_t* rdispls, kolo_dtype_t dtype),
                        (comm, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, kolo_c::dtype_of(dtype),
                         launch))

kolo_result_t kolo_barrier(kolo_comm_t comm) {
  return kolo_c::blocking(comm, [&](const Launch& launch) { return comm->impl()->barrier(launch); });
}

kolo_result_t kolo_barrier_async(kolo_comm_t comm, kolo_handle_t* handle) {
  return kolo_c::asynchronous(comm, handle, [&](const Launch& launch) { return comm->impl()->barrier(launch); });
}

kolo_result_t kolo_allreduce_stream(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                    kolo_dtype_t dtype, kolo_op_t op, void* stream) {
  return kolo_c::on_stream(comm, stream, [&](const Launch& launch) {
    return allreduce(comm, sendbuf, recvbuf, count, kolo_c::dtype_of(dtype), kolo_c::op_of(op), launch);
  });
}

kolo_result_t kolo_allgather_stream(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                                    kolo_dtype_t dtype, void* stream) {
  return kolo_c::on_stream(comm, stream, [&](const Launch& launch) {
    return allgather(comm, sendbuf, recvbuf, sendcount, kolo_c::dtype_of(dtype), launch);
  });
}

kolo_result_t kolo_broadcast_stream(kolo_comm_t comm, void* buf, size_t count, kolo_dtype_t dtype, int root,
                                    void* stream) {
  return kolo_c::on_stream(comm, stream, [&](const Launch& launch) {
    return broadcast(comm, buf, count, kolo_c::dtype_of(dtype), root, launch);
  });
}

kolo_result_t kolo_allreduce_many_stream(kolo_comm_t comm, const void* const* sendbufs, void* const* recvbufs,
                                         const size_t* counts, size_t n, kolo_dtype_t dtype, kolo_op_t op,
                                         void* stream) {
  return kolo_c::on_stream(comm, stream, [&](const Launch& launch) {
    return allreduce_many(comm, sendbufs, recvbufs, counts, n, kolo_c::dtype_of(dtype), kolo_c::op_of(op), launch);
  });
}

kolo_result_t kolo_alltoall_stream(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                   kolo_dtype_t dtype, void* stream) {
  return kolo_c::on_stream(comm, stream, [&](const Launch& launch) {
    return alltoall(comm, sendbuf, recvbuf, count, kolo_c::dtype_of(dtype), launch);
  });
}

kolo_result_t kolo_reduce_scatter_stream(kolo_comm_t comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                                         kolo_dtype_t dtype, kolo_op_t op, void* stream) {
  return kolo_c::on_stream(comm, stream, [&](const Launch& launch) {
    return reduce_scatter(comm, sendbuf, recvbuf, recvcount, kolo_c::dtype_of(dtype), kolo_c::op_of(op), launch);
  });
}

}  // extern "C"
