// The ring allreduce in a wire format (wire_format.h): fewer bytes on the
// wire than the elements hold, the sum still accumulated in float32.
//
// Reduce-scatter: step 0 encodes this rank's own chunk; every later hop
// decodes what arrived, adds this rank's elements in float32 and encodes
// the sum once (wire_hop). The chunk's owner encodes the final sum (divided,
// for an average), decodes its own bytes into its result, and the
// allgather phase forwards those bytes unchanged: every rank decodes the
// same bytes, so every rank's result is bit-identical.
//
// Every rank encodes each element exactly once (its own chunk's final
// sum, or its contribution to another's partial sum), so one float32 per
// element holds what its encodings lost: with residuals (error feedback),
// that loss is added into the next call over the same tensor, and the
// residuals of all ranks sum to exactly what the result lacks of the true
// sum (up to float32 rounding of the sums themselves).
#pragma once

#include <vector>

#include "collectives/ring.h"
#include "collectives/wire_format.h"
#include "collectives/wire_kernels.h"

namespace kolo {

// The allreduce of the spans' concatenation (ring_allreduce_spans) with
// `format` on the wire. dtype float32, float16 or bfloat16; op sum or
// average; host memory only. residuals: null, or one float array per span
// of the span's count (the error feedback's state, read and rewritten).
Status ring_allreduce_encoded(const ScheduleContext& ctx, SpanList spans, DataType dtype, ReduceOp op,
                              WireFormat format, const std::vector<float*>* residuals);

}  // namespace kolo
