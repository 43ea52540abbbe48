// A GPU's memory as the collectives see it (collectives/memory.h): copies
// and reductions are enqueued on the Device's stream, and the scratch
// buffers are device memory, grown on demand and kept for later calls.
// Growing allocates, and freeing waits for the whole device: neither may
// happen on kolo's thread while a caller's stream is held (device.h's
// ReleasingHoldsScope), so a call on a stream reserves what it needs first,
// from the caller's thread, and a replaced buffer is only retired, freed
// when no stream is held (release_retired).
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "collectives/memory.h"
#include "gpu/device.h"

namespace kolo {

class DeviceMemory : public Memory {
 public:
  explicit DeviceMemory(Device* device) : device_(device) {}
  ~DeviceMemory() override;

  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void copy(void* dst, const void* src, size_t bytes) override;
  void reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count) override;
  void finalize(DataType dtype, ReduceOp op, void* buf, size_t count, int divisor) override;
  void scale(DataType dtype, void* out, const void* in, size_t count, double factor) override;
  void* staging(size_t bytes) override { return grow(&staging_, bytes); }
  void* scratch(size_t bytes) override { return grow(&scratch_, bytes); }
  void* packing(size_t bytes) override { return grow(&packing_, bytes); }

  // Grows the buffers to at least these sizes now; false if the device
  // had not the memory. Any thread.
  bool reserve(size_t staging_bytes, size_t scratch_bytes);
  // Frees the buffers growing replaced. Only when no caller's stream is
  // held and no collective runs.
  void release_retired();

 private:
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
  };
  // Contents are not kept: callers use scratch afresh each call.
  void* grow(Buffer* buffer, size_t bytes);

  Device* device_;
  std::mutex mutex_;  // reserve() comes from callers' threads while a collective runs
  std::vector<void*> retired_;
  Buffer staging_;
  Buffer scratch_;
  Buffer packing_;
};

}  // namespace kolo
