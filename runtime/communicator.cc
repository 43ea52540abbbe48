#include "runtime/communicator.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/alltoall.h"
#include "collectives/fingerprint.h"
#include "collectives/recursive_doubling.h"
#include "collectives/rooted.h"
#include "common/log.h"
#include "common/rank_list.h"
#include "common/ranges.h"
#include "gpu/device.h"
#include "runtime/argument_checks.h"
#include "transport/any_source.h"

namespace kolo {

Communicator::Communicator(const Config& config)
    : config_(config),
      thresholds_(thresholds_of(config_)),
      recorder_(static_cast<size_t>(std::max<int64_t>(0, config.flight_recorder_entries))) {}

Communicator::~Communicator() {
  if (dump_signal_id_) FlightRecorderRegistry::remove(dump_signal_id_);
  launcher_.reset();  // runs what callers enqueued (bounded by their deadlines)
  if (wiring_.transport) wiring_.transport->abort();
  wiring_.arena.reset();
  wiring_.host_arena.reset();
  host_memory_.attach(nullptr);  // deregisters it while the transport lives
  wiring_.transport.reset();
}


ScheduleContext Communicator::schedule_context() {
  ScheduleContext ctx;
  ctx.transport = wiring_.transport.get();
  ctx.rank = world_.rank;
  ctx.size = world_.size;
  // Without %: a division costs more than the rest of this.
  ctx.left = world_.rank == 0 ? world_.size - 1 : world_.rank - 1;
  ctx.right = world_.rank + 1 == world_.size ? 0 : world_.rank + 1;
  ctx.segment_bytes = wiring_.pacing.segment_bytes;
  ctx.cache_bytes = wiring_.pacing.cache_bytes;
  ctx.pipeline.staging_slots = static_cast<size_t>(config_.pipeline_depth);
  ctx.pipeline.timeout_s = config_.timeout_s;
  ctx.memory = &host_memory_;
  ctx.reduce_scatter_done = rs_mark_;
  return ctx;
}

Topology Communicator::topology() const { return topology_of(wiring_, world_, thresholds_, &choices_); }

const char* Communicator::allreduce_algorithm(size_t bytes) {
  return kolo::allreduce_algorithm(topology(), thresholds(), bytes, /*host_memory=*/true);
}

Status Communicator::estimate(const std::string& collective, size_t bytes, double* seconds, const char** algorithm) {
  Estimate e;
  KOLO_RETURN_IF_ERROR(kolo::estimate(collective, topology(), thresholds(), bytes, /*host_memory=*/true, &e));
  if (seconds) *seconds = world_.size == 1 ? 0 : e.seconds;
  if (algorithm) *algorithm = e.algorithm;
  return Status::ok();
}


Status Communicator::gpu_ordinal(int* ordinal) { return launcher_->gpu_ordinal(ordinal); }

Status Communicator::classify(BufferList buffers, bool* on_device) { return launcher_->classify(buffers, on_device); }

Status Communicator::gpu_device(Device** device) { return launcher_->gpu_device(device); }

Status Communicator::register_memory(const void* data, size_t bytes) {
  if (data == nullptr && bytes > 0) return invalid_argument("buf is NULL with bytes = " + std::to_string(bytes));
  std::lock_guard<std::mutex> lock(call_mutex_);
  KOLO_RETURN_IF_ERROR(check_healthy());
  if (!wiring_.transport || bytes == 0) return Status::ok();
  return wiring_.transport->register_memory(data, bytes);
}

Status Communicator::deregister_memory(const void* data, size_t bytes) {
  if (data == nullptr && bytes > 0) return invalid_argument("buf is NULL with bytes = " + std::to_string(bytes));
  std::lock_guard<std::mutex> lock(call_mutex_);
  if (wiring_.transport && bytes > 0) wiring_.transport->deregister_memory(data, bytes);
  return Status::ok();
}


Status Communicator::wire_for(std::optional<WireFormat> wire, DataType dtype, ReduceOp op, size_t bytes,
                              WireFormat* out) const {
  if (wire) {
    if (!valid_wire_format(static_cast<int>(*wire))) {
      return invalid_argument("wire format " + std::to_string(static_cast<int>(*wire)) + " does not exist");
    }
    const std::string refusal = wire_format_refusal(*wire, dtype, op);
    if (!refusal.empty()) return invalid_argument(refusal);
    *out = *wire;
    return Status::ok();
  }
  // The communicator's default, where it can apply: a latency-bound call
  // gains nothing from fewer bytes and would lose recursive doubling.
  *out = WireFormat::kNative;
  if (bytes <= thresholds_.small_bytes || !wire_format_carries(dtype, op)) return Status::ok();
  (void)parse_wire_format(config_.wire_format, out);  // checked when the config was read
  return Status::ok();
}

Status Communicator::wire_for_buffers(std::optional<WireFormat> wire, DataType dtype, ReduceOp op, size_t bytes,
                                      BufferList buffers, WireFormat* out) {
  KOLO_RETURN_IF_ERROR(wire_for(wire, dtype, op, bytes, out));
  if (*out == WireFormat::kNative) return Status::ok();
  // The wire formats' kernels run on the host: device buffers reduce in
  // their own dtype (the communicator's default gives way; a format asked
  // for this call is refused).
  bool on_device = false;
  KOLO_RETURN_IF_ERROR(launcher_->classify(buffers, &on_device));
  if (on_device && wire) {
    return unsupported(std::string("wire format ") + wire_format_name(*out) +
                       " needs host buffers: device buffers reduce in their own dtype");
  }
  if (on_device) *out = WireFormat::kNative;
  return Status::ok();
}

namespace {

// The elements of a "v" collective's counts: what the ranks agree on (each
// one's own count may differ).
size_t elements(const std::vector<size_t>& counts) {
  size_t total = 0;
  for (size_t c : counts) total += c;
  return total;
}

// A buffer as dispatch() classifies it: by its address even when empty, so
// that a rank with nothing to send or receive in a collective whose other
// ranks move data (a gatherv's zero block) runs it on the same path as
// they do (host or device; the two must match between neighbours). NULL is
// host.
NamedBuffer named(const void* data, size_t bytes, const char* name) {
  return {data, data ? std::max<size_t>(bytes, 1) : 0, name};
}

}  // namespace

Status Communicator::allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                               const Launch& launch) {
  return allreduce(send, recv, count, dtype, op, std::nullopt, nullptr, launch);
}

