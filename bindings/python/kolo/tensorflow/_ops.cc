// TensorFlow kernels for kolo's named operations (kolo.tensorflow).
//
// Each collective is an AsyncOpKernel: ComputeAsync checks its inputs,
// allocates what it can, submits the tensor to kolo's engine by name
// (kolo_submit_*) and returns at once; the engine calls back when every
// rank of the process set has submitted the same name and the operation
// has run. So a graph's collectives are in flight together, the engine
// negotiates and fuses them while TensorFlow goes on computing, and no step
// waits on Python. Inputs and outputs are used in place: an allreduce
// reduces straight into its output (the input's own buffer when TensorFlow
// lets the kernel forward it); only outputs whose size is known after
// negotiation (allgather, alltoall) are copied out of the engine's buffer.
//
// The engine's completion callback runs on the engine's thread. It calls
// TensorFlow's done callback there (TensorFlow then schedules the kernels
// that became ready on its own threads), except where an output must be
// copied out of the engine's buffer: that copy runs on TensorFlow's threads,
// so the engine's thread, which serves every rank, never spends long.
//
// libkolo is the copy the Python package loaded: kolo_tf_bind(path) finds
// its functions there (dlopen with RTLD_NOLOAD), so this library is not tied
// to one install of kolo. Communicators are looked up at run time by
// process set id in a table the Python package keeps current
// (kolo_tf_set_process_set), so a graph built before shutdown()/init() or
// before a process set was added runs on the communicators of the moment.
#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kolo.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace kolo_tf {
namespace tf = ::tensorflow;
using tf::AsyncOpKernel;
using tf::OpKernelConstruction;
using tf::OpKernelContext;
using tf::Tensor;
using tf::TensorShape;
using tf::shape_inference::InferenceContext;

// ---- libkolo, reached through the copy Python loaded ------------------------

#define KOLO_TF_API(X)                                                                                    \
  X(kolo_last_error) X(kolo_comm_rank) X(kolo_comm_size) X(kolo_comm_local_rank) X(kolo_comm_local_size) \
  X(kolo_submit_allreduce_wire) X(kolo_submit_grouped_allreduce_wire) X(kolo_submit_allgather)           \
  X(kolo_submit_broadcast) X(kolo_submit_reduce_scatter) X(kolo_submit_alltoall) X(kolo_submit_barrier)  \
  X(kolo_join) X(kolo_handle_set_callback) X(kolo_handle_output) X(kolo_handle_output_rows)              \
  X(kolo_handle_join_rank) X(kolo_handle_release)

struct Api {
#define KOLO_TF_FIELD(fn) decltype(&::fn) fn = nullptr;
  KOLO_TF_API(KOLO_TF_FIELD)
#undef KOLO_TF_FIELD
};
Api api;
std::atomic<bool> bound{false};

// ---- process set id -> this rank's communicator in it -----------------------

struct ProcessSetEntry {
  kolo_comm_t comm = nullptr;  // null: the set exists, this rank is not in it
  std::vector<int> world_ranks;  // its members' world ranks, in its rank order
};
std::shared_mutex table_mutex;
std::unordered_map<int, ProcessSetEntry> process_sets;

// A communicator held for the length of a submission: the table's lock is
// shared while held, so the Python package cannot forget (and then destroy)
// the communicator between the lookup and the submit call.
struct CommLease {
  std::shared_lock<std::shared_mutex> lock{table_mutex};
  kolo_comm_t comm = nullptr;
};

absl::Status lease(int process_set_id, CommLease* out) {
  if (!bound.load()) {
    return absl::FailedPreconditionError("kolo has not been initialized; call hvd.init() first");
  }
  auto it = process_sets.find(process_set_id);
  if (it == process_sets.end()) {
    if (process_set_id == 0) {
      return absl::FailedPreconditionError("kolo has not been initialized; call hvd.init() first");
    }
    return absl::InvalidArgumentError("process set " + std::to_string(process_set_id) +
                                      " does not exist (add it with hvd.add_process_set first)");
  }
  if (it->second.comm == nullptr) {
    return absl::InvalidArgumentError("this rank is not in process set " + std::to_string(process_set_id) +
                                      ": only its members may submit to it");
  }
  out->comm = it->second.comm;
  return absl::OkStatus();
}

