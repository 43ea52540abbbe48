// kolo's collectives as XLA FFI handlers, for kolo.jax (compiled on first
// import against the installed jaxlib's FFI headers, see _build.py).
//
// Each handler calls kolo's C API on the buffers XLA hands it, in place
// where the output is the input's buffer: the blocking calls on the CPU,
// the _stream calls on XLA's CUDA stream on a GPU (kolo_jax_<name>_cuda). Every handler takes and
// returns an ordering token: kolo.jax threads one through every collective
// of a program (JAX's ordered effects), so that XLA runs them in program
// order on every rank. The communicator is looked up by process set id in
// a table Python keeps (kolo_jax_set_process_set), so that a compiled
// function never holds a communicator that has since been destroyed: a
// collective of a set that is gone fails with an error naming it.
//
// libkolo's functions are the ones the Python package loaded
// (kolo_jax_bind dlopens that file), so one copy of kolo serves both.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kolo.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

struct Api {
  decltype(&kolo_allreduce) allreduce = nullptr;
  decltype(&kolo_allreduce_many) allreduce_many = nullptr;
  decltype(&kolo_allgather) allgather = nullptr;
  decltype(&kolo_broadcast) broadcast = nullptr;
  decltype(&kolo_reduce_scatter) reduce_scatter = nullptr;
  decltype(&kolo_alltoall) alltoall = nullptr;
  decltype(&kolo_barrier) barrier = nullptr;
  decltype(&kolo_allreduce_stream) allreduce_stream = nullptr;
  decltype(&kolo_allreduce_many_stream) allreduce_many_stream = nullptr;
  decltype(&kolo_allgather_stream) allgather_stream = nullptr;
  decltype(&kolo_broadcast_stream) broadcast_stream = nullptr;
  decltype(&kolo_reduce_scatter_stream) reduce_scatter_stream = nullptr;
  decltype(&kolo_alltoall_stream) alltoall_stream = nullptr;
  decltype(&kolo_last_error) last_error = nullptr;
  decltype(&kolo_result_string) result_string = nullptr;
};
Api api;

std::mutex table_mutex;
std::unordered_map<int32_t, kolo_comm_t>& table() {
  static auto* sets = new std::unordered_map<int32_t, kolo_comm_t>();
  return *sets;
}

// The communicator of a process set, or an error naming the set.
ffi::Error comm_of(int32_t process_set, kolo_comm_t* comm) {
  std::lock_guard<std::mutex> lock(table_mutex);
  auto it = table().find(process_set);
  if (it == table().end() || it->second == nullptr) {
    return ffi::Error::InvalidArgument(
        process_set == 0 ? "kolo.jax: kolo is not initialized (call kolo.jax.init() first)"
                         : "kolo.jax: process set " + std::to_string(process_set) +
                               " is not registered on this rank (removed, or kolo shut down)");
  }
  *comm = it->second;
  return ffi::Error::Success();
}

bool dtype_of(ffi::DataType type, kolo_dtype_t* out) {
  switch (type) {
    case ffi::DataType::S8: *out = KOLO_INT8; return true;
    case ffi::DataType::U8: *out = KOLO_UINT8; return true;
    case ffi::DataType::S32: *out = KOLO_INT32; return true;
    case ffi::DataType::U32: *out = KOLO_UINT32; return true;
    case ffi::DataType::S64: *out = KOLO_INT64; return true;
    case ffi::DataType::U64: *out = KOLO_UINT64; return true;
    case ffi::DataType::F16: *out = KOLO_FLOAT16; return true;
    case ffi::DataType::BF16: *out = KOLO_BFLOAT16; return true;
    case ffi::DataType::F32: *out = KOLO_FLOAT32; return true;
    case ffi::DataType::F64: *out = KOLO_FLOAT64; return true;
    default: return false;
  }
}

ffi::Error checked_dtype(ffi::AnyBuffer x, kolo_dtype_t* out) {
  if (dtype_of(x.element_type(), out)) return ffi::Error::Success();
  return ffi::Error::InvalidArgument("kolo.jax: XLA dtype " + std::to_string(static_cast<int>(x.element_type())) +
                                     " is not one kolo moves");
}

