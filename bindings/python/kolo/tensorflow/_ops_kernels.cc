// kolo's TensorFlow kernels: each collective an AsyncOpKernel over kolo's
// engine (_ops_common.h says how they submit and complete), rank and size
// read when the graph runs, and each registered for its op
// (_ops_definitions.cc defines the ops).
#include <cstring>

#include "_ops_common.h"
#include "tensorflow/core/framework/op.h"

namespace kolo_tf {

// ---- allreduce ----------------------------------------------------------------

class AllreduceOp : public ReductionKernel {
 public:
  using ReductionKernel::ReductionKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& input = ctx->input(0);
    Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({0}, 0, input.shape(), &output), done);
    auto dims = std::make_shared<std::vector<int64_t>>(dims_of(input.shape()));
    void* send = data_of(input);
    void* recv = data_of(*output);
    auto p = pending(ctx, std::move(done));
    run(std::move(p), 1, [=](size_t, kolo_handle_t* h) {
      return api.kolo_submit_allreduce_wire(comm_now(), engine_name_.c_str(), send, recv, int(dims->size()),
                                            dims->data(), dtype_, op_, prescale_, postscale_, wire_,
                                            error_feedback_ ? 1 : 0, h);
    }, process_set_id_);
  }
};

class GroupedAllreduceOp : public ReductionKernel {
 public:
  using ReductionKernel::ReductionKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const int n = ctx->num_inputs();
    auto sends = std::make_shared<std::vector<const void*>>();
    auto recvs = std::make_shared<std::vector<void*>>();
    auto dims = std::make_shared<std::vector<std::vector<int64_t>>>();
    for (int i = 0; i < n; ++i) {
      const Tensor& input = ctx->input(i);
      Tensor* output = nullptr;
      OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({i}, i, input.shape(), &output), done);
      sends->push_back(data_of(input));
      recvs->push_back(data_of(*output));
      dims->push_back(dims_of(input.shape()));
    }
    auto ndims = std::make_shared<std::vector<int>>();
    auto shapes = std::make_shared<std::vector<const int64_t*>>();
    for (auto& d : *dims) {
      ndims->push_back(int(d.size()));
      shapes->push_back(d.data());
    }
    if (n == 0) {
      done();
      return;
    }
    run(pending(ctx, std::move(done)), 1, [=](size_t, kolo_handle_t* h) {
      return api.kolo_submit_grouped_allreduce_wire(comm_now(), engine_name_.c_str(), n, sends->data(),
                                                    recvs->data(), ndims->data(), shapes->data(), dtype_, op_,
                                                    prescale_, postscale_, wire_, error_feedback_ ? 1 : 0, h);
    }, process_set_id_);
  }
};

// ---- allgather ------------------------------------------------------------------

// The engine-owned output of an allgather or alltoall copied into a new
// output tensor: rows[r] rows of the input's row shape from each rank.
absl::Status copy_gathered(OpKernelContext* ctx, int output_index, kolo_handle_t handle, const Tensor& input,
                           int group_size, std::vector<int64_t>* rows_out) {
  std::vector<int64_t> rows(group_size);
  kolo_result_t code = api.kolo_handle_output_rows(handle, rows.data(), group_size);
  if (code != KOLO_SUCCESS) return last_status(code);
  int64_t total = 0;
  for (int64_t r : rows) total += r;
  TensorShape shape = input.shape();
  TF_RETURN_IF_ERROR(shape.SetDimWithStatus(0, total));
  Tensor* output = nullptr;
  TF_RETURN_IF_ERROR(ctx->allocate_output(output_index, shape, &output));
  const void* data = nullptr;
  size_t bytes = 0;
  code = api.kolo_handle_output(handle, &data, &bytes);
  if (code != KOLO_SUCCESS) return last_status(code);
  if (bytes != output->TotalBytes()) {
    return absl::InternalError("kolo: the engine's output has " + std::to_string(bytes) + " bytes where " +
                               std::to_string(output->TotalBytes()) + " were expected");
  }
  if (bytes) std::memcpy(data_of(*output), data, bytes);
  if (rows_out) *rows_out = std::move(rows);
  return absl::OkStatus();
}

