#include "gpu/device_memory.h"

namespace kolo {

DeviceMemory::~DeviceMemory() {
  release_retired();
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

void DeviceMemory::scale(DataType dtype, void* out, const void* in, size_t count, double factor) {
  if (count > 0) device_->scale(dtype, out, in, count, factor);
}

void* DeviceMemory::grow(Buffer* buffer, size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes <= buffer->bytes) return buffer->data;
  }
  // Allocated outside the lock: an allocation may wait for the whole
  // device, and with it for a collective on kolo's thread that may be
  // asking this object for a buffer meanwhile.
  void* fresh = device_->allocate(bytes);
  if (!fresh) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes <= buffer->bytes) {  // another thread grew it meanwhile
    retired_.push_back(fresh);
    return buffer->data;
  }
  // A collective still running may hold the old buffer (a reserve() from
  // another thread grew it): it goes when nothing runs.
  if (buffer->data) retired_.push_back(buffer->data);
  buffer->data = fresh;
  buffer->bytes = bytes;
  return fresh;
}

bool DeviceMemory::reserve(size_t staging_bytes, size_t scratch_bytes) {
  if (staging_bytes && !grow(&staging_, staging_bytes)) return false;
  return !scratch_bytes || grow(&scratch_, scratch_bytes);
}

void DeviceMemory::release_retired() {
  std::vector<void*> retired;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    retired.swap(retired_);
  }
  // Device::release waits for work still using them.
  for (void* p : retired) device_->release(p);
}

}  // namespace kolo
