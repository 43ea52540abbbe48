// kolo's TensorFlow kernels (kolo.tensorflow): what the kernels share. The
// kernels are _ops_kernels.cc, the ops they implement (attributes, shape
// functions) _ops_definitions.cc; _op_library.py compiles the three files
// into one library.
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
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kolo.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace kolo_tf {
namespace tf = ::tensorflow;
using tf::AsyncOpKernel;
using tf::OpKernelConstruction;
using tf::OpKernelContext;
using tf::Tensor;
using tf::TensorShape;

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
extern Api api;
extern std::atomic<bool> bound;  // kolo_tf_bind has filled `api`

// ---- process set id -> this rank's communicator in it -----------------------

struct ProcessSetEntry {
  kolo_comm_t comm = nullptr;  // null: the set exists, this rank is not in it
  std::vector<int> world_ranks;  // its members' world ranks, in its rank order
};
extern std::shared_mutex table_mutex;
extern std::unordered_map<int, ProcessSetEntry> process_sets;

// A communicator held for the length of a submission: the table's lock is
// shared while held, so the Python package cannot forget (and then destroy)
// the communicator between the lookup and the submit call.
struct CommLease {
  std::shared_lock<std::shared_mutex> lock{table_mutex};
  kolo_comm_t comm = nullptr;
};

absl::Status lease(int process_set_id, CommLease* out);

// A failed kolo call as TensorFlow's error of the matching kind, with kolo's
// message (which names the operation, the tensor and the ranks involved).
// Horovod's kinds where Horovod has one: ranks that disagree are a
// FailedPrecondition, a lost peer or transport failure is Unknown.
absl::Status status_of(kolo_result_t code, const std::string& message);

absl::Status last_status(kolo_result_t code);

// ---- dtypes, shapes, names ----------------------------------------------------

// The kolo dtype that reduces a TensorFlow dtype, if any.
bool reduction_dtype(tf::DataType t, kolo_dtype_t* out);

// Horovod's reduction numbering (hvd.Average = 0, Sum, Adasum, Min, Max,
// Product); Adasum is composed in Python and never reaches a kernel.
absl::Status reduction_op(int horovod_op, kolo_op_t* out);

std::vector<int64_t> dims_of(const TensorShape& shape);

// How a tensor of any dtype moves (allgather, broadcast, alltoall): as the
// kolo dtype that has its elements where there is one (so ranks that give
// different dtypes are told so), else as its bytes, uint8 with one more
// dimension of the element size.
absl::Status movement_wire(const Tensor& t, std::vector<int64_t>* dims, kolo_dtype_t* dtype);

void* data_of(const Tensor& t);

// Rows of part r when n rows are cut into `parts` (kolo_submit_reduce_scatter's split).
int64_t rows_for(int64_t n, int parts, int r);

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

// Submits n operations through submit(i, &handle) and arranges completion.
// On a submission error, the operations already submitted still complete
// (their buffers stay alive) and the kernel fails with the error.
void run(std::unique_ptr<Pending> p, size_t n,
         const std::function<kolo_result_t(size_t, kolo_handle_t*)>& submit, int process_set_id);

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

}  // namespace kolo_tf