Status Communicator::allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                               std::optional<WireFormat> wire, float* residuals, const Launch& launch) {
  KOLO_RETURN_IF_ERROR(check_reduction(dtype, op, send, recv, count));
  const size_t bytes = count * dtype_size(dtype);
  if (send != recv && ranges_overlap(send, bytes, recv, bytes)) {
    return invalid_argument("sendbuf and recvbuf overlap without being equal");
  }
  const NamedBuffer buffers[] = {{send, bytes, "sendbuf"}, {recv, bytes, "recvbuf"}};
  WireFormat format;
  KOLO_RETURN_IF_ERROR(wire_for_buffers(wire, dtype, op, bytes, buffers, &format));
  return dispatch(CallRecord("allreduce", dtype, count, op), buffers, launch,
                  [=](const ScheduleContext& ctx) {
                    const Span spans[] = {{send, recv, count}};
                    AllreduceArgs args{spans, dtype, op};
                    args.wire = format;
                    std::vector<float*> span_residuals;  // allocated only where error feedback applies
                    if (format != WireFormat::kNative && residuals) {
                      span_residuals.push_back(residuals);
                      args.residuals = &span_residuals;
                    }
                    return kolo::allreduce(ctx, topology(), thresholds(), args);
                  });
}

Status Communicator::allreduce_many(std::vector<Span> spans, DataType dtype, ReduceOp op, const Launch& launch) {
  if (spans.empty()) return invalid_argument("no buffers to reduce");
  std::vector<NamedBuffer> buffers;
  size_t total = 0;
  for (const Span& s : spans) {
    KOLO_RETURN_IF_ERROR(check_reduction(dtype, op, s.send, s.recv, s.count));
    const size_t bytes = s.count * dtype_size(dtype);
    if (s.send != s.recv && ranges_overlap(s.send, bytes, s.recv, bytes)) {
      return invalid_argument("buffer " + std::to_string(buffers.size() / 2) +
                              ": its sendbuf and recvbuf overlap without being equal");
    }
    buffers.push_back({s.send, bytes, "sendbufs"});
    buffers.push_back({s.recv, bytes, "recvbufs"});
    total += s.count;
  }
  WireFormat format;
  KOLO_RETURN_IF_ERROR(wire_for_buffers(std::nullopt, dtype, op, total * dtype_size(dtype), buffers, &format));
  return dispatch(CallRecord("allreduce", dtype, total, op), buffers, launch,
                  [this, spans = std::move(spans), dtype, op, format](const ScheduleContext& ctx) {
                    AllreduceArgs args{spans, dtype, op};
                    args.wire = format;
                    return kolo::allreduce(ctx, topology(), thresholds(), args);
                  });
}