// A failed kolo call as TensorFlow's error of the matching kind, with kolo's
// message (which names the operation, the tensor and the ranks involved).
// Horovod's kinds where Horovod has one: ranks that disagree are a
// FailedPrecondition, a lost peer or transport failure is Unknown.
absl::Status status_of(kolo_result_t code, const std::string& message) {
  switch (code) {
    case KOLO_SUCCESS: return absl::OkStatus();
    case KOLO_ERR_INVALID_ARGUMENT: return absl::InvalidArgumentError(message);
    case KOLO_ERR_INVALID_USAGE:
    case KOLO_ERR_MISMATCH: return absl::FailedPreconditionError(message);
    case KOLO_ERR_TIMEOUT: return absl::DeadlineExceededError(message);
    case KOLO_ERR_ABORTED: return absl::AbortedError(message);
    case KOLO_ERR_UNSUPPORTED: return absl::UnimplementedError(message);
    default: return absl::UnknownError(message);
  }
}

absl::Status last_status(kolo_result_t code) {
  const char* message = api.kolo_last_error();
  return status_of(code, message && *message ? message : "kolo call failed");
}

// ---- dtypes, shapes, names ----------------------------------------------------

// The kolo dtype that reduces a TensorFlow dtype, if any.
bool reduction_dtype(tf::DataType t, kolo_dtype_t* out) {
  switch (t) {
    case tf::DT_INT8: *out = KOLO_INT8; return true;
    case tf::DT_UINT8: *out = KOLO_UINT8; return true;
    case tf::DT_INT32: *out = KOLO_INT32; return true;
    case tf::DT_UINT32: *out = KOLO_UINT32; return true;
    case tf::DT_INT64: *out = KOLO_INT64; return true;
    case tf::DT_UINT64: *out = KOLO_UINT64; return true;
    case tf::DT_HALF: *out = KOLO_FLOAT16; return true;
    case tf::DT_BFLOAT16: *out = KOLO_BFLOAT16; return true;
    case tf::DT_FLOAT: *out = KOLO_FLOAT32; return true;
    case tf::DT_DOUBLE: *out = KOLO_FLOAT64; return true;
    default: return false;
  }
}

// Horovod's reduction numbering (hvd.Average = 0, Sum, Adasum, Min, Max,
// Product); Adasum is composed in Python and never reaches a kernel.
absl::Status reduction_op(int horovod_op, kolo_op_t* out) {
  switch (horovod_op) {
    case 0: *out = KOLO_AVG; return absl::OkStatus();
    case 1: *out = KOLO_SUM; return absl::OkStatus();
    case 3: *out = KOLO_MIN; return absl::OkStatus();
    case 4: *out = KOLO_MAX; return absl::OkStatus();
    case 5: *out = KOLO_PROD; return absl::OkStatus();
    default:
      return absl::InvalidArgumentError("unknown reduction op " + std::to_string(horovod_op) +
                                        "; use Average, Sum, Min, Max or Product");
  }
}

std::vector<int64_t> dims_of(const TensorShape& shape) {
  std::vector<int64_t> dims;
  for (int i = 0; i < shape.dims(); ++i) dims.push_back(shape.dim_size(i));
  return dims;
}

// How a tensor of any dtype moves (allgather, broadcast, alltoall): as the
// kolo dtype that has its elements where there is one (so ranks that give
// different dtypes are told so), else as its bytes, uint8 with one more
// dimension of the element size.
absl::Status movement_wire(const Tensor& t, std::vector<int64_t>* dims, kolo_dtype_t* dtype) {
  if (t.dtype() == tf::DT_STRING || t.dtype() == tf::DT_RESOURCE || t.dtype() == tf::DT_VARIANT) {
    return absl::InvalidArgumentError(std::string("kolo moves tensors of fixed-size elements, not ") +
                                      tf::DataTypeString(t.dtype()));
  }
  *dims = dims_of(t.shape());
  if (!reduction_dtype(t.dtype(), dtype)) {
    dims->push_back(tf::DataTypeSize(t.dtype()));
    *dtype = KOLO_UINT8;
  }
  return absl::OkStatus();
}

void* data_of(const Tensor& t) { return const_cast<char*>(t.tensor_data().data()); }

