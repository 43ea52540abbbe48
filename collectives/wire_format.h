// Wire formats: what a compressed allreduce sends in place of its float
// elements (compressed_ring.h). Every hop decodes what it received, adds its
// own contribution in float32, and encodes the sum once; the allgather
// phase forwards the owner's final encoded bytes unchanged, so every rank
// decodes the same bytes into bit-identical results.
//
//   bf16      2 bytes  bfloat16, round to nearest even (float32's range)
//   fp16      2 bytes  IEEE binary16, round to nearest even; beyond
//                      +-65504 a partial sum becomes Inf, as a cast does
//   fp8_e4m3  1 byte   OCP e4m3 (FN), scaled per block of kWireBlock
//                      elements so that the block's largest magnitude maps
//                      to 416; the code of 448 carries +-Inf
//   fp8_e5m2  1 byte   OCP e5m2, scaled per block to 57344 (its own Inf)
//   int8      1 byte   integers -126..126 times a per-block scale
//                      (largest magnitude / 126); 127, -127 and -128 carry
//                      +Inf, -Inf and NaN
//
// The block-scaled formats store each block as its float32 scale followed
// by its codes, so a block of 256 costs 260 bytes (3.94x fewer than
// float32). NaN and Inf pass through every format as they would through
// float32 sums: the scale is taken over the block's finite values.
//
// The encoders are deterministic functions of their input, and decoding is
// one multiplication: a rank that decodes bytes another rank encoded gets
// exactly what the encoder's own rank gets. This header names the formats
// and sizes their messages; wire_kernels.h encodes and decodes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "collectives/dtype.h"

namespace kolo {

enum class WireFormat : int { kNative = 0, kBf16, kFp16, kFp8E4M3, kFp8E5M2, kInt8 };
constexpr int kNumWireFormats = 6;

// Elements per scale in the block-scaled formats. 256 keeps the scale's
// cost at 1.5% of the codes (int8 carries 3.94x fewer bytes than float32,
// against 4x without scales); a smaller block would follow local
// magnitudes more closely at more cost. bench/wire_format_bench measures
// the kernels' speed and one encoding's error.
constexpr size_t kWireBlock = 256;

// "native", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int8".
const char* wire_format_name(WireFormat format);
// Parses those names; false for anything else.
bool parse_wire_format(const std::string& name, WireFormat* format);
inline bool valid_wire_format(int f) { return f >= 0 && f < kNumWireFormats; }

// Whether `format` can carry a reduction of dtype by op: float32, float16
// or bfloat16 sums and averages.
bool wire_format_carries(DataType dtype, ReduceOp op);
// Why `format` cannot carry that reduction ("wire format bf16 carries
// float32, float16 and bfloat16 sums and averages, not int32 max"); ""
// when it can, or for kNative.
std::string wire_format_refusal(WireFormat format, DataType dtype, ReduceOp op);

// Bytes of `count` encoded elements (a message is encoded on its own: its
// blocks start at its first element).
size_t wire_bytes(WireFormat format, size_t count);
// Bytes per element, without the scales: what the pipeline's segments are
// sized in.
size_t wire_element_bytes(WireFormat format);

}  // namespace kolo