Status Communicator::allgather(const void* send, void* recv, size_t send_count, DataType dtype, const Launch& launch) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_buffer(send, send_count, "sendbuf"));
  KOLO_RETURN_IF_ERROR(check_buffer(recv, send_count, "recvbuf"));
  const size_t block = send_count * dtype_size(dtype);
  const void* own = static_cast<const char*>(recv) + world_.rank * block;
  if (send != recv && send != own && ranges_overlap(send, block, recv, block * world_.size)) {
    return invalid_argument("sendbuf overlaps recvbuf but is neither recvbuf nor this rank's block of it");
  }
  return dispatch(CallRecord("allgather", dtype, send_count), {{send, block, "sendbuf"}, {recv, block * world_.size, "recvbuf"}}, launch,
                  [=](const ScheduleContext& ctx) {
                    const std::vector<size_t> counts(world_.size, send_count);
                    return kolo::allgather(ctx, topology(), thresholds(),
                                           {send, recv, counts, packed_or({}, counts), dtype});
                  });
}

Status Communicator::broadcast(void* buf, size_t count, DataType dtype, int root, const Launch& launch) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_buffer(buf, count, "buf"));
  if (root < 0 || root >= world_.size) {
    return invalid_argument("root " + std::to_string(root) + " is not a rank of a world of " +
                            std::to_string(world_.size));
  }
  const size_t bytes = count * dtype_size(dtype);
  return dispatch(CallRecord("broadcast", dtype, count, root), {{buf, bytes, "buf"}}, launch, [=](const ScheduleContext& ctx) {
    return kolo::broadcast(ctx, topology(), thresholds(), {buf, count, dtype, root});
  });
}

Status Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DataType dtype, ReduceOp op,
                                    const Launch& launch) {
  KOLO_RETURN_IF_ERROR(check_reduction(dtype, op, send, recv, recv_count));
  const size_t block = recv_count * dtype_size(dtype);
  return dispatch(CallRecord("reduce_scatter", dtype, recv_count, op), {{send, block * world_.size, "sendbuf"}, {recv, block, "recvbuf"}},
                  launch,
                  [=](const ScheduleContext& ctx) {
                    const std::vector<size_t> counts(world_.size, recv_count);
                    return kolo::reduce_scatter(ctx, topology(), thresholds(),
                                                {send, recv, counts, dtype,
                                                 op});
                  });
}


Status Communicator::barrier(const Launch& launch) {
  return dispatch("barrier", {}, launch, [](const ScheduleContext& ctx) { return ring_barrier(ctx); });
}

Status Communicator::allgather_v(const void* send, void* recv, const std::vector<size_t>& counts, DataType dtype) {
  // allgatherv's checks, where they apply to blocks packed in rank order.
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_counts(counts, world_.size, "counts"));
  KOLO_RETURN_IF_ERROR(check_buffer(send, counts[world_.rank], "sendbuf"));
  KOLO_RETURN_IF_ERROR(check_buffer(recv, total_of(counts), "recvbuf"));
  const size_t es = dtype_size(dtype);
  return dispatch(CallRecord("allgather", dtype, total_of(counts)),
                  {named(send, counts[world_.rank] * es, "sendbuf"), named(recv, total_of(counts) * es, "recvbuf")}, {},
                  [&](const ScheduleContext& ctx) {
                    return kolo::allgather(ctx, topology(), thresholds(),
                                           {send, recv, counts, packed_or({}, counts), dtype});
                  });
}

Status Communicator::reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& counts, DataType dtype,
                                      ReduceOp op, double postscale) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_op(op));
  KOLO_RETURN_IF_ERROR(check_counts(counts, world_.size, "counts"));
  KOLO_RETURN_IF_ERROR(check_buffer(send, total_of(counts), "sendbuf"));
  KOLO_RETURN_IF_ERROR(check_buffer(recv, counts[world_.rank], "recvbuf"));
  const size_t es = dtype_size(dtype);
  const size_t mine = counts[world_.rank];
  return dispatch(CallRecord("reduce_scatter", dtype, total_of(counts), op),
                  {named(send, total_of(counts) * es, "sendbuf"), named(recv, mine * es, "recvbuf")}, {},
                  [&](const ScheduleContext& ctx) {
                    KOLO_RETURN_IF_ERROR(kolo::reduce_scatter(ctx, topology(), thresholds(),
                                                              {send, recv, counts, dtype, op}));
                    if (postscale != 1) ctx.memory->scale(dtype, recv, recv, mine, postscale);
                    return Status::ok();
                  });
}