ffi::Error result(kolo_result_t r, const char* what) {
  if (r == KOLO_SUCCESS) return ffi::Error::Success();
  const char* detail = api.last_error != nullptr ? api.last_error() : nullptr;
  return ffi::Error::Internal(std::string("kolo.jax ") + what + ": " + api.result_string(r) +
                              (detail != nullptr && *detail != '\0' ? std::string(": ") + detail : ""));
}

#define KOLO_JAX_RETURN_IF_ERROR(expr)   \
  do {                                   \
    ffi::Error e_ = (expr);              \
    if (e_.failure()) return e_;         \
  } while (0)

// What every handler of an array needs: the set's communicator and x's kolo dtype.
ffi::Error prepare(int32_t process_set, ffi::AnyBuffer x, kolo_comm_t* comm, kolo_dtype_t* dtype) {
  KOLO_JAX_RETURN_IF_ERROR(comm_of(process_set, comm));
  return checked_dtype(x, dtype);
}

// Where a handler runs: on the CPU, kolo's blocking calls; on a GPU, its
// _stream calls on the CUDA stream XLA runs the program on (each returns
// at once and the stream's later work waits for the collective, as for
// NCCL's calls inside XLA). The handlers below are written once for both:
// a GPU handler is the same function with the stream as its last argument.
struct Place {
  bool gpu = false;
  void* stream = nullptr;
};
Place place_of() { return {}; }
Place place_of(void* stream) { return {true, stream}; }

template <typename... Stream>
ffi::Error Allreduce(ffi::AnyBuffer x, ffi::Token, ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::Token>,
                     int32_t process_set, int32_t op, Stream... stream) {
  const Place at = place_of(stream...);
  kolo_comm_t comm;
  kolo_dtype_t dtype;
  KOLO_JAX_RETURN_IF_ERROR(prepare(process_set, x, &comm, &dtype));
  const auto kop = static_cast<kolo_op_t>(op);
  return result(at.gpu ? api.allreduce_stream(comm, x.untyped_data(), y->untyped_data(), x.element_count(), dtype,
                                              kop, at.stream)
                       : api.allreduce(comm, x.untyped_data(), y->untyped_data(), x.element_count(), dtype, kop),
                "allreduce");
}

// Several arrays of one dtype in one allreduce, each where it lies (each
// output aliased to its input by the lowering); the ordering token is the
// last argument and the last result.
template <typename... Stream>
ffi::Error AllreduceMany(ffi::RemainingArgs xs, ffi::RemainingRets ys, int32_t process_set, int32_t op,
                         Stream... stream) {
  const Place at = place_of(stream...);
  kolo_comm_t comm;
  KOLO_JAX_RETURN_IF_ERROR(comm_of(process_set, &comm));
  const size_t n = xs.size() - 1;
  std::vector<const void*> sends(n);
  std::vector<void*> recvs(n);
  std::vector<size_t> counts(n);
  kolo_dtype_t dtype = KOLO_FLOAT32;
  for (size_t i = 0; i < n; ++i) {
    auto x = xs.get<ffi::AnyBuffer>(i);
    auto y = ys.get<ffi::AnyBuffer>(i);
    if (x.has_error()) return x.error();
    if (y.has_error()) return y.error();
    kolo_dtype_t d;
    KOLO_JAX_RETURN_IF_ERROR(checked_dtype(*x, &d));
    if (i > 0 && d != dtype) {
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "kolo: arrays of one allreduce must share a dtype");
    }
    dtype = d;
    sends[i] = x->untyped_data();
    recvs[i] = (*y)->untyped_data();
    counts[i] = x->element_count();
  }
  const auto kop = static_cast<kolo_op_t>(op);
  return result(at.gpu ? api.allreduce_many_stream(comm, sends.data(), recvs.data(), counts.data(), n, dtype, kop,
                                                   at.stream)
                       : api.allreduce_many(comm, sends.data(), recvs.data(), counts.data(), n, dtype, kop),
                "allreduce");
}

