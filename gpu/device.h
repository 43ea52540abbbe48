// The GPU a rank works on, as kolo's collectives see it: memory to tell
// apart and allocate, one stream of kolo's own on which every copy and
// reduction is enqueued in call order, and the few ways to order that
// stream against a caller's stream or to share memory with another process
// on the same node (CUDA IPC).
//
// Two implementations: CUDA (gpu/cuda/cuda_device.cc, built by
// --config=cuda) and an emulation on host threads (emulated_device.h), on
// which every protocol above this interface is tested without a GPU.
//
// Errors: enqueueing never fails by itself. A failure of enqueued work (a
// launch error, a fault) is kept and reported by the next poll() or
// synchronize(), as CUDA reports asynchronous errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "collectives/dtype.h"
#include "common/deadline.h"
#include "common/status.h"

namespace kolo {

enum class MemoryKind {
  kHost,         // not device memory (pageable or pinned host memory)
  kThisDevice,   // memory of this Device
  kOtherDevice,  // memory of another GPU: kolo does not take it
};

// An allocation made shareable with another process on the node, and where
// a buffer lies in it.
struct IpcHandle {
  unsigned char bytes[64];  // cudaIpcMemHandle_t
  uint64_t offset;          // of the buffer from the allocation's base
};

// A point in a caller's stream, recorded by capture().
struct StreamPoint {
  void* event = nullptr;
};

class Device {
 public:
  virtual ~Device() = default;

  // "GPU 0 (NVIDIA H100 80GB HBM3)": for messages and logs.
  virtual std::string name() const = 0;
  // Its CUDA device number.
  virtual int ordinal() const = 0;
  virtual MemoryKind classify(const void* p) = 0;

  // Device memory and pinned (page-locked) host memory; nullptr on failure
  // (why is logged).
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void* allocate_pinned(size_t bytes) = 0;
  virtual void release_pinned(void* p) = 0;

  // Work on kolo's stream, executed in call order.
  // Like memmove, between any two of device, pinned host and host memory.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // out[i] = a[i] OP b[i], bit for bit what the host kernels compute (kAvg: the sum).
  virtual void reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count) = 0;
  // buf[i] /= divisor, as the host's finalize kernels do.
  virtual void divide(DataType dtype, void* buf, size_t count, int divisor) = 0;
  // out[i] = in[i] * factor, as the host's scale_copy computes it
  // (collectives/elementwise.h); out may be in.
  virtual void scale(DataType dtype, void* out, const void* in, size_t count, double factor) = 0;

  // A fence after everything enqueued so far. poll() says whether the
  // stream has passed it, or the failure of the work before it.
  virtual uint64_t fence() = 0;
  virtual Status poll(uint64_t fence, bool* passed) = 0;
  // Waits until everything enqueued has run; TIMEOUT at the deadline.
  virtual Status synchronize(Deadline deadline) = 0;

  // Ordering against a caller's stream (a cudaStream_t; nullptr is the
  // legacy default stream). capture() records the point the caller's stream
  // has reached, from the caller's thread at call time; wait() makes kolo's
  // stream wait for it (once: it frees the point).
  virtual Status capture(void* stream, StreamPoint* point) = 0;
  virtual void wait(StreamPoint point) = 0;
  // Makes the caller's stream wait, from now on in its order, until
  // signal(v) has been called with v >= value; signal() is a host write,
  // from any thread. Values increase; each hold is released once.
  virtual Status hold(void* stream, uint64_t value) = 0;
  virtual void signal(uint64_t value) = 0;

  // CUDA IPC: a handle to the allocation holding p, for another process on
  // the node; and that process's view of such a handle (opened once per
  // allocation and cached while this Device lives).
  virtual Status export_memory(const void* p, IpcHandle* handle) = 0;
  virtual Status import_memory(const IpcHandle& handle, void** p) = 0;
  // The same for an allocation import_memory has opened already, with no
  // CUDA call (opening one waits for the whole device): false if it is not
  // open yet, and then it is remembered for open_remembered. Any thread.
  bool find_imported(const IpcHandle& handle, void** p) {
    if (find_open(handle, p)) return true;
    std::lock_guard<std::mutex> lock(remembered_mutex_);
    remembered_.push_back(handle);
    return false;
  }
  // Opens the allocations find_imported was asked for and had not (from a
  // caller's thread, before any of its streams is held).
  Status open_remembered() {
    std::vector<IpcHandle> remembered;
    {
      std::lock_guard<std::mutex> lock(remembered_mutex_);
      remembered.swap(remembered_);
    }
    for (const IpcHandle& h : remembered) {
      void* p = nullptr;
      KOLO_RETURN_IF_ERROR(import_memory(h, &p));
    }
    return Status::ok();
  }

  // Loads every kernel now, with what its launches need (occupancy): CUDA
  // loads modules lazily (the default since 12.2), and a first load waits
  // for the whole device, so one made while a caller's stream is held
  // (hold()) would wait for a stream that waits for kolo.
  virtual Status load_kernels() = 0;
  // The CUDA call ("cudaFree", ...) the thread that releases the holds
  // (ReleasingHoldsScope, below) is in right now, or nullptr; *number
  // counts the calls it started, so that one long call is told from many
  // short ones. From any thread: what a watchdog names.
  virtual const char* call_in_progress(uint64_t* number) const = 0;

 protected:
  // import_memory's view of an allocation it has opened already, looked up
  // with no CUDA call: false if it is not open. Any thread.
  virtual bool find_open(const IpcHandle& handle, void** p) = 0;

 private:
  std::mutex remembered_mutex_;
  std::vector<IpcHandle> remembered_;  // asked of find_imported, not open yet
};

// Marks the calling thread, for a scope, as the one that runs the work
// callers' streams are held for (hold() .. signal()). A call there that
// waits for the whole device (an allocation, a free, an IPC import, a
// kernel's first load) waits for a held stream, which waits for this
// thread: the emulated device's strict mode fails such calls at once.
class ReleasingHoldsScope {
 public:
  ReleasingHoldsScope() : was_(active) { active = true; }
  ~ReleasingHoldsScope() { active = was_; }
  ReleasingHoldsScope(const ReleasingHoldsScope&) = delete;
  ReleasingHoldsScope& operator=(const ReleasingHoldsScope&) = delete;
  static bool on_this_thread() { return active; }

 private:
  static inline thread_local bool active = false;
  const bool was_;
};

}  // namespace kolo