Status Communicator::alltoall(const void* send, const std::vector<size_t>& send_counts, void* recv,
                              const std::vector<size_t>& recv_counts, DataType dtype) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_counts(send_counts, world_.size, "send counts"));
  KOLO_RETURN_IF_ERROR(check_counts(recv_counts, world_.size, "receive counts"));
  KOLO_RETURN_IF_ERROR(check_buffer(send, total_of(send_counts), "sendbuf"));
  KOLO_RETURN_IF_ERROR(check_buffer(recv, total_of(recv_counts), "recvbuf"));
  const size_t es = dtype_size(dtype);
  return dispatch(CallRecord("alltoall", dtype, total_of(send_counts)),
                  {named(send, total_of(send_counts) * es, "sendbuf"),
                   named(recv, total_of(recv_counts) * es, "recvbuf")},
                  {}, [&](const ScheduleContext& ctx) {
                    return pairwise_alltoall(ctx, send, send_counts, recv, recv_counts, dtype);
                  });
}

Status Communicator::allreduce_spans(const std::vector<Span>& spans, DataType dtype, ReduceOp op,
                                     std::optional<WireFormat> wire, const std::vector<float*>* residuals,
                                     const std::vector<SpanScale>* scales) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_op(op));
  size_t total = 0;
  std::vector<NamedBuffer> buffers;
  buffers.reserve(2 * spans.size());
  const size_t es = dtype_size(dtype);
  for (const Span& s : spans) {
    KOLO_RETURN_IF_ERROR(check_buffer(s.send, s.count, "span send"));
    KOLO_RETURN_IF_ERROR(check_buffer(s.recv, s.count, "span recv"));
    buffers.push_back({s.send, s.count * es, "span send"});
    buffers.push_back({s.recv, s.count * es, "span recv"});
    total += s.count;
  }
  if (residuals && residuals->size() != spans.size()) {
    return invalid_argument("residuals: " + std::to_string(residuals->size()) + " arrays for " +
                            std::to_string(spans.size()) + " spans");
  }
  if (scales && scales->size() != spans.size()) {
    return invalid_argument("scales: " + std::to_string(scales->size()) + " for " + std::to_string(spans.size()) +
                            " spans");
  }
  WireFormat format;
  KOLO_RETURN_IF_ERROR(wire_for_buffers(wire, dtype, op, total * es, buffers, &format));
  return dispatch(CallRecord("allreduce", dtype, total, op), buffers, {}, [&](const ScheduleContext& ctx) {
    std::vector<Span> reduced = spans;
    if (scales) {
      for (size_t i = 0; i < reduced.size(); ++i) {
        Span& s = reduced[i];
        if ((*scales)[i].pre == 1) continue;
        ctx.memory->scale(dtype, s.recv, s.send, s.count, (*scales)[i].pre);
        s.send = s.recv;
      }
    }
    AllreduceArgs args{reduced, dtype, op};
    args.wire = format;
    args.residuals = format == WireFormat::kNative ? nullptr : residuals;
    KOLO_RETURN_IF_ERROR(kolo::allreduce(ctx, topology(), thresholds(), args));
    if (scales) {
      for (size_t i = 0; i < reduced.size(); ++i) {
        const Span& s = reduced[i];
        if ((*scales)[i].post != 1) ctx.memory->scale(dtype, s.recv, s.recv, s.count, (*scales)[i].post);
      }
    }
    return Status::ok();
  });
}

Status Communicator::run_custom(const char* what, const std::function<Status(const ScheduleContext&)>& fn) {
  return run(what, fn);
}