// Rows of part r when n rows are cut into `parts` (kolo_submit_reduce_scatter's split).
int64_t rows_for(int64_t n, int parts, int r) { return n / parts + (r < n % parts ? 1 : 0); }

// ---- the asynchronous kernels' common part ---------------------------------

// One kernel invocation in flight: its engine handles, and what to do once
// all of them have completed (on a TensorFlow worker thread).
struct Pending {
  OpKernelContext* ctx;
  AsyncOpKernel::DoneCallback done;
  std::vector<kolo_handle_t> handles;
  std::vector<kolo_result_t> results;
  std::vector<std::string> messages;
  std::atomic<int> remaining{0};
  std::function<absl::Status(Pending&)> finish;  // builds outputs after success; may be empty
  Tensor keep_alive;                             // a staging tensor the engine reads or writes

  ~Pending() {
    for (kolo_handle_t h : handles) api.kolo_handle_release(h);
  }
};

void complete(Pending* raw) {
  std::unique_ptr<Pending> p(raw);
  absl::Status status;
  for (size_t i = 0; i < p->results.size() && status.ok(); ++i) {
    if (p->results[i] != KOLO_SUCCESS) status = status_of(p->results[i], p->messages[i]);
  }
  if (status.ok() && p->finish) status = p->finish(*p);
  if (!status.ok()) p->ctx->SetStatus(status);
  AsyncOpKernel::DoneCallback done = std::move(p->done);
  p.reset();  // the handles go before TensorFlow may free the buffers
  done();
}

struct CallbackArg {
  Pending* pending;
  size_t index;  // the operation's number, in pending->results
};

void on_engine_completion(kolo_result_t result, void* user_data) {
  std::unique_ptr<CallbackArg> arg(static_cast<CallbackArg*>(user_data));
  Pending* p = arg->pending;
  p->results[arg->index] = result;
  if (result != KOLO_SUCCESS) {
    const char* message = api.kolo_last_error();
    p->messages[arg->index] = message && *message ? message : "kolo operation failed";
  }
  if (p->remaining.fetch_sub(1) != 1) return;
  if (p->finish) {
    // Outputs copied out of the engine's buffer (allgather, alltoall) are
    // copied on TensorFlow's threads, not the engine's, which serves every rank.
    p->ctx->device()->tensorflow_cpu_worker_threads()->workers->Schedule([p] { complete(p); });
  } else {
    // Nothing left but the status: done() right here. TensorFlow's executor,
    // called back from outside its threads, hands the kernels that became
    // ready to its own pool (it runs none inline here), and an eager caller
    // is only woken; a hop to TensorFlow's pool first would add a thread
    // wake-up to every collective (30-100 us each, measured on 2 cores).
    complete(p);
  }
}

// Submits n operations through submit(i, &handle) and arranges completion.
// On a submission error, the operations already submitted still complete
// (their buffers stay alive) and the kernel fails with the error.
void run(std::unique_ptr<Pending> p, size_t n,
         const std::function<kolo_result_t(size_t, kolo_handle_t*)>& submit, int process_set_id) {
  p->results.assign(n, KOLO_SUCCESS);
  p->messages.assign(n, "");
  p->remaining.store(static_cast<int>(n) + 1);  // +1: held until every submission is made
  Pending* raw = p.release();
  {
    CommLease comm;
    absl::Status leased = lease(process_set_id, &comm);
    for (size_t i = 0; i < n; ++i) {
      kolo_handle_t handle = nullptr;
      if (!leased.ok()) {  // no communicator: reported as kolo would (status_of maps it back)
        raw->results[i] = leased.code() == absl::StatusCode::kInvalidArgument ? KOLO_ERR_INVALID_ARGUMENT
                                                                               : KOLO_ERR_INVALID_USAGE;
        raw->messages[i] = std::string(leased.message());
        raw->remaining.fetch_sub(1);
        continue;
      }
      kolo_result_t code = submit(i, &handle);
      if (code != KOLO_SUCCESS) {
        const char* message = api.kolo_last_error();
        raw->results[i] = code;
        raw->messages[i] = message && *message ? message : "kolo submission failed";
        raw->remaining.fetch_sub(1);
        continue;
      }
      raw->handles.push_back(handle);
      api.kolo_handle_set_callback(handle, on_engine_completion, new CallbackArg{raw, i});
    }
  }  // the lease ends before completion, which may run TensorFlow's next kernels on this thread
  if (raw->remaining.fetch_sub(1) == 1) complete(raw);
}

