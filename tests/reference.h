// Test inputs whose reductions are exact in every dtype, and the expected
// results computed independently of kolo's kernels.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/dtype.h"

namespace kolo {
namespace ref {

// Small integers: sums over 8 ranks stay below 256, so fp16 and bf16 hold
// them exactly, and products use only {1, 2, -1}. Periodic in i with period
// kPeriod, so large buffers are built and checked a period at a time.
constexpr size_t kPeriod = 69;  // lcm(23, 3)

inline int64_t input_value(int rank, size_t i, ReduceOp op, bool is_signed) {
  if (op == ReduceOp::kProd) {
    int64_t v = static_cast<int64_t>((rank * 7 + i) % 3);  // 0,1,2; period 3 in i
    if (v == 0) return is_signed ? -1 : 1;
    return v;
  }
  int64_t v = static_cast<int64_t>((rank * 5 + i * 11) % 23);
  return is_signed ? v - 11 : v;
}

inline bool is_signed(DataType d) {
  return d == DataType::kInt8 || d == DataType::kInt32 || d == DataType::kInt64 || d == DataType::kFloat16 ||
         d == DataType::kBfloat16 || d == DataType::kFloat32 || d == DataType::kFloat64;
}

// Encodes an exactly representable small integer in dtype d (bit-level for
// the 16-bit floats, without kolo's conversions).
inline void store(DataType d, void* base, size_t i, int64_t v) {
  switch (d) {
    case DataType::kInt8: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); return;
    case DataType::kUint8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); return;
    case DataType::kInt32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); return;
    case DataType::kUint32: static_cast<uint32_t*>(base)[i] = static_cast<uint32_t>(v); return;
    case DataType::kInt64: static_cast<int64_t*>(base)[i] = v; return;
    case DataType::kUint64: static_cast<uint64_t*>(base)[i] = static_cast<uint64_t>(v); return;
    case DataType::kFloat32: static_cast<float*>(base)[i] = static_cast<float>(v); return;
    case DataType::kFloat64: static_cast<double*>(base)[i] = static_cast<double>(v); return;
    case DataType::kBfloat16: {
      float f = static_cast<float>(v);  // exact in bf16 for |v| < 256
      uint32_t b;
      std::memcpy(&b, &f, 4);
      static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(b >> 16);
      return;
    }
    case DataType::kFloat16: {
      // |v| < 2048 is exact: build sign, exponent and mantissa directly.
      uint16_t h = 0;
      if (v != 0) {
        uint64_t a = static_cast<uint64_t>(v < 0 ? -v : v);
        int e = 63 - __builtin_clzll(a);
        uint16_t man = static_cast<uint16_t>((a << (10 - e)) & 0x3ff);
        h = static_cast<uint16_t>(((e + 15) << 10) | man);
        if (v < 0) h |= 0x8000;
      }
      static_cast<uint16_t*>(base)[i] = h;
      return;
    }
  }
}

// Expected result of op over ranks 0..n-1 at element i, for the inputs above.
// Integer sums and products wrap like the dtype; AVG divides the exact sum
// (truncating for integers; for floats the sum is exact, so only the
// quotient is rounded, once, to the dtype).
inline void expected(DataType d, ReduceOp op, int n, size_t i, void* base, size_t at) {
  const bool sgn = is_signed(d);
  int64_t acc = input_value(0, i, op, sgn);
  for (int r = 1; r < n; ++r) {
    int64_t v = input_value(r, i, op, sgn);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += v; break;
      case ReduceOp::kProd: acc *= v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
    }
  }
  if (op != ReduceOp::kAvg) {
    // Wrap to the dtype's width the way the engine's unsigned arithmetic does.
    store(d, base, at, acc);
    return;
  }
  switch (d) {
    case DataType::kInt8: store(d, base, at, static_cast<int8_t>(acc) / n); return;
    case DataType::kUint8: store(d, base, at, static_cast<uint8_t>(acc) / n); return;
    case DataType::kInt32:
    case DataType::kInt64: store(d, base, at, acc / n); return;
    case DataType::kUint32: store(d, base, at, static_cast<uint32_t>(acc) / n); return;
    case DataType::kUint64: store(d, base, at, static_cast<int64_t>(static_cast<uint64_t>(acc) / n)); return;
    case DataType::kFloat32: static_cast<float*>(base)[at] = static_cast<float>(acc) / n; return;
    case DataType::kFloat64: static_cast<double*>(base)[at] = static_cast<double>(acc) / n; return;
    case DataType::kFloat16: {
      _Float16 h = static_cast<_Float16>(static_cast<float>(acc) / static_cast<float>(n));
      std::memcpy(static_cast<uint16_t*>(base) + at, &h, 2);
      return;
    }
    case DataType::kBfloat16: {
      // Round the float quotient to nearest even bf16 by inspecting the bits.
      float q = static_cast<float>(acc) / static_cast<float>(n);
      uint32_t b;
      std::memcpy(&b, &q, 4);
      uint32_t upper = b >> 16, lower = b & 0xffff;
      if (lower > 0x8000 || (lower == 0x8000 && (upper & 1))) ++upper;
      static_cast<uint16_t*>(base)[at] = static_cast<uint16_t>(upper);
      return;
    }
  }
}

// Whole buffers of the above, built a period at a time: rank `rank`'s
// input of `count` elements, and the reduction over ranks 0..n-1 of theirs.
inline std::vector<unsigned char> input_buffer(DataType d, ReduceOp op, int rank, size_t count) {
  const size_t es = dtype_size(d);
  std::vector<unsigned char> b(count * es);
  const size_t head = count < kPeriod ? count : kPeriod;
  for (size_t i = 0; i < head; ++i) store(d, b.data(), i, input_value(rank, i, op, is_signed(d)));
  for (size_t i = head; i < count; i += kPeriod) {
    std::memcpy(b.data() + i * es, b.data(), (count - i < kPeriod ? count - i : kPeriod) * es);
  }
  return b;
}

inline std::vector<unsigned char> expected_buffer(DataType d, ReduceOp op, int n, size_t count) {
  const size_t es = dtype_size(d);
  std::vector<unsigned char> b(count * es);
  const size_t head = count < kPeriod ? count : kPeriod;
  for (size_t i = 0; i < head; ++i) expected(d, op, n, i, b.data(), i);
  for (size_t i = head; i < count; i += kPeriod) {
    std::memcpy(b.data() + i * es, b.data(), (count - i < kPeriod ? count - i : kPeriod) * es);
  }
  return b;
}

}  // namespace ref
}  // namespace kolo
