#include "gpu/cuda/cuda_device.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/log.h"
#include "gpu/cuda/kernels.h"

namespace kolo {
namespace {

std::string cuda_message(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

// Driver functions the runtime does not wrap, found through the runtime so
// that libkolo links no libcuda (a machine without the driver still loads it).
template <typename Fn>
Fn driver_function(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found;
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    return nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}

using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

// Makes a GPU current on the calling thread for a scope, then gives the
// thread back the device it had: kolo is called from the application's
// threads, whose current device is theirs.
class CurrentDevice {
 public:
  explicit CurrentDevice(int ordinal) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != ordinal) cudaSetDevice(ordinal);
  }
  ~CurrentDevice() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
  }

 private:
  int previous_ = -1;
};
using GetAddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

// Names the CUDA call the thread that releases holds is in, for its scope
// (Device::call_in_progress); nothing on other threads.
struct CallSlot {
  std::atomic<const char*> call{nullptr};
  std::atomic<uint64_t> started{0};
};
class InCall {
 public:
  InCall(CallSlot* slot, const char* call) : slot_(ReleasingHoldsScope::on_this_thread() ? slot : nullptr) {
    if (!slot_) return;
    slot_->started.fetch_add(1);
    slot_->call.store(call);
  }
  ~InCall() {
    if (slot_) slot_->call.store(nullptr);
  }
  InCall(const InCall&) = delete;
  InCall& operator=(const InCall&) = delete;

 private:
  CallSlot* slot_;
};

class CudaDevice : public Device {
 public:
  CudaDevice(int ordinal, std::string name) : ordinal_(ordinal), name_(std::move(name)) {}

