// Reduction kernels on the GPU: the dtype x op table of
// collectives/reduce_kernels.h for device memory, bit for bit the same
// results, so ranks that reduce on the GPU and ranks that reduce on the CPU
// agree. The header names no CUDA type, so code built without CUDA can
// include it; without --config=cuda the library is empty and nothing may
// call these.
#pragma once

#include <cstddef>

#include "collectives/dtype.h"

namespace kolo {
namespace cuda {

// Enqueues out[i] = a[i] OP b[i] for i < count on `stream` (a cudaStream_t;
// nullptr is the legacy default stream) and returns at once. out may alias
// a or b. kAvg enqueues the sum (the division comes once, from
// enqueue_divide). Returns 0 or the cudaError_t of the launch.
int enqueue_reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count, void* stream);

// buf[i] = buf[i] / divisor, as collectives/reduce_kernels.cc's finalize
// kernels do.
int enqueue_divide(DataType dtype, void* buf, size_t count, int divisor, void* stream);

// out[i] = in[i] * factor, as collectives/elementwise.h's scale_copy
// computes it; out may be in.
int enqueue_scale(DataType dtype, void* out, const void* in, size_t count, double factor, void* stream);

// Loads every kernel above on the current device (its module and what a
// launch needs: attributes, occupancy) now rather than at its first launch.
// Returns 0 or the cudaError_t.
int load_kernels();

}  // namespace cuda
}  // namespace kolo