Status Communicator::reduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root,
                            const Launch& launch) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_op(op));
  KOLO_RETURN_IF_ERROR(check_root(root, world_.size));
  KOLO_RETURN_IF_ERROR(check_buffer(send, count, "sendbuf"));
  const size_t bytes = count * dtype_size(dtype);
  const bool is_root = world_.rank == root;
  if (is_root) {
    KOLO_RETURN_IF_ERROR(check_buffer(recv, count, "recvbuf"));
    if (send != recv && ranges_overlap(send, bytes, recv, bytes)) {
      return invalid_argument("sendbuf and recvbuf overlap without being equal");
    }
  }
  void* out = is_root ? recv : nullptr;
  return dispatch(CallRecord("reduce", dtype, count, op, root), {named(send, bytes, "sendbuf"), named(out, bytes, "recvbuf")}, launch,
                  [=](const ScheduleContext& ctx) {
                    return ring_reduce(ctx, send, out, count, dtype, op,
                                       root);
                  });
}

Status Communicator::gatherv(const void* send, size_t send_count, void* recv, const std::vector<size_t>& counts,
                             const std::vector<size_t>& displs_or_packed, DataType dtype, int root,
                             const Launch& launch) {
  std::vector<size_t> displs;
  size_t extent = 0;
  KOLO_RETURN_IF_ERROR(check_rooted_blocks({dtype, root, world_.rank, world_.size, counts, "recvcounts",
                                            displs_or_packed, send, send_count, "sendbuf", "sendcount", recv,
                                            "recvbuf"},
                                           &displs, &extent));
  const size_t es = dtype_size(dtype);
  const bool is_root = world_.rank == root;
  void* out = is_root ? recv : nullptr;
  return dispatch(CallRecord("gather", dtype, elements(counts), root), {named(send, send_count * es, "sendbuf"), named(out, extent * es, "recvbuf")},
                  launch,
                  [=](const ScheduleContext& ctx) {
                    return ring_gather_v(ctx, send, out, counts, displs, dtype, root);
                  });
}

Status Communicator::scatterv(const void* send, const std::vector<size_t>& counts,
                              const std::vector<size_t>& displs_or_packed, void* recv, size_t recv_count, DataType dtype,
                              int root, const Launch& launch) {
  std::vector<size_t> displs;
  size_t extent = 0;
  KOLO_RETURN_IF_ERROR(check_rooted_blocks({dtype, root, world_.rank, world_.size, counts, "sendcounts",
                                            displs_or_packed, recv, recv_count, "recvbuf", "recvcount", send,
                                            "sendbuf"},
                                           &displs, &extent));
  const size_t es = dtype_size(dtype);
  const bool is_root = world_.rank == root;
  const void* in = is_root ? send : nullptr;
  return dispatch(CallRecord("scatter", dtype, elements(counts), root), {named(in, extent * es, "sendbuf"), named(recv, recv_count * es, "recvbuf")},
                  launch,
                  [=](const ScheduleContext& ctx) {
                    return ring_scatter_v(ctx, in, recv, counts, displs, dtype, root);
                  });
}

Status Communicator::allgatherv(const void* send, size_t send_count, void* recv, const std::vector<size_t>& counts,
                                const std::vector<size_t>& displs_or_packed, DataType dtype, const Launch& launch) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_counts(counts, world_.size, "recvcounts"));
  if (counts[world_.rank] != send_count) {
    return invalid_argument("sendcount " + std::to_string(send_count) + " differs from recvcounts[" +
                            std::to_string(world_.rank) + "] = " + std::to_string(counts[world_.rank]));
  }
  KOLO_RETURN_IF_ERROR(check_buffer(send, send_count, "sendbuf"));
  const std::vector<size_t> displs = packed_or(displs_or_packed, counts);
  size_t extent = 0;
  KOLO_RETURN_IF_ERROR(check_blocks(counts, displs, world_.size, "displs", &extent));
  KOLO_RETURN_IF_ERROR(check_buffer(recv, extent, "recvbuf"));
  const size_t es = dtype_size(dtype);
  const void* own = static_cast<const char*>(recv) + displs[world_.rank] * es;
  if (send != own && ranges_overlap(send, send_count * es, recv, extent * es)) {
    return invalid_argument("sendbuf overlaps recvbuf but is not this rank's block of it");
  }
  return dispatch(CallRecord("allgatherv", dtype, elements(counts)),
                  {named(send, send_count * es, "sendbuf"), named(recv, extent * es, "recvbuf")}, launch,
                  [=](const ScheduleContext& ctx) {
                    return kolo::allgather(ctx, topology(), thresholds(),
                                           {send, recv, counts, displs, dtype});
                  });
}

