// IEEE binary16 and bfloat16 stored as raw 16-bit patterns, converted to and
// from float with round-to-nearest-even. Reductions on these types compute in
// float and round once per operation.
#pragma once

#include <cstdint>
#include <cstring>

namespace kolo {

inline float bf16_to_float(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // keep NaN a (quiet) NaN
  }
  // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// GCC 12 provides _Float16 on x86-64; its conversions are IEEE
// round-to-nearest-even and compile to F16C instructions where available.
inline float fp16_to_float(uint16_t h) {
  _Float16 v;
  std::memcpy(&v, &h, sizeof(v));
  return static_cast<float>(v);
}

inline uint16_t float_to_fp16(float f) {
  _Float16 v = static_cast<_Float16>(f);
  uint16_t h;
  std::memcpy(&h, &v, sizeof(h));
  return h;
}

}  // namespace kolo