  Status init() {
    const CurrentDevice scope(ordinal_);
    cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    if (e != cudaSuccess) return device_error(cuda_message("cudaStreamCreate", e));
    // The flag caller streams wait on (hold): pinned, mapped into the GPU.
    e = cudaHostAlloc(reinterpret_cast<void**>(&flag_), sizeof(uint32_t), cudaHostAllocMapped);
    if (e != cudaSuccess) return device_error(cuda_message("cudaHostAlloc (stream flag)", e));
    *flag_ = 0;
    e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&flag_device_), flag_, 0);
    if (e != cudaSuccess) return device_error(cuda_message("cudaHostGetDevicePointer", e));
    wait_value_ = driver_function<WaitValue32>("cuStreamWaitValue32");
    address_range_ = driver_function<GetAddressRange>("cuMemGetAddressRange");
    return Status::ok();
  }

  ~CudaDevice() override {
    const CurrentDevice scope(ordinal_);
    if (stream_) cudaStreamSynchronize(stream_);
    for (auto& f : fences_) cudaEventDestroy(f.second);
    for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
    for (auto& opened : imported_) cudaIpcCloseMemHandle(opened.second);
    if (flag_) cudaFreeHost(flag_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return name_; }
  int ordinal() const override { return ordinal_; }

  MemoryKind classify(const void* p) override {
    const CurrentDevice scope(ordinal_);
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();  // not an error worth keeping: p is simply not CUDA's
      return MemoryKind::kHost;
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) return MemoryKind::kHost;
    return a.device == ordinal_ ? MemoryKind::kThisDevice : MemoryKind::kOtherDevice;
  }

  void* allocate(size_t bytes) override {
    const CurrentDevice scope(ordinal_);
    const InCall in(&in_call_, "cudaMalloc");
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess) return p;
    KOLO_ERROR(cuda_message(("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str(), e));
    return nullptr;
  }
  void release(void* p) override {
    const CurrentDevice scope(ordinal_);
    const InCall in(&in_call_, "cudaFree");
    cudaFree(p);  // waits for the device
  }
  void* allocate_pinned(size_t bytes) override {
    const CurrentDevice scope(ordinal_);
    const InCall in(&in_call_, "cudaHostAlloc");
    void* p = nullptr;
    cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
    if (e == cudaSuccess) return p;
    KOLO_ERROR(cuda_message(("cudaHostAlloc of " + std::to_string(bytes) + " bytes").c_str(), e));
    return nullptr;
  }
  void release_pinned(void* p) override {
    const CurrentDevice scope(ordinal_);
    const InCall in(&in_call_, "cudaFreeHost");
    cudaFreeHost(p);
  }

  void copy(void* dst, const void* src, size_t bytes) override {
    const CurrentDevice scope(ordinal_);
    keep(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), "cudaMemcpyAsync");
  }
  void reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count) override {
    const CurrentDevice scope(ordinal_);
    keep(static_cast<cudaError_t>(cuda::enqueue_reduce(dtype, op, out, a, b, count, stream_)), "reduction kernel");
  }
  void divide(DataType dtype, void* buf, size_t count, int divisor) override {
    const CurrentDevice scope(ordinal_);
    keep(static_cast<cudaError_t>(cuda::enqueue_divide(dtype, buf, count, divisor, stream_)), "division kernel");
  }
  void scale(DataType dtype, void* out, const void* in, size_t count, double factor) override {
    const CurrentDevice scope(ordinal_);
    keep(static_cast<cudaError_t>(cuda::enqueue_scale(dtype, out, in, count, factor, stream_)), "scaling kernel");
  }

  uint64_t fence() override {
    const CurrentDevice scope(ordinal_);
    cudaEvent_t e = nullptr;
    if (!spare_events_.empty()) {
      e = spare_events_.back();
      spare_events_.pop_back();
    } else if (!keep(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate")) {
      return ++last_fence_;  // the failure is reported by poll()
    }
    if (!keep(cudaEventRecord(e, stream_), "cudaEventRecord")) {
      spare_events_.push_back(e);
      return ++last_fence_;
    }
    fences_.emplace_back(++last_fence_, e);
    return last_fence_;
  }

  Status poll(uint64_t fence, bool* passed) override {
    const CurrentDevice scope(ordinal_);
    while (!fences_.empty()) {
      cudaError_t e = cudaEventQuery(fences_.front().second);
      if (e == cudaErrorNotReady) break;
      if (e != cudaSuccess) keep(e, "work on kolo's stream");
      passed_fence_ = fences_.front().first;
      spare_events_.push_back(fences_.front().second);
      fences_.pop_front();
    }
    if (fences_.empty()) passed_fence_ = last_fence_;
    *passed = passed_fence_ >= fence;
    return take_failure();
  }

  Status synchronize(Deadline deadline) override {
    const CurrentDevice scope(ordinal_);
    const InCall in(&in_call_, "cudaStreamQuery (waiting for kolo's stream)");
    for (;;) {
      cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) break;
      if (e != cudaErrorNotReady) {
        keep(e, "work on kolo's stream");
        break;
      }
      if (deadline.expired()) return timeout_error("kolo's stream on " + name_ + " did not finish its work in time");
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    bool passed;
    return poll(last_fence_, &passed);
  }

  Status capture(void* stream, StreamPoint* point) override {
    const CurrentDevice scope(ordinal_);
    cudaEvent_t e;
    cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    if (err != cudaSuccess) return device_error(cuda_message("cudaEventCreate", err));
    err = cudaEventRecord(e, static_cast<cudaStream_t>(stream));
    if (err != cudaSuccess) {
      cudaEventDestroy(e);
      return device_error(cuda_message("cudaEventRecord on the caller's stream", err));
    }
    point->event = e;
    return Status::ok();
  }

  void wait(StreamPoint point) override {
    const CurrentDevice scope(ordinal_);
    auto e = static_cast<cudaEvent_t>(point.event);
    keep(cudaStreamWaitEvent(stream_, e, 0), "cudaStreamWaitEvent");
    cudaEventDestroy(e);  // allowed while the wait is pending
  }

  Status hold(void* stream, uint64_t value) override {
    const CurrentDevice scope(ordinal_);
    if (!wait_value_) return unsupported("the CUDA driver has no cuStreamWaitValue32 (stream memory operations)");
    CUresult r = wait_value_(static_cast<CUstream>(stream), flag_device_, static_cast<cuuint32_t>(value),
                             CU_STREAM_WAIT_VALUE_GEQ);  // cyclic comparison: wraparound is fine
    if (r != CUDA_SUCCESS) return device_error("cuStreamWaitValue32 on the caller's stream failed: CUresult " +
                                               std::to_string(static_cast<int>(r)));
    return Status::ok();
  }

  void signal(uint64_t value) override {
    __atomic_store_n(flag_, static_cast<uint32_t>(value), __ATOMIC_RELEASE);
  }

  Status export_memory(const void* p, IpcHandle* handle) override {
    const CurrentDevice scope(ordinal_);
    if (!address_range_) return unsupported("the CUDA driver has no cuMemGetAddressRange");
    CUdeviceptr base = 0;
    size_t bytes = 0;
    CUresult r = address_range_(&base, &bytes, reinterpret_cast<CUdeviceptr>(p));
    if (r != CUDA_SUCCESS) return device_error("cuMemGetAddressRange failed: CUresult " + std::to_string(r));
    cudaIpcMemHandle_t h;
    cudaError_t e = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base));
    if (e != cudaSuccess) {
      return device_error(cuda_message("cudaIpcGetMemHandle (memory from cudaMalloc can be shared; other "
                                       "allocators' may not: set KOLO_CUDA_IPC=0)",
                                       e));
    }
    static_assert(sizeof(h) <= sizeof(handle->bytes), "IPC handle size");
    std::memset(handle->bytes, 0, sizeof(handle->bytes));
    std::memcpy(handle->bytes, &h, sizeof(h));
    handle->offset = reinterpret_cast<CUdeviceptr>(p) - base;
    return Status::ok();
  }

  Status import_memory(const IpcHandle& handle, void** p) override {
    if (find_open(handle, p)) return Status::ok();
    const CurrentDevice scope(ordinal_);
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.bytes, sizeof(h));
    void* base = nullptr;
    {
      // Not under imported_mutex_: this may wait for the whole device,
      // which may wait for kolo's thread, which may be in find_open.
      const InCall in(&in_call_, "cudaIpcOpenMemHandle");
      cudaError_t e = cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess);
      if (e != cudaSuccess) return device_error(cuda_message("cudaIpcOpenMemHandle", e));
    }
    std::string key(reinterpret_cast<const char*>(handle.bytes), sizeof(handle.bytes));
    std::lock_guard<std::mutex> lock(imported_mutex_);
    auto it = imported_.emplace(key, base).first;
    if (it->second != base) cudaIpcCloseMemHandle(base);  // another thread opened it meanwhile
    *p = static_cast<unsigned char*>(it->second) + handle.offset;
    return Status::ok();
  }

  Status load_kernels() override {
    const CurrentDevice scope(ordinal_);
    const InCall in(&in_call_, "loading kolo's kernels (cuModuleLoad)");
    const int e = cuda::load_kernels();
    if (e != 0) return device_error(cuda_message("loading kolo's kernels", static_cast<cudaError_t>(e)));
    return Status::ok();
  }

  const char* call_in_progress(uint64_t* number) const override {
    *number = in_call_.started.load();
    return in_call_.call.load();
  }

 protected:
  bool find_open(const IpcHandle& handle, void** p) override {
    std::string key(reinterpret_cast<const char*>(handle.bytes), sizeof(handle.bytes));
    std::lock_guard<std::mutex> lock(imported_mutex_);
    auto it = imported_.find(key);
    if (it == imported_.end()) return false;
    *p = static_cast<unsigned char*>(it->second) + handle.offset;
    return true;
  }

 private:
  // Keeps the first failure for poll()/synchronize(); true when e is success.
  bool keep(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    cudaGetLastError();
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_.is_ok()) failure_ = device_error(cuda_message(what, e) + " on " + name_);
    return false;
  }

  Status take_failure() {
    std::lock_guard<std::mutex> lock(mutex_);
    Status f = failure_;
    failure_ = Status::ok();
    return f;
  }

  const int ordinal_;
  const std::string name_;
  cudaStream_t stream_ = nullptr;
  uint32_t* flag_ = nullptr;
  CUdeviceptr flag_device_ = 0;
  WaitValue32 wait_value_ = nullptr;
  GetAddressRange address_range_ = nullptr;
  std::deque<std::pair<uint64_t, cudaEvent_t>> fences_;  // recorded, not yet passed
  std::vector<cudaEvent_t> spare_events_;
  uint64_t last_fence_ = 0;
  uint64_t passed_fence_ = 0;
  std::mutex imported_mutex_;  // callers' threads (open_remembered) and kolo's
  std::map<std::string, void*> imported_;  // IPC handle -> opened base
  std::mutex mutex_;
  Status failure_;
  CallSlot in_call_;
};

}  // namespace

Status open_cuda_device(int local_rank, std::unique_ptr<Device>* out) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return unsupported("no GPU: " + cuda_message("cudaGetDeviceCount", e));
  }
  if (count == 0) return unsupported("no GPU: CUDA sees no device");
  const int ordinal = (local_rank < 0 ? 0 : local_rank) % count;
  e = cudaSetDevice(ordinal);
  if (e != cudaSuccess) return device_error(cuda_message(("cudaSetDevice(" + std::to_string(ordinal) + ")").c_str(), e));
  cudaDeviceProp prop;
  std::string name = "GPU " + std::to_string(ordinal);
  if (cudaGetDeviceProperties(&prop, ordinal) == cudaSuccess) name += std::string(" (") + prop.name + ")";
  auto device = std::make_unique<CudaDevice>(ordinal, name);
  KOLO_RETURN_IF_ERROR(device->init());
  *out = std::move(device);
  return Status::ok();
}

}  // namespace kolo
