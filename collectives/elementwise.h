// Element-wise helpers the runtime engine needs around a collective: scaling
// (Horovod's prescale/postscale factors) and filling a buffer with an
// operator's identity (what a rank that has joined contributes).
#pragma once

#include <cstddef>

#include "collectives/dtype.h"

namespace kolo {

// out[i] = in[i] * factor, computed in double and rounded back to the type
// (to nearest, ties to even; integers saturate at their range). out may be in.
void scale_copy(DataType dtype, void* out, const void* in, size_t count, double factor);

// buf[i] = identity of op: 0 for sum and average, 1 for product, the largest
// value (or +inf) for min, the smallest (or -inf) for max.
void fill_identity(DataType dtype, ReduceOp op, void* buf, size_t count);

}  // namespace kolo
