#include "gpu/emulated_device.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "collectives/elementwise.h"
#include "collectives/reduce_kernels.h"

namespace kolo {

EmulatedStream::EmulatedStream(int lag_us) : lag_us_(lag_us), thread_([this] { loop(); }) {}

EmulatedStream::~EmulatedStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t EmulatedStream::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.push_back(std::move(fn));
  cv_.notify_all();
  return ++enqueued_;
}

uint64_t EmulatedStream::enqueued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return enqueued_;
}

bool EmulatedStream::wait_for(uint64_t ticket, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (completed_.load() < ticket) {
    if (deadline.expired()) return false;
    cv_.wait_for(lock, std::chrono::milliseconds(1));
  }
  return true;
}

void EmulatedStream::loop() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and all work done
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    if (lag_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(lag_us_));
    fn();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      completed_.fetch_add(1);
    }
    cv_.notify_all();
  }
}

EmulatedDevice::EmulatedDevice(int lag_us, DeviceWideCalls mode) : lag_us_(lag_us), mode_(mode), stream_(lag_us) {}

size_t EmulatedDevice::imports_deferred() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return imports_deferred_;
}

std::vector<std::string> EmulatedDevice::violations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return violations_;
}

const char* EmulatedDevice::call_in_progress(uint64_t* number) const {
  *number = calls_started_.load();
  return in_call_.load();
}

bool EmulatedDevice::device_wide(const char* call, const std::string& detail) {
  const bool releasing = ReleasingHoldsScope::on_this_thread();
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t held = held_;
  if (held <= signaled_ || closing_) return true;
  if (mode_ == DeviceWideCalls::kFailWhereTheyDeadlock) {
    if (!releasing) return true;
    violations_.push_back(std::string("would deadlock on CUDA: ") + call + detail +
                          " while a caller's stream is held (until kolo releases hold " + std::to_string(held) +
                          ", from this very thread)");
    return false;
  }
  if (releasing) {
    calls_started_.fetch_add(1);
    in_call_.store(call);
  }
  signal_cv_.wait_for(lock, std::chrono::seconds(60), [&] { return signaled_ >= held || closing_; });
  if (releasing) in_call_.store(nullptr);
  return true;
}

bool EmulatedDevice::first_use(int kernel, const char* what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (all_kernels_loaded_ || loaded_kernels_.count(kernel)) return true;
  }
  if (!device_wide("cuModuleLoad", std::string(" (the first use of the ") + what + ")")) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  loaded_kernels_.insert(kernel);
  return true;
}

Status EmulatedDevice::load_kernels() {
  std::lock_guard<std::mutex> lock(mutex_);
  all_kernels_loaded_ = true;
  return Status::ok();
}

EmulatedDevice::~EmulatedDevice() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;  // releases holds nobody will signal
  }
  signal_cv_.notify_all();
  stream_.wait_for(stream_.enqueued(), Deadline::after_seconds(60));
  for (auto& a : allocations_) std::free(a.first);
}

void* EmulatedDevice::create_stream() {
  std::lock_guard<std::mutex> lock(mutex_);
  caller_streams_.push_back(std::make_unique<EmulatedStream>(lag_us_));
  return caller_streams_.back().get();
}

void EmulatedDevice::run_on(void* stream, std::function<void()> fn) {
  static_cast<EmulatedStream*>(stream)->enqueue(std::move(fn));
}

bool EmulatedDevice::synchronize_stream(void* stream, Deadline deadline) {
  auto* s = static_cast<EmulatedStream*>(stream);
  return s->wait_for(s->enqueued(), deadline);
}

void EmulatedDevice::fail_next(Status status) {
  std::lock_guard<std::mutex> lock(mutex_);
  inject_ = std::move(status);
}

unsigned char* EmulatedDevice::base_of(const void* p, size_t* bytes) {
  auto* q = static_cast<unsigned char*>(const_cast<void*>(p));
  auto it = allocations_.upper_bound(q);
  if (it == allocations_.begin()) return nullptr;
  --it;
  if (q >= it->first + it->second && !(it->second == 0 && q == it->first)) return nullptr;
  if (bytes) *bytes = it->second;
  return it->first;
}

MemoryKind EmulatedDevice::classify(const void* p) {
  std::lock_guard<std::mutex> lock(mutex_);
  return base_of(p, nullptr) ? MemoryKind::kThisDevice : MemoryKind::kHost;
}

void* EmulatedDevice::allocate(size_t bytes) {
  if (!device_wide("cudaMalloc", " of " + std::to_string(bytes) + " bytes")) return nullptr;
  auto* p = static_cast<unsigned char*>(std::malloc(bytes ? bytes : 1));
  if (!p) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_[p] = bytes ? bytes : 1;
  return p;
}

void EmulatedDevice::release(void* p) {
  if (!p) return;
  if (!device_wide("cudaFree", "")) return;  // kept: freeing memory in use would be worse
  // cudaFree waits for the device: so does this, for kolo's stream.
  stream_.wait_for(stream_.enqueued(), Deadline::after_seconds(60));
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_.erase(static_cast<unsigned char*>(p));
  std::free(p);
}

void* EmulatedDevice::allocate_pinned(size_t bytes) {
  if (!device_wide("cudaHostAlloc", " of " + std::to_string(bytes) + " bytes")) return nullptr;
  return std::malloc(bytes ? bytes : 1);
}

void EmulatedDevice::release_pinned(void* p) {
  if (!device_wide("cudaFreeHost", "")) return;
  stream_.wait_for(stream_.enqueued(), Deadline::after_seconds(60));
  std::free(p);
}

