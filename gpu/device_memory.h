// A GPU's memory as the collectives see it (collectives/memory.h): copies
// and reductions are enqueued on the Device's stream, and the scratch
// buffers are device memory, grown on demand and kept for later calls.
#pragma once

#include <cstddef>

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
  void* staging(size_t bytes) override { return grow(&staging_, bytes); }
  void* scratch(size_t bytes) override { return grow(&scratch_, bytes); }
  void* packing(size_t bytes) override { return grow(&packing_, bytes); }

 private:
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
  };
  // Contents are not kept: callers use scratch afresh each call.
  void* grow(Buffer* buffer, size_t bytes);

  Device* device_;
  Buffer staging_;
  Buffer scratch_;
  Buffer packing_;
};

}  // namespace kolo