// The engine name of a kernel: the tensor_name attr when Python set one
// (eager calls given a name), else the node's name (graph mode; in eager
// mode the op's type, which is safe there because eager kernels run one at
// a time), without its name scope when ignore_name_scope is set.
class KoloKernel : public AsyncOpKernel {
 public:
  explicit KoloKernel(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set_id_));
    std::string tensor_name;
    bool ignore_name_scope = false;
    if (c->HasAttr("tensor_name")) OP_REQUIRES_OK(c, c->GetAttr("tensor_name", &tensor_name));
    if (c->HasAttr("ignore_name_scope")) OP_REQUIRES_OK(c, c->GetAttr("ignore_name_scope", &ignore_name_scope));
    engine_name_ = tensor_name.empty() ? std::string(name()) : tensor_name;
    if (ignore_name_scope) {
      size_t slash = engine_name_.rfind('/');
      if (slash != std::string::npos) engine_name_ = engine_name_.substr(slash + 1);
    }
  }

 protected:
  void fail(OpKernelContext* ctx, const absl::Status& s, DoneCallback done) {
    ctx->SetStatus(s);
    done();
  }
  std::unique_ptr<Pending> pending(OpKernelContext* ctx, DoneCallback done) {
    auto p = std::make_unique<Pending>();
    p->ctx = ctx;
    p->done = std::move(done);
    return p;
  }
  int group_size(absl::Status* s) {
    CommLease comm;
    *s = lease(process_set_id_, &comm);
    int n = 0;
    if (s->ok()) {
      kolo_result_t code = api.kolo_comm_size(comm.comm, &n);
      if (code != KOLO_SUCCESS) *s = last_status(code);
    }
    return n;
  }
  int group_rank(absl::Status* s) {
    CommLease comm;
    *s = lease(process_set_id_, &comm);
    int r = 0;
    if (s->ok()) {
      kolo_result_t code = api.kolo_comm_rank(comm.comm, &r);
      if (code != KOLO_SUCCESS) *s = last_status(code);
    }
    return r;
  }
  // Submissions go through the leased communicator of the set.
  kolo_comm_t comm_now() {
    auto it = process_sets.find(process_set_id_);
    return it == process_sets.end() ? nullptr : it->second.comm;
  }

  int process_set_id_ = 0;
  std::string engine_name_;
};

class ReductionKernel : public KoloKernel {
 public:
  explicit ReductionKernel(OpKernelConstruction* c) : KoloKernel(c) {
    int op = 0;
    OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &op));
    OP_REQUIRES_OK(c, reduction_op(op, &op_));
    float pre = 1, post = 1;
    OP_REQUIRES_OK(c, c->GetAttr("prescale_factor", &pre));
    OP_REQUIRES_OK(c, c->GetAttr("postscale_factor", &post));
    prescale_ = pre;
    postscale_ = post;
    tf::DataType t;
    OP_REQUIRES_OK(c, c->GetAttr("T", &t));
    OP_REQUIRES(c, reduction_dtype(t, &dtype_),
                absl::InvalidArgumentError(std::string("kolo cannot reduce ") + tf::DataTypeString(t) + " tensors"));
    // The allreduces' wire format and error feedback (kolo.tensorflow's
    // compression=); reduce-scatter has neither.
    if (c->HasAttr("wire")) {
      int wire = -1;
      OP_REQUIRES_OK(c, c->GetAttr("wire", &wire));
      wire_ = static_cast<kolo_wire_format_t>(wire);
    }
    if (c->HasAttr("error_feedback")) OP_REQUIRES_OK(c, c->GetAttr("error_feedback", &error_feedback_));
  }

 protected:
  kolo_wire_format_t wire_ = KOLO_WIRE_DEFAULT;
  bool error_feedback_ = false;
  kolo_op_t op_ = KOLO_SUM;
  double prescale_ = 1, postscale_ = 1;
  kolo_dtype_t dtype_ = KOLO_FLOAT32;
};

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

// ---- shape functions ----------------------------------------------------------------

absl::Status same_shapes(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->input(i));
  return absl::OkStatus();
}

