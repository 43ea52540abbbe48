#include "gpu/device_memory.h"

namespace kolo {

DeviceMemory::~DeviceMemory() {
  if (staging_.data) device_->release(staging_.data);
  if (scratch_.data) device_->release(scratch_.data);
  if (packing_.data) device_->release(packing_.data);
}

void DeviceMemory::copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) device_->copy(dst, src, bytes);
}

void DeviceMemory::reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count) {
  if (count > 0) device_->reduce(dtype, op, out, a, b, count);
}

void DeviceMemory::finalize(DataType dtype, ReduceOp op, void* buf, size_t count, int divisor) {
  if (op == ReduceOp::kAvg && count > 0) device_->divide(dtype, buf, count, divisor);
}

void* DeviceMemory::grow(Buffer* buffer, size_t bytes) {
  if (bytes <= buffer->bytes) return buffer->data;
  // Device::release waits for work still using the old buffer.
  if (buffer->data) device_->release(buffer->data);
  buffer->data = device_->allocate(bytes);
  buffer->bytes = buffer->data ? bytes : 0;
  return buffer->data;
}

}  // namespace kolo