Status Communicator::reduce_scatterv(const void* send, void* recv, const std::vector<size_t>& counts, DataType dtype,
                                     ReduceOp op, const Launch& launch) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_op(op));
  KOLO_RETURN_IF_ERROR(check_counts(counts, world_.size, "recvcounts"));
  const size_t total = total_of(counts);
  KOLO_RETURN_IF_ERROR(check_buffer(send, total, "sendbuf"));
  KOLO_RETURN_IF_ERROR(check_buffer(recv, counts[world_.rank], "recvbuf"));
  const size_t es = dtype_size(dtype);
  // Any overlap of recvbuf with sendbuf is fine: ring_reduce_scatter_v then
  // works through scratch.
  return dispatch(CallRecord("reduce_scatterv", dtype, elements(counts), op),
                  {named(send, total * es, "sendbuf"), named(recv, counts[world_.rank] * es, "recvbuf")}, launch,
                  [=](const ScheduleContext& ctx) {
                    return kolo::reduce_scatter(ctx, topology(), thresholds(),
                                                {send, recv, counts, dtype,
                                                 op});
                  });
}

Status Communicator::alltoallv(const void* send, const std::vector<size_t>& send_counts,
                               const std::vector<size_t>& send_displs_or_packed, void* recv,
                               const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs_or_packed,
                               DataType dtype, const Launch& launch) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_counts(send_counts, world_.size, "sendcounts"));
  KOLO_RETURN_IF_ERROR(check_counts(recv_counts, world_.size, "recvcounts"));
  const std::vector<size_t> sdispls = packed_or(send_displs_or_packed, send_counts);
  const std::vector<size_t> rdispls = packed_or(recv_displs_or_packed, recv_counts);
  size_t send_extent = 0, recv_extent = 0;
  // Send blocks may share elements (they are only read); receive blocks may not.
  KOLO_RETURN_IF_ERROR(check_blocks(std::vector<size_t>(world_.size, 0), sdispls, world_.size, "sdispls",
                                    &send_extent));
  for (int q = 0; q < world_.size; ++q) send_extent = std::max(send_extent, sdispls[q] + send_counts[q]);
  KOLO_RETURN_IF_ERROR(check_blocks(recv_counts, rdispls, world_.size, "rdispls", &recv_extent));
  if (send_counts[world_.rank] != recv_counts[world_.rank]) {
    return invalid_argument("sendcounts[" + std::to_string(world_.rank) + "] = " +
                            std::to_string(send_counts[world_.rank]) + " differs from recvcounts[" +
                            std::to_string(world_.rank) + "] = " + std::to_string(recv_counts[world_.rank]) +
                            " (this rank's block to itself)");
  }
  KOLO_RETURN_IF_ERROR(check_buffer(send, send_extent, "sendbuf"));
  KOLO_RETURN_IF_ERROR(check_buffer(recv, recv_extent, "recvbuf"));
  const size_t es = dtype_size(dtype);
  if (ranges_overlap(send, send_extent * es, recv, recv_extent * es)) {
    return invalid_argument("sendbuf and recvbuf overlap (alltoall is not in place)");
  }
  return dispatch(CallRecord("alltoallv", dtype),
                  {named(send, send_extent * es, "sendbuf"), named(recv, recv_extent * es, "recvbuf")}, launch,
                  [=](const ScheduleContext& ctx) {
                    if (!mesh_connected_) {
                      // First over the ring's connections, so that a rank
                      // whose neighbour runs another collective learns it
                      // (MISMATCH) instead of waiting to be connected.
                      KOLO_RETURN_IF_ERROR(ring_fingerprint_exchange(
                          ctx, fingerprint(CollectiveKind::kAlltoall, dtype, ReduceOp::kSum,
                                           0, 0)));
                    }
                    KOLO_RETURN_IF_ERROR(connect_mesh_once());
                    return pairwise_alltoall_displs(ctx, send, send_counts, sdispls, recv, recv_counts, rdispls,
                                                    dtype);
                  });
}

// Pairwise alltoall needs every pair connected; a world communicator has
// connected only its ring and recursive-doubling partners. The rest are
// connected here, lazily, on the first alltoall: every rank calls it, so
// both sides of each pair call Transport::connect, in any order (the
// accepting side's listener takes connections in the background), and
// already connected peers (a full-mesh sibling's) are no-ops. Lazily and
// not at creation, because a full mesh costs N-1 connections per rank
// (sockets or queue pairs) that jobs without alltoall never use. Bounded by
// KOLO_TIMEOUT_S like bring-up's; a failure is sticky like any other.
// Under call_mutex_.
Status Communicator::connect_mesh_once() {
  if (mesh_connected_) return Status::ok();
  KOLO_RETURN_IF_ERROR(connect_every_pair(config_, world_, wiring_.transport.get()));
  mesh_connected_ = true;
  return Status::ok();
}

