// Element-wise reduction kernels for every dtype x op, looked up once per
// collective from a table. The loops are written plainly so the compiler
// vectorizes them; each kernel is also compiled for x86-64-v3 (AVX2, F16C)
// and picked at load time where the CPU has it.
#pragma once

#include <cstddef>

#include "collectives/dtype.h"

namespace kolo {

// out[i] = a[i] OP b[i] for i < count. out may alias a or b. For kAvg this
// is the sum; the division happens once, in finalize.
using ReduceFn = void (*)(void* out, const void* a, const void* b, size_t count);

// buf[i] = buf[i] / divisor (integer division for integer types).
using FinalizeFn = void (*)(void* buf, size_t count, int divisor);

ReduceFn reduce_kernel(DataType dtype, ReduceOp op);

// Non-null only for kAvg: what turns a sum into the average.
FinalizeFn finalize_kernel(DataType dtype, ReduceOp op);

}  // namespace kolo