template <typename... Stream>
ffi::Error Allgather(ffi::AnyBuffer x, ffi::Token, ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::Token>,
                     int32_t process_set, Stream... stream) {
  const Place at = place_of(stream...);
  kolo_comm_t comm;
  kolo_dtype_t dtype;
  KOLO_JAX_RETURN_IF_ERROR(prepare(process_set, x, &comm, &dtype));
  return result(at.gpu ? api.allgather_stream(comm, x.untyped_data(), y->untyped_data(), x.element_count(), dtype,
                                              at.stream)
                       : api.allgather(comm, x.untyped_data(), y->untyped_data(), x.element_count(), dtype),
                "allgather");
}

template <typename... Stream>
ffi::Error Broadcast(ffi::AnyBuffer x, ffi::Token, ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::Token>,
                     int32_t process_set, int32_t root, Stream... stream) {
  const Place at = place_of(stream...);
  kolo_comm_t comm;
  kolo_dtype_t dtype;
  KOLO_JAX_RETURN_IF_ERROR(prepare(process_set, x, &comm, &dtype));
  if (at.gpu) {
    // The GPU lowering always aliases the output to the input (XLA copies
    // first where it must), so no copy between them is needed here.
    if (y->untyped_data() != x.untyped_data()) {
      return ffi::Error::Internal("kolo.jax broadcast: on a GPU the output must be the input's buffer");
    }
    return result(api.broadcast_stream(comm, y->untyped_data(), x.element_count(), dtype, root, at.stream),
                  "broadcast");
  }
  // The output is the input's buffer (aliased by the lowering) or a copy of it.
  if (y->untyped_data() != x.untyped_data()) std::memcpy(y->untyped_data(), x.untyped_data(), x.size_bytes());
  return result(api.broadcast(comm, y->untyped_data(), x.element_count(), dtype, root), "broadcast");
}

template <typename... Stream>
ffi::Error Reducescatter(ffi::AnyBuffer x, ffi::Token, ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::Token>,
                         int32_t process_set, int32_t op, Stream... stream) {
  const Place at = place_of(stream...);
  kolo_comm_t comm;
  kolo_dtype_t dtype;
  KOLO_JAX_RETURN_IF_ERROR(prepare(process_set, x, &comm, &dtype));
  const auto kop = static_cast<kolo_op_t>(op);
  return result(at.gpu ? api.reduce_scatter_stream(comm, x.untyped_data(), y->untyped_data(), y->element_count(),
                                                   dtype, kop, at.stream)
                       : api.reduce_scatter(comm, x.untyped_data(), y->untyped_data(), y->element_count(), dtype, kop),
                "reducescatter");
}

template <typename... Stream>
ffi::Error Alltoall(ffi::AnyBuffer x, ffi::Token, ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::Token>,
                    int32_t process_set, int64_t block, Stream... stream) {
  const Place at = place_of(stream...);
  kolo_comm_t comm;
  kolo_dtype_t dtype;
  KOLO_JAX_RETURN_IF_ERROR(prepare(process_set, x, &comm, &dtype));
  const auto count = static_cast<size_t>(block);
  return result(at.gpu ? api.alltoall_stream(comm, x.untyped_data(), y->untyped_data(), count, dtype, at.stream)
                       : api.alltoall(comm, x.untyped_data(), y->untyped_data(), count, dtype),
                "alltoall");
}

// A barrier holds the calling thread until every rank has reached it (on
// a GPU: until every rank's program has been enqueued up to it), after the
// collectives queued before it, as Horovod's barrier does.
template <typename... Stream>
ffi::Error Barrier(ffi::Token, ffi::Result<ffi::Token>, int32_t process_set, Stream...) {
  kolo_comm_t comm;
  KOLO_JAX_RETURN_IF_ERROR(comm_of(process_set, &comm));
  return result(api.barrier(comm), "barrier");
}

}  // namespace

