// The wire formats' kernels (wire_format.h names the formats): a compressed
// reduction's hop, decoding, and the choice among hand-written kernels. Their
// own target, apart from the formats' names and sizes, which the parsers of
// what comes off the wire use without any kernel.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/dtype.h"
#include "collectives/wire_format.h"

namespace kolo {

// One hop of a compressed reduction, over `count` elements:
//   sum      = decode(received) + local + residual   (absent terms are 0)
//   value    = sum / divisor                          (an average's last hop)
//   encoded  = encode(value)
//   residual = sum - decode(encoded) * divisor        (error feedback)
//   decoded  = decode(encoded), as dtype
// received, local, residual and decoded may be null. local and decoded are
// of `dtype` (float32, float16 or bfloat16) and may alias each other.
struct WireHop {
  const unsigned char* received = nullptr;
  const void* local = nullptr;
  float* residual = nullptr;
  int divisor = 1;
  unsigned char* encoded = nullptr;
  void* decoded = nullptr;
  DataType dtype = DataType::kFloat32;
  size_t count = 0;
};
void wire_hop(WireFormat format, const WireHop& hop);

// out (count elements of dtype) = decode(in).
void wire_decode(WireFormat format, const unsigned char* in, size_t count, DataType dtype, void* out);

// Which hand-written kernels encode and decode: the best this CPU runs
// (AVX-512, else AVX2 with F16C, else scalar), or a lower level where set.
// Every level gives the same bits; setting one is for the tests and the
// bench, which compare them.
enum class WireKernels : int { kScalar = 0, kAvx2, kAvx512 };
const char* wire_kernels_name(WireKernels kernels);  // "scalar", "avx2", "avx512"
WireKernels wire_kernels_supported();
WireKernels wire_kernels();
// Uses `kernels`, or the best this CPU runs where that is lower; returns
// the level now in use. Process-wide: not while collectives run.
WireKernels set_wire_kernels(WireKernels kernels);

// The float value of each 8-bit code of an fp8 format before its block's
// scale (for tests and docs): NaN for the NaN codes, +-Inf for the Inf ones.
float fp8_code_value(WireFormat format, uint8_t code);

}  // namespace kolo
