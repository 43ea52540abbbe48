#include "collectives/memory.h"

#include <cstring>

#include "collectives/reduce_kernels.h"

namespace kolo {

void HostMemory::copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

void HostMemory::reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count) {
  reduce_kernel(dtype, op)(out, a, b, count);
}

void HostMemory::finalize(DataType dtype, ReduceOp op, void* buf, size_t count, int divisor) {
  if (FinalizeFn fin = finalize_kernel(dtype, op)) fin(buf, count, divisor);
}

}  // namespace kolo