class AllgatherOp : public KoloKernel {
 public:
  using KoloKernel::KoloKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const int n = ctx->num_inputs();
    absl::Status s;
    int size = group_size(&s);
    OP_REQUIRES_OK_ASYNC(ctx, s, done);
    auto wires = std::make_shared<std::vector<std::vector<int64_t>>>(n);
    auto dtypes = std::make_shared<std::vector<kolo_dtype_t>>(n);
    for (int i = 0; i < n; ++i) {
      OP_REQUIRES_ASYNC(ctx, ctx->input(i).dims() >= 1,
                        absl::InvalidArgumentError("allgather needs a tensor with at least one dimension, got a "
                                                   "scalar (input " + std::to_string(i) + ")"),
                        done);
      OP_REQUIRES_OK_ASYNC(ctx, movement_wire(ctx->input(i), &(*wires)[i], &(*dtypes)[i]), done);
    }
    if (n == 0) {
      done();
      return;
    }
    auto p = pending(ctx, std::move(done));
    p->finish = [n, size](Pending& q) {
      for (int i = 0; i < n; ++i) {
        TF_RETURN_IF_ERROR(copy_gathered(q.ctx, i, q.handles[i], q.ctx->input(i), size, nullptr));
      }
      return absl::OkStatus();
    };
    // One tensor is named as the node; a grouped one's parts NAME.0, NAME.1...
    const bool grouped = type_string() == "KoloGroupedAllgather";
    run(std::move(p), n, [=](size_t i, kolo_handle_t* h) {
      std::string name = grouped ? engine_name_ + "." + std::to_string(i) : engine_name_;
      const std::vector<int64_t>& d = (*wires)[i];
      return api.kolo_submit_allgather(comm_now(), name.c_str(), data_of(ctx->input(int(i))), int(d.size()),
                                       d.data(), (*dtypes)[i], h);
    }, process_set_id_);
  }
};

// ---- broadcast -------------------------------------------------------------------

class BroadcastOp : public KoloKernel {
 public:
  explicit BroadcastOp(OpKernelConstruction* c) : KoloKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root_rank_));
  }
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    // The root is a world rank (Horovod's rule); the engine takes the set's rank.
    absl::Status s;
    int root = group_root(&s);
    OP_REQUIRES_OK_ASYNC(ctx, s, done);
    const int n = ctx->num_inputs();
    auto wires = std::make_shared<std::vector<std::vector<int64_t>>>(n);
    auto dtypes = std::make_shared<std::vector<kolo_dtype_t>>(n);
    auto bufs = std::make_shared<std::vector<void*>>();
    for (int i = 0; i < n; ++i) {
      const Tensor& input = ctx->input(i);
      OP_REQUIRES_OK_ASYNC(ctx, movement_wire(input, &(*wires)[i], &(*dtypes)[i]), done);
      Tensor* output = nullptr;
      OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({i}, i, input.shape(), &output), done);
      if (data_of(*output) != data_of(input) && input.TotalBytes()) {
        std::memcpy(data_of(*output), data_of(input), input.TotalBytes());
      }
      bufs->push_back(data_of(*output));
    }
    if (n == 0) {
      done();
      return;
    }
    const bool grouped = type_string() == "KoloGroupedBroadcast";
    run(pending(ctx, std::move(done)), n, [=](size_t i, kolo_handle_t* h) {
      std::string name = grouped ? engine_name_ + "." + std::to_string(i) : engine_name_;
      const std::vector<int64_t>& d = (*wires)[i];
      return api.kolo_submit_broadcast(comm_now(), name.c_str(), (*bufs)[i], int(d.size()), d.data(), (*dtypes)[i],
                                       root, h);
    }, process_set_id_);
  }

 private:
  int group_root(absl::Status* s) {
    std::vector<int> members;
    {
      std::shared_lock<std::shared_mutex> lock(table_mutex);
      auto it = process_sets.find(process_set_id_);
      if (it != process_sets.end()) members = it->second.world_ranks;
    }
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i] == root_rank_) return int(i);
    }
    *s = absl::InvalidArgumentError("broadcast root_rank " + std::to_string(root_rank_) + " is not a rank of " +
                                    (process_set_id_ == 0 ? std::string("the job")
                                                          : "process set " + std::to_string(process_set_id_)));
    return 0;
  }

  int root_rank_ = 0;
};

// ---- reduce-scatter ------------------------------------------------------------

class ReducescatterOp : public ReductionKernel {
 public:
  using ReductionKernel::ReductionKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const int n = ctx->num_inputs();
    absl::Status s;
    int size = group_size(&s);
    OP_REQUIRES_OK_ASYNC(ctx, s, done);
    int rank = group_rank(&s);
    OP_REQUIRES_OK_ASYNC(ctx, s, done);
    auto dims = std::make_shared<std::vector<std::vector<int64_t>>>();
    auto recvs = std::make_shared<std::vector<void*>>();
    for (int i = 0; i < n; ++i) {
      const Tensor& input = ctx->input(i);
      OP_REQUIRES_ASYNC(ctx, input.dims() >= 1,
                        absl::InvalidArgumentError("reducescatter needs a tensor with at least one dimension, "
                                                   "got a scalar"),
                        done);
      TensorShape shape = input.shape();
      OP_REQUIRES_OK_ASYNC(ctx, shape.SetDimWithStatus(0, rows_for(input.dim_size(0), size, rank)), done);
      Tensor* output = nullptr;
      OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(i, shape, &output), done);
      dims->push_back(dims_of(input.shape()));
      recvs->push_back(data_of(*output));
    }
    if (n == 0) {
      done();
      return;
    }
    const bool grouped = type_string() == "KoloGroupedReducescatter";
    run(pending(ctx, std::move(done)), n, [=](size_t i, kolo_handle_t* h) {
      std::string name = grouped ? engine_name_ + "." + std::to_string(i) : engine_name_;
      const std::vector<int64_t>& d = (*dims)[i];
      return api.kolo_submit_reduce_scatter(comm_now(), name.c_str(), data_of(ctx->input(int(i))), (*recvs)[i],
                                            int(d.size()), d.data(), dtype_, op_, prescale_, postscale_, h);
    }, process_set_id_);
  }
};

