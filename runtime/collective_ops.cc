// The engine's operations other than allreduce. Each runs one collective of
// the engine's communicator; a joined rank takes part with the op's
// identity (or nothing to send) and drops what it receives.
#include <memory>
#include <string>
#include <vector>

#include "collectives/elementwise.h"
#include "collectives/ring_schedule.h"
#include "runtime/operations.h"

namespace kolo {
namespace {

Status broadcast(const OpResources& res, const OpRequest& q, Participation part) {
  const size_t count = static_cast<size_t>(element_count(q.shapes[0]));
  void* buf = part.sub ? part.sub->recvs[0] : res.scratch->get(count * dtype_size(static_cast<DataType>(q.dtype)));
  return res.link->broadcast(buf, count, q.data_type(), q.root);
}

// Where an allgather's or alltoall's result lands, its size known only
// now: host memory, or the GPU's where the operation runs on GPU memory;
// the handle keeps it.
class Output {
 public:
  Status make(const OpResources& res, const OpRequest& q, size_t bytes) {
    if (!q.on_device) {
      host_.resize(bytes);
      return Status::ok();
    }
    bytes_ = bytes;
    return res.link->device_output(bytes, &device_);
  }
  void* data() { return device_ ? device_.get() : host_.data(); }
  void give(OpHandle* handle) {
    handle->output = std::move(host_);
    handle->device_output = std::move(device_);
    handle->device_output_bytes = bytes_;
  }

 private:
  std::vector<unsigned char> host_;
  std::shared_ptr<void> device_;
  size_t bytes_ = 0;
};

Status allgather(const OpResources& res, const OpResponse& r, Participation part) {
  const OpRequest& q = r.spec;
  const int size = res.size;
  const size_t row = static_cast<size_t>(row_elements(q.shapes[0]));
  std::vector<size_t> counts(size);
  size_t total = 0;
  for (int p = 0; p < size; ++p) total += counts[p] = static_cast<size_t>(r.rows[p]) * row;
  Output out;
  KOLO_RETURN_IF_ERROR(out.make(res, q, total * dtype_size(q.data_type())));
  KOLO_RETURN_IF_ERROR(res.link->allgather_v(part.sub ? part.sub->sends[0] : nullptr, out.data(), counts, q.data_type()));
  if (part.handle) {
    out.give(part.handle);
    part.handle->output_rows = r.rows;
  }
  return Status::ok();
}

Status reduce_scatter(const OpResources& res, const OpRequest& q, Participation part) {
  const int size = res.size, rank = res.rank;
  const auto dtype = static_cast<DataType>(q.dtype);
  const auto op = static_cast<ReduceOp>(q.op);
  const size_t elem = dtype_size(dtype);
  const size_t rows = static_cast<size_t>(q.shapes[0][0]);
  const size_t row = static_cast<size_t>(row_elements(q.shapes[0]));
  std::vector<size_t> counts(size);
  for (int p = 0; p < size; ++p) counts[p] = partition(rows, size, p).count * row;
  const size_t total = rows * row;
  const void* send;
  void* recv;
  if (!part.sub) {
    if (res.identity->size() < total * elem) res.identity->resize(total * elem);
    fill_identity(dtype, op, res.identity->data(), total);
    send = res.identity->data();
    recv = res.scratch->get(counts[rank] * elem);
  } else {
    recv = part.sub->recvs[0];
    send = part.sub->sends[0];
    if (q.prescale != 1) {
      void* scaled = res.scratch->get(total * elem);
      scale_copy(dtype, scaled, send, total, q.prescale);
      send = scaled;
    }
  }
  alignas(8) static unsigned char nowhere[8];
  if (!recv) recv = nowhere;  // nothing lands here (this rank's part has no rows)
  KOLO_RETURN_IF_ERROR(res.link->reduce_scatter_v(send, recv, counts, q.data_type(), q.reduce_op()));
  if (part.sub && q.postscale != 1) scale_copy(dtype, recv, recv, counts[rank], q.postscale);
  return Status::ok();
}

Status alltoall(const OpResources& res, const OpResponse& r, Participation part) {
  const OpRequest& q = r.spec;
  const int size = res.size, rank = res.rank;
  const size_t row = static_cast<size_t>(row_elements(q.shapes[0]));
  std::vector<size_t> send_counts(size), recv_counts(size);
  std::vector<int64_t> recv_rows(size);
  size_t total = 0;
  for (int p = 0; p < size; ++p) {
    send_counts[p] = static_cast<size_t>(r.rows[rank * size + p]) * row;
    recv_rows[p] = r.rows[p * size + rank];
    total += recv_counts[p] = static_cast<size_t>(recv_rows[p]) * row;
  }
  Output out;
  KOLO_RETURN_IF_ERROR(out.make(res, q, total * dtype_size(q.data_type())));
  KOLO_RETURN_IF_ERROR(res.link->alltoall(part.sub ? part.sub->sends[0] : nullptr, send_counts, out.data(),
                                          recv_counts, q.data_type()));
  if (part.handle) {
    out.give(part.handle);
    part.handle->output_rows = std::move(recv_rows);
  }
  return Status::ok();
}

}  // namespace

Status run_collective(const OpResources& res, const OpResponse& agreed, Participation part) {
  const OpRequest& q = agreed.spec;
  const auto begin = SteadyClock::now();
  const char* phase = "";
  Status s;
  switch (q.kind) {
    case OpKind::kBarrier:
      phase = "BARRIER";
      s = res.link->barrier();
      break;
    case OpKind::kBroadcast:
      phase = "BROADCAST";
      s = broadcast(res, q, part);
      break;
    case OpKind::kAllgather:
      phase = "ALLGATHER";
      s = allgather(res, agreed, part);
      break;
    case OpKind::kReduceScatter:
      phase = "REDUCE_SCATTER";
      s = reduce_scatter(res, q, part);
      break;
    case OpKind::kAlltoall:
      phase = "ALLTOALL";
      s = alltoall(res, agreed, part);
      break;
    default:
      return internal_error("engine: cannot run a " + std::string(op_kind_name(q.kind)));
  }
  KOLO_RETURN_IF_ERROR(s);
  res.timeline->phase(q.name, phase, begin, SteadyClock::now());
  return Status::ok();
}

}  // namespace kolo
