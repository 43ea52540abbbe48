// What kolo's TensorFlow kernels share (_ops_common.h): libkolo's functions
// found in the copy Python loaded, the table of process sets, TensorFlow's
// statuses and dtypes for kolo's, the asynchronous kernels' completion, and
// the functions the Python package calls through ctypes.
#include <dlfcn.h>

#include <cstdio>

#include "_ops_common.h"

namespace kolo_tf {

Api api;
std::atomic<bool> bound{false};
std::shared_mutex table_mutex;
std::unordered_map<int, ProcessSetEntry> process_sets;

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

}  // namespace kolo_tf

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