// ---- alltoall -------------------------------------------------------------------

class AlltoallOp : public KoloKernel {
 public:
  using KoloKernel::KoloKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& input = ctx->input(0);
    const Tensor& splits = ctx->input(1);
    absl::Status s;
    int size = group_size(&s);
    OP_REQUIRES_OK_ASYNC(ctx, s, done);
    OP_REQUIRES_ASYNC(ctx, input.dims() >= 1,
                      absl::InvalidArgumentError("alltoall needs a tensor with at least one dimension, got a scalar"),
                      done);
    auto wire = std::make_shared<std::vector<int64_t>>();
    kolo_dtype_t dtype;
    OP_REQUIRES_OK_ASYNC(ctx, movement_wire(input, wire.get(), &dtype), done);
    auto split_values = std::make_shared<std::vector<int64_t>>();
    if (splits.NumElements() > 0) {
      OP_REQUIRES_ASYNC(ctx, splits.dims() == 1 && splits.NumElements() == size,
                        absl::InvalidArgumentError("alltoall splits must be a vector with one entry per rank (" +
                                                   std::to_string(size) + "), got shape " +
                                                   splits.shape().DebugString()),
                        done);
      int64_t total = 0;
      for (int64_t i = 0; i < size; ++i) {
        int64_t v = splits.dtype() == tf::DT_INT32 ? splits.flat<int32_t>()(i) : splits.flat<int64_t>()(i);
        OP_REQUIRES_ASYNC(ctx, v >= 0, absl::InvalidArgumentError("alltoall splits must not be negative"), done);
        split_values->push_back(v);
        total += v;
      }
      OP_REQUIRES_ASYNC(ctx, total == input.dim_size(0),
                        absl::InvalidArgumentError("alltoall splits add up to " + std::to_string(total) +
                                                   " rows but the tensor has " +
                                                   std::to_string(input.dim_size(0))),
                        done);
    } else {
      OP_REQUIRES_ASYNC(ctx, input.dim_size(0) % size == 0,
                        absl::InvalidArgumentError("alltoall without splits needs a first dimension divisible by "
                                                   "the number of ranks (" + std::to_string(size) + "), got " +
                                                   std::to_string(input.dim_size(0))),
                        done);
    }
    auto p = pending(ctx, std::move(done));
    p->finish = [size](Pending& q) {
      std::vector<int64_t> rows;
      TF_RETURN_IF_ERROR(copy_gathered(q.ctx, 0, q.handles[0], q.ctx->input(0), size, &rows));
      Tensor* received = nullptr;
      TF_RETURN_IF_ERROR(q.ctx->allocate_output(1, TensorShape({size}), &received));
      for (int r = 0; r < size; ++r) received->flat<int32_t>()(r) = static_cast<int32_t>(rows[r]);
      return absl::OkStatus();
    };
    void* send = data_of(input);
    run(std::move(p), 1, [=](size_t, kolo_handle_t* h) {
      return api.kolo_submit_alltoall(comm_now(), engine_name_.c_str(), send, int(wire->size()), wire->data(),
                                      split_values->empty() ? nullptr : split_values->data(), dtype, h);
    }, process_set_id_);
  }
};

// ---- join, barrier --------------------------------------------------------------

class JoinOp : public KoloKernel {
 public:
  using KoloKernel::KoloKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(0, TensorShape({}), &output), done);
    auto p = pending(ctx, std::move(done));
    p->finish = [](Pending& q) {
      int last = -1;
      kolo_result_t code = api.kolo_handle_join_rank(q.handles[0], &last);
      if (code != KOLO_SUCCESS) return last_status(code);
      q.ctx->mutable_output(0)->scalar<int32_t>()() = last;
      return absl::OkStatus();
    };
    run(std::move(p), 1, [=](size_t, kolo_handle_t* h) { return api.kolo_join(comm_now(), h); }, process_set_id_);
  }
};

class BarrierOp : public KoloKernel {
 public:
  using KoloKernel::KoloKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    run(pending(ctx, std::move(done)), 1, [=](size_t, kolo_handle_t* h) {
      return api.kolo_submit_barrier(comm_now(), engine_name_.c_str(), h);
    }, process_set_id_);
  }
};

