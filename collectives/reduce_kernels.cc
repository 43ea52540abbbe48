#include "collectives/reduce_kernels.h"

#include <cstdint>
#include <type_traits>

#include "collectives/half.h"
#include "collectives/simd.h"

namespace kolo {
namespace {

// Integer sum and product wrap modulo 2^bits (computed unsigned, where
// overflow is defined), as every peer library does.
template <typename T>
using Unsigned = std::make_unsigned_t<T>;

struct Sum {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Unsigned<T>>(a) + static_cast<Unsigned<T>>(b));
    } else {
      return a + b;
    }
  }
};
struct Prod {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      // Promote narrow types so the multiply itself cannot overflow int.
      using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, Unsigned<T>>;
      return static_cast<T>(static_cast<Wide>(static_cast<Unsigned<T>>(a)) *
                            static_cast<Wide>(static_cast<Unsigned<T>>(b)));
    } else {
      return a * b;
    }
  }
};
struct Min {
  template <typename T>
  static T apply(T a, T b) { return b < a ? b : a; }
};
struct Max {
  template <typename T>
  static T apply(T a, T b) { return a < b ? b : a; }
};

template <typename T, typename Op>
KOLO_MULTIVERSION void reduce_native(void* out, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = Op::apply(x[i], y[i]);
}

template <typename Op>
void reduce_fp16_scalar(uint16_t* o, const uint16_t* x, const uint16_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) o[i] = float_to_fp16(Op::apply(fp16_to_float(x[i]), fp16_to_float(y[i])));
}

#if defined(__x86_64__)
// GCC does not vectorize the _Float16 conversions, so the fp16 kernels are
// written with F16C: 8 halves to floats, the op, back with round to nearest
// even. min/max take their operands in the order that makes them behave as
// the scalar code does when a NaN is involved.
template <typename Op>
__attribute__((target("avx2"))) __m256 apply8(__m256 a, __m256 b) {
  if constexpr (std::is_same_v<Op, Sum>) return _mm256_add_ps(a, b);
  if constexpr (std::is_same_v<Op, Prod>) return _mm256_mul_ps(a, b);
  if constexpr (std::is_same_v<Op, Min>) return _mm256_min_ps(b, a);  // b < a ? b : a
  return _mm256_max_ps(b, a);                                          // a < b ? b : a
}

template <typename Op>
__attribute__((target("avx2,f16c"))) void reduce_fp16_f16c(uint16_t* o, const uint16_t* x, const uint16_t* y,
                                                           size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i), _mm256_cvtps_ph(apply8<Op>(a, b), _MM_FROUND_TO_NEAREST_INT));
  }
  reduce_fp16_scalar<Op>(o + i, x + i, y + i, n - i);
}

#endif

template <typename Op>
void reduce_fp16(void* out, const void* a, const void* b, size_t n) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
#if defined(__x86_64__)
  if (cpu_has_avx2_f16c()) return reduce_fp16_f16c<Op>(o, x, y, n);
#endif
  reduce_fp16_scalar<Op>(o, x, y, n);
}

template <typename Op>
void reduce_bf16_scalar(uint16_t* o, const uint16_t* x, const uint16_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) o[i] = float_to_bf16(Op::apply(bf16_to_float(x[i]), bf16_to_float(y[i])));
}

#if defined(__x86_64__)
// bf16 by hand as well: the compiler's version of float_to_bf16 is correct
// but four times slower than a plain float32 reduction. Same rounding as
// the scalar code (floats_to_bf16_avx2).
template <typename Op>
__attribute__((target("avx2"))) void reduce_bf16_avx2(uint16_t* o, const uint16_t* x, const uint16_t* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))), 16));
    __m256 b = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i))), 16));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i), floats_to_bf16_avx2(_mm256_castps_si256(apply8<Op>(a, b))));
  }
  reduce_bf16_scalar<Op>(o + i, x + i, y + i, n - i);
}
#endif

template <typename Op>
void reduce_bf16(void* out, const void* a, const void* b, size_t n) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
#if defined(__x86_64__)
  if (cpu_has_avx2()) return reduce_bf16_avx2<Op>(o, x, y, n);
#endif
  reduce_bf16_scalar<Op>(o, x, y, n);
}

template <typename T>
void divide_native(void* buf, size_t n, int divisor) {
  // Divide in a type wide enough for the divisor: a world of 300 ranks does
  // not fit in int8.
  using Wide = std::conditional_t<std::is_floating_point_v<T>, T,
                                  std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;
  T* p = static_cast<T*>(buf);
  const Wide d = static_cast<Wide>(divisor);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<Wide>(p[i]) / d);
}

void divide_fp16(void* buf, size_t n, int divisor) {
  uint16_t* p = static_cast<uint16_t*>(buf);
  const float d = static_cast<float>(divisor);
  for (size_t i = 0; i < n; ++i) p[i] = float_to_fp16(fp16_to_float(p[i]) / d);
}

void divide_bf16(void* buf, size_t n, int divisor) {
  uint16_t* p = static_cast<uint16_t*>(buf);
  const float d = static_cast<float>(divisor);
  for (size_t i = 0; i < n; ++i) p[i] = float_to_bf16(bf16_to_float(p[i]) / d);
}

template <typename Op>
ReduceFn kernel_for(DataType d) {
  switch (d) {
    case DataType::kInt8: return &reduce_native<int8_t, Op>;
    case DataType::kUint8: return &reduce_native<uint8_t, Op>;
    case DataType::kInt32: return &reduce_native<int32_t, Op>;
    case DataType::kUint32: return &reduce_native<uint32_t, Op>;
    case DataType::kInt64: return &reduce_native<int64_t, Op>;
    case DataType::kUint64: return &reduce_native<uint64_t, Op>;
    case DataType::kFloat16: return &reduce_fp16<Op>;
    case DataType::kBfloat16: return &reduce_bf16<Op>;
    case DataType::kFloat32: return &reduce_native<float, Op>;
    case DataType::kFloat64: return &reduce_native<double, Op>;
  }
  return nullptr;
}

}  // namespace

ReduceFn reduce_kernel(DataType dtype, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return kernel_for<Sum>(dtype);
    case ReduceOp::kProd: return kernel_for<Prod>(dtype);
    case ReduceOp::kMin: return kernel_for<Min>(dtype);
    case ReduceOp::kMax: return kernel_for<Max>(dtype);
  }
  return nullptr;
}

FinalizeFn finalize_kernel(DataType dtype, ReduceOp op) {
  if (op != ReduceOp::kAvg) return nullptr;
  switch (dtype) {
    case DataType::kInt8: return &divide_native<int8_t>;
    case DataType::kUint8: return &divide_native<uint8_t>;
    case DataType::kInt32: return &divide_native<int32_t>;
    case DataType::kUint32: return &divide_native<uint32_t>;
    case DataType::kInt64: return &divide_native<int64_t>;
    case DataType::kUint64: return &divide_native<uint64_t>;
    case DataType::kFloat16: return &divide_fp16;
    case DataType::kBfloat16: return &divide_bf16;
    case DataType::kFloat32: return &divide_native<float>;
    case DataType::kFloat64: return &divide_native<double>;
  }
  return nullptr;
}

}  // namespace kolo
