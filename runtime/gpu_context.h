// What a communicator needs to run collectives on GPU buffers: the GPU
// (opened at the first call given device memory), its memory for the
// collectives' scratch space, and the transport for device messages: CUDA
// IPC to ranks on this node, pinned-host staging over the communicator's
// own transport to the others.
#pragma once

#include <atomic>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/ring.h"
#include "gpu/device.h"
#include "gpu/device_memory.h"
#include "runtime/config.h"
#include "transport/kind.h"

namespace kolo {

// A buffer a call was given, for telling host from device memory.
struct NamedBuffer {
  const void* data;
  size_t bytes;
  const char* name;  // "sendbuf", ...
};

// The buffers of one call, seen in place: a braced list, an array or a
// vector, valid while the call runs (nothing keeps it).
class BufferList {
 public:
  BufferList() = default;
  // The braced list's array lives until the end of the call's full
  // expression, which is as long as a BufferList is used (as a parameter).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  BufferList(std::initializer_list<NamedBuffer> list) : data_(list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  template <size_t N>
  BufferList(const NamedBuffer (&array)[N]) : data_(array), size_(N) {}  // NOLINT: an array is a list
  BufferList(const std::vector<NamedBuffer>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT: so is a vector
  const NamedBuffer* begin() const { return data_; }
  const NamedBuffer* end() const { return data_ + size_; }

 private:
  const NamedBuffer* data_ = nullptr;
  size_t size_ = 0;
};

class GpuContext {
 public:
  // injected: a Device to use instead of opening one (tests pass an
  // emulated GPU); nullptr opens GPU local_rank % count when needed.
  GpuContext(Device* injected, int local_rank)
      : device_(injected), local_rank_(local_rank) {}
  ~GpuContext();

  // Whether the call's buffers are device memory (true) or host memory
  // (false). Mixing the two in one call, memory of another GPU, and device
  // memory where no GPU can be used (a build without CUDA) are errors that
  // name the buffers. Any thread.
  Status classify(BufferList buffers, bool* on_device);

  // The GPU, opened on first use with every kernel loaded
  // (Device::load_kernels); UNSUPPORTED saying why when there is none.
  // Any thread.
  Status device(Device** out);

  // Turns the communicator's schedule context into one for device buffers.
  // host_transport: the communicator's transport (nullptr alone in the
  // world); device_routes[r]: the kind that carries device memory to rank r
  // (both ends chose it at the rendezvous, transport/routes.h), or nullptr
  // where rank r's GPU is reached through host staging.
  Status adapt(ScheduleContext* ctx, Transport* host_transport,
               const std::vector<const TransportKind*>& device_routes, const Config& config);

  // Before a call on device buffers whose largest is `largest` bytes is
  // queued, from the caller's thread: the GPU's memory for it, the device
  // transports and their staging slots, made now. Made later, on kolo's
  // thread while a caller's stream is held, they would wait for that
  // stream (device.h). Same arguments as adapt, and segment_bytes: the
  // pipeline's unit.
  Status prepare(Transport* host_transport, const std::vector<const TransportKind*>& device_routes,
                 const Config& config, size_t segment_bytes, size_t largest);
  // Frees device memory that growing replaced: only when no caller's
  // stream is held and no collective runs (a blocking call's start).
  void release_retired();

 private:
  // The memory and transports adapt hands out, made once. Under mutex_.
  Status open_transports_locked(Device* d, Transport* host_transport,
                                const std::vector<const TransportKind*>& device_routes, const Config& config,
                                size_t segment_bytes);

  // Whether device_ is set (the GPU open, or injected). Without a lock:
  // every call asks, for each of its buffers.
  bool opened() const { return device_.load(std::memory_order_acquire) != nullptr; }

  std::mutex open_mutex_;  // the opening (device()), from any threads
  // Set under open_mutex_, read without it; never goes back to nullptr.
  std::atomic<Device*> device_;
  std::unique_ptr<Device> owned_;
  Status open_failure_;  // why the GPU could not be opened, once tried
  bool tried_ = false;
  bool kernels_loaded_ = false;
  const int local_rank_;
  std::mutex mutex_;  // prepare (callers' threads) against adapt (kolo's)
  std::unique_ptr<DeviceMemory> memory_;
  std::unique_ptr<Transport> staged_;
  std::unique_ptr<Transport> direct_;  // the device kind's, over staged_, where one reaches a peer
};

}  // namespace kolo