// Outputs like the inputs but with an unknown first dimension.
absl::Status first_dim_unknown(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs() && i < c->num_inputs(); ++i) {
    tf::shape_inference::ShapeHandle output;
    TF_RETURN_IF_ERROR(c->ReplaceDim(c->input(i), 0, c->UnknownDim(), &output));
    c->set_output(i, output);
  }
  return absl::OkStatus();
}

absl::Status alltoall_shapes(InferenceContext* c) {
  tf::shape_inference::ShapeHandle output;
  TF_RETURN_IF_ERROR(c->ReplaceDim(c->input(0), 0, c->UnknownDim(), &output));
  c->set_output(0, output);
  c->set_output(1, c->Vector(c->UnknownDim()));
  return absl::OkStatus();
}

absl::Status scalar_shape(InferenceContext* c) {
  c->set_output(0, c->Scalar());
  return absl::OkStatus();
}

}  // namespace kolo_tf

// ---- registration ----------------------------------------------------------------------

namespace tensorflow {
using kolo_tf::scalar_shape;

#define KOLO_TF_REDUCED_TYPES "{int8, uint8, int32, uint32, int64, uint64, half, bfloat16, float, double}"
#define KOLO_TF_COMMON_ATTRS                 \
  Attr("ignore_name_scope: bool = false")    \
      .Attr("process_set_id: int = 0")       \
      .Attr("tensor_name: string = ''")

REGISTER_OP("KoloAllreduce")
    .Attr("T: " KOLO_TF_REDUCED_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("wire: int = -1")  // kolo_wire_format_t; -1: the communicator's
    .Attr("error_feedback: bool = false")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensor: T")
    .Output("sum: T")
    .SetShapeFn(kolo_tf::same_shapes);
REGISTER_KERNEL_BUILDER(Name("KoloAllreduce").Device(DEVICE_CPU), kolo_tf::AllreduceOp);

REGISTER_OP("KoloGroupedAllreduce")
    .Attr("T: " KOLO_TF_REDUCED_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("wire: int = -1")
    .Attr("error_feedback: bool = false")
    .Attr("num_tensors: int >= 1")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensors: num_tensors * T")
    .Output("sum: num_tensors * T")
    .SetShapeFn(kolo_tf::same_shapes);
REGISTER_KERNEL_BUILDER(Name("KoloGroupedAllreduce").Device(DEVICE_CPU), kolo_tf::GroupedAllreduceOp);

REGISTER_OP("KoloAllgather")
    .Attr("T: type")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(kolo_tf::first_dim_unknown);
REGISTER_KERNEL_BUILDER(Name("KoloAllgather").Device(DEVICE_CPU), kolo_tf::AllgatherOp);

REGISTER_OP("KoloGroupedAllgather")
    .Attr("T: list(type)")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensors: T")
    .Output("outputs: T")
    .SetShapeFn(kolo_tf::first_dim_unknown);
REGISTER_KERNEL_BUILDER(Name("KoloGroupedAllgather").Device(DEVICE_CPU), kolo_tf::AllgatherOp);

REGISTER_OP("KoloBroadcast")
    .Attr("T: type")
    .Attr("root_rank: int")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(kolo_tf::same_shapes);
REGISTER_KERNEL_BUILDER(Name("KoloBroadcast").Device(DEVICE_CPU), kolo_tf::BroadcastOp);

REGISTER_OP("KoloGroupedBroadcast")
    .Attr("T: list(type)")
    .Attr("root_rank: int")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensors: T")
    .Output("outputs: T")
    .SetShapeFn(kolo_tf::same_shapes);
REGISTER_KERNEL_BUILDER(Name("KoloGroupedBroadcast").Device(DEVICE_CPU), kolo_tf::BroadcastOp);

REGISTER_OP("KoloReducescatter")
    .Attr("T: " KOLO_TF_REDUCED_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(kolo_tf::first_dim_unknown);
REGISTER_KERNEL_BUILDER(Name("KoloReducescatter").Device(DEVICE_CPU), kolo_tf::ReducescatterOp);

REGISTER_OP("KoloGroupedReducescatter")
    .Attr("T: " KOLO_TF_REDUCED_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("num_tensors: int >= 1")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensors: num_tensors * T")
    .Output("outputs: num_tensors * T")
    .SetShapeFn(kolo_tf::first_dim_unknown);
REGISTER_KERNEL_BUILDER(Name("KoloGroupedReducescatter").Device(DEVICE_CPU), kolo_tf::ReducescatterOp);

REGISTER_OP("KoloAlltoall")
    .Attr("T: type")
    .Attr("Tsplits: {int32, int64} = DT_INT32")
    .KOLO_TF_COMMON_ATTRS
    .Input("tensor: T")
    .Input("splits: Tsplits")
    .Output("output: T")
    .Output("received_splits: int32")
    .SetShapeFn(kolo_tf::alltoall_shapes);
REGISTER_KERNEL_BUILDER(Name("KoloAlltoall").Device(DEVICE_CPU), kolo_tf::AlltoallOp);

REGISTER_OP("KoloJoin")
    .Attr("process_set_id: int = 0")
    .Output("last_rank: int32")
    .SetIsStateful()
    .SetShapeFn(scalar_shape);
REGISTER_KERNEL_BUILDER(Name("KoloJoin").Device(DEVICE_CPU), kolo_tf::JoinOp);

REGISTER_OP("KoloBarrier")
    .KOLO_TF_COMMON_ATTRS
    .SetIsStateful()
    .SetShapeFn([](shape_inference::InferenceContext*) { return absl::OkStatus(); });
REGISTER_KERNEL_BUILDER(Name("KoloBarrier").Device(DEVICE_CPU), kolo_tf::BarrierOp);

#define KOLO_TF_VALUE_OP(op_name)                                                               \
  REGISTER_OP(op_name).Attr("process_set_id: int = 0").Output("value: int32").SetShapeFn(scalar_shape); \
  REGISTER_KERNEL_BUILDER(Name(op_name).Device(DEVICE_CPU).HostMemory("value"), kolo_tf::CommValueOp)
KOLO_TF_VALUE_OP("KoloSize");
KOLO_TF_VALUE_OP("KoloRank");
KOLO_TF_VALUE_OP("KoloLocalSize");
KOLO_TF_VALUE_OP("KoloLocalRank");
KOLO_TF_VALUE_OP("KoloProcessSetIncluded");
}  // namespace tensorflow

// ---- called by the Python package through ctypes ---------------------------------------

extern "C" {

// Finds kolo's functions in the libkolo at path, which the caller has
// loaded. Returns 0, or -1 with a message in error (error_bytes long).
__attribute__((visibility("default"))) int kolo_tf_bind(const char* path, char* error, size_t error_bytes) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) lib = dlopen(path, RTLD_NOW);
  if (lib == nullptr) {
    snprintf(error, error_bytes, "cannot open %s: %s", path, dlerror());
    return -1;
  }
  kolo_tf::Api api;
#define KOLO_TF_LOOKUP(fn)                                                              \
  api.fn = reinterpret_cast<decltype(api.fn)>(dlsym(lib, #fn));                         \
  if (api.fn == nullptr) {                                                              \
    snprintf(error, error_bytes, "%s has no %s: it is older than this kolo package", path, #fn); \
    return -1;                                                                          \
  }
  KOLO_TF_API(KOLO_TF_LOOKUP)
#undef KOLO_TF_LOOKUP
  std::unique_lock<std::shared_mutex> lock(kolo_tf::table_mutex);
  kolo_tf::api = api;
  kolo_tf::bound.store(true);
  return 0;
}

// Records this rank's communicator in process set id (null where the set
// exists without this rank) and the set's world ranks, in its rank order.
__attribute__((visibility("default"))) void kolo_tf_set_process_set(int id, void* comm, const int* world_ranks,
                                                                    int n) {
  std::unique_lock<std::shared_mutex> lock(kolo_tf::table_mutex);
  kolo_tf::ProcessSetEntry& entry = kolo_tf::process_sets[id];
  entry.comm = static_cast<kolo_comm_t>(comm);
  entry.world_ranks.assign(world_ranks, world_ranks + n);
}

// Forgets process set id (every set, id < 0). Returns once no kernel is
// submitting to its communicator, which the caller may then destroy.
__attribute__((visibility("default"))) void kolo_tf_forget_process_set(int id) {
  std::unique_lock<std::shared_mutex> lock(kolo_tf::table_mutex);
  if (id < 0) {
    kolo_tf::process_sets.clear();
  } else {
    kolo_tf::process_sets.erase(id);
  }
}
}