void EmulatedDevice::enqueue(std::function<void()> fn) {
  Status injected;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::swap(injected, inject_);
  }
  if (injected.is_ok()) {
    stream_.enqueue(std::move(fn));
    return;
  }
  stream_.enqueue([this, injected] {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_.is_ok()) failure_ = injected;
  });
}

void EmulatedDevice::copy(void* dst, const void* src, size_t bytes) {
  enqueue([=] { std::memmove(dst, src, bytes); });
}

void EmulatedDevice::reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count) {
  // kAvg runs the sum's kernel.
  const int kernel = static_cast<int>(dtype) * 16 + static_cast<int>(op == ReduceOp::kAvg ? ReduceOp::kSum : op);
  if (!first_use(kernel, "reduction kernel")) {
    fail_next(device_error("the reduction kernel could not be loaded"));
    enqueue([] {});
    return;
  }
  ReduceFn fn = reduce_kernel(dtype, op);
  enqueue([=] { fn(out, a, b, count); });
}

void EmulatedDevice::divide(DataType dtype, void* buf, size_t count, int divisor) {
  if (!first_use(1000 + static_cast<int>(dtype), "division kernel")) {
    fail_next(device_error("the division kernel could not be loaded"));
    enqueue([] {});
    return;
  }
  FinalizeFn fn = finalize_kernel(dtype, ReduceOp::kAvg);
  enqueue([=] { fn(buf, count, divisor); });
}

void EmulatedDevice::scale(DataType dtype, void* out, const void* in, size_t count, double factor) {
  if (!first_use(2000 + static_cast<int>(dtype), "scaling kernel")) {
    fail_next(device_error("the scaling kernel could not be loaded"));
    enqueue([] {});
    return;
  }
  enqueue([=] { scale_copy(dtype, out, in, count, factor); });
}

uint64_t EmulatedDevice::fence() { return stream_.enqueued(); }

Status EmulatedDevice::poll(uint64_t fence, bool* passed) {
  *passed = stream_.completed() >= fence;
  std::lock_guard<std::mutex> lock(mutex_);
  Status failure = failure_;
  failure_ = Status::ok();
  return failure;
}

Status EmulatedDevice::synchronize(Deadline deadline) {
  if (!stream_.wait_for(stream_.enqueued(), deadline)) {
    return timeout_error("the emulated GPU's stream did not finish its work in time");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  Status failure = failure_;
  failure_ = Status::ok();
  return failure;
}

Status EmulatedDevice::capture(void* stream, StreamPoint* point) {
  if (!stream) {  // the legacy default stream: the emulation enqueues nothing there
    point->event = nullptr;
    return Status::ok();
  }
  auto* reached = new std::atomic<bool>(false);
  run_on(stream, [reached] { reached->store(true); });
  point->event = reached;
  return Status::ok();
}

void EmulatedDevice::wait(StreamPoint point) {
  auto* reached = static_cast<std::atomic<bool>*>(point.event);
  if (!reached) return;
  stream_.enqueue([reached] {
    while (!reached->load()) std::this_thread::sleep_for(std::chrono::microseconds(20));
    delete reached;
  });
}

Status EmulatedDevice::hold(void* stream, uint64_t value) {
  if (!stream) return invalid_argument("the emulated GPU has no default stream: pass one of create_stream()");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (value > held_) held_ = value;
  }
  run_on(stream, [this, value] {
    std::unique_lock<std::mutex> lock(mutex_);
    signal_cv_.wait(lock, [&] { return signaled_ >= value || closing_; });
  });
  return Status::ok();
}

void EmulatedDevice::signal(uint64_t value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (value > signaled_) signaled_ = value;
  }
  signal_cv_.notify_all();
}

namespace {
constexpr char kMagic[] = "kolo-emulated-ipc";
}

Status EmulatedDevice::export_memory(const void* p, IpcHandle* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  unsigned char* base = base_of(p, nullptr);
  if (!base) return invalid_argument("export_memory: not memory of the emulated GPU");
  std::memset(handle, 0, sizeof(*handle));
  std::memcpy(handle->bytes, kMagic, sizeof(kMagic));
  std::memcpy(handle->bytes + sizeof(kMagic), &base, sizeof(base));
  handle->offset = static_cast<uint64_t>(static_cast<const unsigned char*>(p) - base);
  return Status::ok();
}

bool EmulatedDevice::find_open(const IpcHandle& handle, void** p) {
  if (std::memcmp(handle.bytes, kMagic, sizeof(kMagic)) != 0) return false;
  unsigned char* base;
  std::memcpy(&base, handle.bytes + sizeof(kMagic), sizeof(base));
  std::lock_guard<std::mutex> lock(mutex_);
  if (!imported_.count(base)) {
    ++imports_deferred_;
    return false;
  }
  *p = base + handle.offset;
  return true;
}

Status EmulatedDevice::import_memory(const IpcHandle& handle, void** p) {
  if (std::memcmp(handle.bytes, kMagic, sizeof(kMagic)) != 0) {
    return device_error("import_memory: not a handle of an emulated GPU");
  }
  unsigned char* base;
  std::memcpy(&base, handle.bytes + sizeof(kMagic), sizeof(base));
  bool opened;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    opened = imported_.count(base) > 0;
  }
  // Each allocation is opened once, as CUDA's device caches it.
  if (!opened) {
    if (!device_wide("cudaIpcOpenMemHandle", "")) {
      return device_error("would deadlock on CUDA: cudaIpcOpenMemHandle while a caller's stream is held");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    imported_.insert(base);
  }
  *p = base + handle.offset;
  return Status::ok();
}

}  // namespace kolo