// ---- rank and size, read when the graph runs --------------------------------------

class CommValueOp : public tf::OpKernel {
 public:
  explicit CommValueOp(OpKernelConstruction* c) : OpKernel(c) {
    if (c->HasAttr("process_set_id")) OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set_id_));
  }
  void Compute(OpKernelContext* ctx) override {
    Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &output));
    const std::string& kind = type_string();
    if (kind == "KoloProcessSetIncluded") {
      // 1 or 0; Horovod's error codes where kolo is not initialized (-1) or the set is unknown (-2).
      std::shared_lock<std::shared_mutex> lock(table_mutex);
      int value;
      if (!bound.load() || process_sets.find(0) == process_sets.end()) {
        value = -1;
      } else {
        auto it = process_sets.find(process_set_id_);
        value = it == process_sets.end() ? -2 : (it->second.comm != nullptr ? 1 : 0);
      }
      output->scalar<int32_t>()() = value;
      return;
    }
    if (kind == "KoloSize") {
      // Any set's size, on every rank: members or not (Horovod's).
      std::shared_lock<std::shared_mutex> lock(table_mutex);
      auto it = process_sets.find(process_set_id_);
      OP_REQUIRES(ctx, bound.load() && it != process_sets.end(),
                  process_set_id_ == 0 || !bound.load()
                      ? absl::FailedPreconditionError("kolo has not been initialized; call hvd.init() first")
                      : absl::InvalidArgumentError("process set " + std::to_string(process_set_id_) +
                                                   " does not exist"));
      output->scalar<int32_t>()() = static_cast<int32_t>(it->second.world_ranks.size());
      return;
    }
    CommLease comm;
    OP_REQUIRES_OK(ctx, lease(0, &comm));
    int value = 0;
    kolo_result_t code = KOLO_SUCCESS;
    if (kind == "KoloRank") code = api.kolo_comm_rank(comm.comm, &value);
    if (kind == "KoloLocalSize") code = api.kolo_comm_local_size(comm.comm, &value);
    if (kind == "KoloLocalRank") code = api.kolo_comm_local_rank(comm.comm, &value);
    OP_REQUIRES(ctx, code == KOLO_SUCCESS, last_status(code));
    output->scalar<int32_t>()() = value;
  }

 private:
  int process_set_id_ = 0;
};

}  // namespace kolo_tf

namespace tensorflow {

REGISTER_KERNEL_BUILDER(Name("KoloAllreduce").Device(DEVICE_CPU), kolo_tf::AllreduceOp);
REGISTER_KERNEL_BUILDER(Name("KoloGroupedAllreduce").Device(DEVICE_CPU), kolo_tf::GroupedAllreduceOp);
REGISTER_KERNEL_BUILDER(Name("KoloAllgather").Device(DEVICE_CPU), kolo_tf::AllgatherOp);
REGISTER_KERNEL_BUILDER(Name("KoloGroupedAllgather").Device(DEVICE_CPU), kolo_tf::AllgatherOp);
REGISTER_KERNEL_BUILDER(Name("KoloBroadcast").Device(DEVICE_CPU), kolo_tf::BroadcastOp);
REGISTER_KERNEL_BUILDER(Name("KoloGroupedBroadcast").Device(DEVICE_CPU), kolo_tf::BroadcastOp);
REGISTER_KERNEL_BUILDER(Name("KoloReducescatter").Device(DEVICE_CPU), kolo_tf::ReducescatterOp);
REGISTER_KERNEL_BUILDER(Name("KoloGroupedReducescatter").Device(DEVICE_CPU), kolo_tf::ReducescatterOp);
REGISTER_KERNEL_BUILDER(Name("KoloAlltoall").Device(DEVICE_CPU), kolo_tf::AlltoallOp);
REGISTER_KERNEL_BUILDER(Name("KoloJoin").Device(DEVICE_CPU), kolo_tf::JoinOp);
REGISTER_KERNEL_BUILDER(Name("KoloBarrier").Device(DEVICE_CPU), kolo_tf::BarrierOp);
#define KOLO_TF_VALUE_KERNEL(op_name) \
  REGISTER_KERNEL_BUILDER(Name(op_name).Device(DEVICE_CPU).HostMemory("value"), kolo_tf::CommValueOp)
KOLO_TF_VALUE_KERNEL("KoloSize");
KOLO_TF_VALUE_KERNEL("KoloRank");
KOLO_TF_VALUE_KERNEL("KoloLocalSize");
KOLO_TF_VALUE_KERNEL("KoloLocalRank");
KOLO_TF_VALUE_KERNEL("KoloProcessSetIncluded");
#undef KOLO_TF_VALUE_KERNEL

}  // namespace tensorflow