Status Communicator::send(const void* buf, size_t count, DataType dtype, int peer) {
  return point_to_point({{PointToPoint::kSend, peer, const_cast<void*>(buf), count, dtype}});
}

Status Communicator::recv(void* buf, size_t count, DataType dtype, int peer) {
  return point_to_point({{PointToPoint::kRecv, peer, buf, count, dtype}});
}

Status Communicator::check_point_to_point(const PointToPoint& op) const {
  const bool sending = op.direction == PointToPoint::kSend;
  KOLO_RETURN_IF_ERROR(check_dtype(op.dtype));
  KOLO_RETURN_IF_ERROR(check_buffer(op.data, op.count, sending ? "send buffer" : "receive buffer"));
  if (op.peer < 0 || op.peer >= world_.size) {
    return invalid_argument(std::string(sending ? "send to" : "receive from") + " rank " + std::to_string(op.peer) +
                            ", which is not a rank of a communicator of " + std::to_string(world_.size));
  }
  return Status::ok();
}

Status Communicator::point_to_point(const std::vector<PointToPoint>& ops, const Launch& launch) {
  std::vector<NamedBuffer> buffers;
  std::vector<int> peers;  // to connect: every peer but this rank, once
  for (const PointToPoint& op : ops) {
    KOLO_RETURN_IF_ERROR(check_point_to_point(op));
    buffers.push_back({op.data, op.count * dtype_size(op.dtype),
                       op.direction == PointToPoint::kSend ? "send buffer" : "receive buffer"});
    if (op.peer != world_.rank && std::find(peers.begin(), peers.end(), op.peer) == peers.end()) {
      peers.push_back(op.peer);
    }
  }
  return dispatch("send/recv", buffers, launch, [this, ops, peers](const ScheduleContext& ctx) {
    // Connected on first use: both ranks of a pair post to each other, so
    // both connect; the listening side accepts in the background, so the
    // order of the peers does not matter. Through the host transport, which
    // the GPU transports send through.
    KOLO_RETURN_IF_ERROR(connect_peers(wiring_.transport.get(), peers, config_.timeout_s));
    return run_point_to_point(ctx, ops);
  });
}

Status Communicator::recv_any(void* buf, size_t count, DataType dtype, int* source, const Launch& launch) {
  if (source == nullptr) return invalid_argument("source output pointer is NULL");
  *source = -1;
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_buffer(buf, count, "receive buffer"));
  if (world_.size == 1) {
    return invalid_argument("a receive from any rank on a communicator of one rank: no other rank can send to it "
                            "(messages to itself are not taken)");
  }
  std::vector<int> cannot;
  AnySource* any = wiring_.transport->any_source();
  for (int peer = 0; peer < world_.size; ++peer) {
    if (peer != world_.rank && !(any && any->can_peek(peer))) cannot.push_back(peer);
  }
  if (!cannot.empty()) {
    return unsupported("a receive from any rank must see a message before receiving it, which the transport to "
                       "rank(s) " + rank_list(cannot, 16) + " cannot (this communicator's transports: " +
                       wiring_.transport->name() + "; RDMA moves nothing before the receiver names the buffer, TCP and "
                       "shared memory can: KOLO_TRANSPORT=tcp)");
  }
  const size_t bytes = count * dtype_size(dtype);
  {
    // Device memory: the GPU transports decide how each message crosses
    // (CUDA IPC is receiver-driven too), so they cannot be looked into.
    bool on_device = false;
    KOLO_RETURN_IF_ERROR(launcher_->classify({{buf, bytes, "receive buffer"}}, &on_device));
    if (on_device) return unsupported("a receive from any rank takes host buffers; recvbuf is device memory");
  }
  return dispatch(CallRecord("recv_any", dtype, count), {{buf, bytes, "receive buffer"}}, launch,
                  [this, buf, count, dtype, source](const ScheduleContext& ctx) {
                    return receive_from_any(ctx, buf, count, dtype, &any_source_, source);
                  });
}

}  // namespace kolo
