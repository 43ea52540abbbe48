// Encoding and decoding of one element of any kolo dtype as a double, for
// the benchmark's correctness checks (inputs are small integers, exact in
// every dtype).
#pragma once

#include <cstdint>
#include <cmath>
#include <cstring>

#include "bindings/c/kolo.h"

namespace kolo::bench {

// Names as the flags and reports spell them, indexed by the C enums.
inline constexpr const char* kDtypeNames[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                                              "uint64", "float16", "bfloat16", "float32", "float64"};
inline constexpr const char* kOpNames[] = {"sum", "prod", "min", "max", "avg"};

inline size_t dtype_bytes(kolo_dtype_t d) {
  switch (d) {
    case KOLO_INT8: case KOLO_UINT8: return 1;
    case KOLO_FLOAT16: case KOLO_BFLOAT16: return 2;
    case KOLO_INT32: case KOLO_UINT32: case KOLO_FLOAT32: return 4;
    default: return 8;
  }
}

inline bool is_integer(kolo_dtype_t d) { return d <= KOLO_UINT64; }

inline double decode_half(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? m * (1.0 / (1 << 24)) : (m + 1024.0) * std::ldexp(1.0, e - 25);
  if (e == 31) v = m ? NAN : INFINITY;
  return (h & 0x8000) ? -v : v;
}

inline double get_value(kolo_dtype_t d, const void* base, size_t i) {
  switch (d) {
    case KOLO_INT8: return static_cast<const int8_t*>(base)[i];
    case KOLO_UINT8: return static_cast<const uint8_t*>(base)[i];
    case KOLO_INT32: return static_cast<const int32_t*>(base)[i];
    case KOLO_UINT32: return static_cast<const uint32_t*>(base)[i];
    case KOLO_INT64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case KOLO_UINT64: return static_cast<double>(static_cast<const uint64_t*>(base)[i]);
    case KOLO_FLOAT16: return decode_half(static_cast<const uint16_t*>(base)[i]);
    case KOLO_BFLOAT16: {
      uint32_t b = static_cast<uint32_t>(static_cast<const uint16_t*>(base)[i]) << 16;
      float f;
      std::memcpy(&f, &b, 4);
      return f;
    }
    case KOLO_FLOAT32: return static_cast<const float*>(base)[i];
    case KOLO_FLOAT64: return static_cast<const double*>(base)[i];
  }
  return 0;
}

// Stores a small integer (|v| < 2048), exactly.
inline void set_value(kolo_dtype_t d, void* base, size_t i, int v) {
  switch (d) {
    case KOLO_INT8: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); return;
    case KOLO_UINT8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); return;
    case KOLO_INT32: static_cast<int32_t*>(base)[i] = v; return;
    case KOLO_UINT32: static_cast<uint32_t*>(base)[i] = static_cast<uint32_t>(v); return;
    case KOLO_INT64: static_cast<int64_t*>(base)[i] = v; return;
    case KOLO_UINT64: static_cast<uint64_t*>(base)[i] = static_cast<uint64_t>(v); return;
    case KOLO_FLOAT16: {
      uint16_t h = 0;
      if (v != 0) {
        unsigned a = static_cast<unsigned>(v < 0 ? -v : v);
        int e = 31 - __builtin_clz(a);
        h = static_cast<uint16_t>(((e + 15) << 10) | ((a << (10 - e)) & 0x3ff));
        if (v < 0) h |= 0x8000;
      }
      static_cast<uint16_t*>(base)[i] = h;
      return;
    }
    case KOLO_BFLOAT16: {
      float f = static_cast<float>(v);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(b >> 16);
      return;
    }
    case KOLO_FLOAT32: static_cast<float*>(base)[i] = static_cast<float>(v); return;
    case KOLO_FLOAT64: static_cast<double*>(base)[i] = v; return;
  }
}

}  // namespace kolo::bench