namespace {

// A handler of one array in and one out, the ordering token beside each,
// and the process set's id; each adds its own attributes.
auto one_array() {
  return ffi::Ffi::Bind()
      .Arg<ffi::AnyBuffer>()
      .Arg<ffi::Token>()
      .Ret<ffi::AnyBuffer>()
      .Ret<ffi::Token>()
      .Attr<int32_t>("process_set");
}

// The GPU handler's binding: the CPU's, and XLA's CUDA stream last.
template <typename Binding>
auto on_gpu(Binding binding) {
  return std::move(binding).template Ctx<ffi::PlatformStream<void*>>();
}

auto allreduce_many_binding() {
  return ffi::Ffi::Bind().RemainingArgs().RemainingRets().Attr<int32_t>("process_set").Attr<int32_t>("op");
}

auto barrier_binding() { return ffi::Ffi::Bind().Arg<ffi::Token>().Ret<ffi::Token>().Attr<int32_t>("process_set"); }

}  // namespace

// kolo_jax_<name> serves the CPU, kolo_jax_<name>_cuda a GPU.
#define KOLO_JAX_HANDLERS(name, impl, binding)                                    \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(kolo_jax_##name, impl<>, binding);                \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(kolo_jax_##name##_cuda, impl<void*>, on_gpu(binding))

KOLO_JAX_HANDLERS(allreduce, Allreduce, one_array().Attr<int32_t>("op"));
KOLO_JAX_HANDLERS(allreduce_many, AllreduceMany, allreduce_many_binding());
KOLO_JAX_HANDLERS(allgather, Allgather, one_array());
KOLO_JAX_HANDLERS(broadcast, Broadcast, one_array().Attr<int32_t>("root"));
KOLO_JAX_HANDLERS(reducescatter, Reducescatter, one_array().Attr<int32_t>("op"));
KOLO_JAX_HANDLERS(alltoall, Alltoall, one_array().Attr<int64_t>("block"));
KOLO_JAX_HANDLERS(barrier, Barrier, barrier_binding());
#undef KOLO_JAX_HANDLERS

extern "C" {

// Finds libkolo's functions in the library at path (the copy the Python
// package loaded); 0, or -1 with a message in error.
int kolo_jax_bind(const char* path, char* error, size_t error_size) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) lib = dlopen(path, RTLD_NOW);
  if (lib == nullptr) {
    std::snprintf(error, error_size, "cannot open %s: %s", path, dlerror());
    return -1;
  }
#define KOLO_JAX_FIND(field, name)                                                           \
  api.field = reinterpret_cast<decltype(api.field)>(dlsym(lib, #name));                      \
  if (api.field == nullptr) {                                                                \
    std::snprintf(error, error_size, "%s has no %s: an older libkolo than kolo.h", path, #name); \
    return -1;                                                                               \
  }
  KOLO_JAX_FIND(allreduce, kolo_allreduce)
  KOLO_JAX_FIND(allreduce_many, kolo_allreduce_many)
  KOLO_JAX_FIND(allgather, kolo_allgather)
  KOLO_JAX_FIND(broadcast, kolo_broadcast)
  KOLO_JAX_FIND(reduce_scatter, kolo_reduce_scatter)
  KOLO_JAX_FIND(alltoall, kolo_alltoall)
  KOLO_JAX_FIND(barrier, kolo_barrier)
  KOLO_JAX_FIND(allreduce_stream, kolo_allreduce_stream)
  KOLO_JAX_FIND(allreduce_many_stream, kolo_allreduce_many_stream)
  KOLO_JAX_FIND(allgather_stream, kolo_allgather_stream)
  KOLO_JAX_FIND(broadcast_stream, kolo_broadcast_stream)
  KOLO_JAX_FIND(reduce_scatter_stream, kolo_reduce_scatter_stream)
  KOLO_JAX_FIND(alltoall_stream, kolo_alltoall_stream)
  KOLO_JAX_FIND(last_error, kolo_last_error)
  KOLO_JAX_FIND(result_string, kolo_result_string)
#undef KOLO_JAX_FIND
  return 0;
}

// The communicator that serves a process set (comm NULL: forget it).
void kolo_jax_set_process_set(int32_t process_set, void* comm) {
  std::lock_guard<std::mutex> lock(table_mutex);
  if (comm == nullptr) {
    table().erase(process_set);
  } else {
    table()[process_set] = static_cast<kolo_comm_t>(comm);
  }
}

// Forgets every process set (kolo shut down).
void kolo_jax_forget_all(void) {
  std::lock_guard<std::mutex> lock(table_mutex);
  table().clear();
}

}  // extern "C"
