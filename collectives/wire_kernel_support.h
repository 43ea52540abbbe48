// What the wire formats' kernels share (wire_kernels.cc includes it): the
// x86 kernel attributes, the choice among hand-written kernels, a block's
// largest finite magnitude, its scale, and 32 codes stored as bytes.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "collectives/simd.h"
#include "collectives/wire_kernels.h"

// GCC 12's AVX-512 headers start some intrinsics from an undefined vector,
// which -Wmaybe-uninitialized reports at every use (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kolo {
namespace wire {

inline uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

#if defined(__x86_64__)
#define KOLO_WIRE_X86 1
// The AVX2 and AVX-512 kernels below give the same bits as the scalar ones
// (the same operations, lane by lane); the scalar code does the tails and
// runs where the CPU has neither.
#define KOLO_AVX2 __attribute__((target("avx2,f16c")))
#define KOLO_AVX512 __attribute__((target("avx2,f16c,avx512f,avx512bw,avx512dq,avx512vl")))
#else
#define KOLO_WIRE_X86 0
#endif

// The hand-written kernel in use over the head of a block: how many
// elements it did (whole vectors); the scalar code does the rest.
template <typename Avx512, typename Avx2>
inline size_t vector_head(Avx512 avx512, Avx2 avx2) {
  switch (wire_kernels()) {
    case WireKernels::kAvx512: return avx512();
    case WireKernels::kAvx2: return avx2();
    case WireKernels::kScalar: break;
  }
  return 0;
}

// The largest finite magnitude of a block, NaN and Inf left out.
inline float finite_amax_from(const float* v, size_t from, size_t n, float amax) {
  for (size_t i = from; i < n; ++i) {
    const float a = std::fabs(v[i]);
    amax = (a <= FLT_MAX && a > amax) ? a : amax;
  }
  return amax;
}
#if KOLO_WIRE_X86
KOLO_AVX2 inline float finite_amax_avx2(const float* v, size_t n) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 largest = _mm256_set1_ps(FLT_MAX);
  __m256 amax = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_and_ps(_mm256_loadu_ps(v + i), abs_mask);
    a = _mm256_and_ps(a, _mm256_cmp_ps(a, largest, _CMP_LE_OQ));  // NaN and Inf count as 0
    amax = _mm256_max_ps(amax, a);
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, amax);
  float m = 0;
  for (float x : lanes) m = x > m ? x : m;
  return finite_amax_from(v, i, n, m);
}
KOLO_AVX512 inline float finite_amax_avx512(const float* v, size_t n) {
  const __m512 largest = _mm512_set1_ps(FLT_MAX);
  __m512 amax = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(v + i));
    amax = _mm512_mask_max_ps(amax, _mm512_cmp_ps_mask(a, largest, _CMP_LE_OQ), amax, a);  // NaN and Inf left out
  }
  float lanes[16];
  _mm512_storeu_ps(lanes, amax);
  float m = 0;
  for (float x : lanes) m = x > m ? x : m;
  return finite_amax_from(v, i, n, m);
}
#endif
inline float finite_amax(const float* v, size_t n) {
#if KOLO_WIRE_X86
  switch (wire_kernels()) {
    case WireKernels::kAvx512: return finite_amax_avx512(v, n);
    case WireKernels::kAvx2: return finite_amax_avx2(v, n);
    case WireKernels::kScalar: break;
  }
#endif
  return finite_amax_from(v, 0, n, 0);
}

#if KOLO_WIRE_X86
// 32 lanes of codes (0..255 or -128..127, in four vectors of 8 int32) to 32
// bytes in order.
KOLO_AVX2 inline void store_bytes(const __m256i c[4], bool is_signed, void* out) {
  __m256i bytes;
  if (is_signed) {
    bytes = _mm256_packs_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3]));
  } else {
    bytes = _mm256_packus_epi16(_mm256_packus_epi32(c[0], c[1]), _mm256_packus_epi32(c[2], c[3]));
  }
  bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(static_cast<__m256i*>(out), bytes);
}
#endif

// The factor that maps a block's largest magnitude `amax` to `qmax`, and
// the scale that maps codes back. Where the factor would overflow float (a
// block of magnitudes below about 1e-36), the caller multiplies in double.
struct BlockScale {
  float scale;     // stored: decoded = code value * scale
  float factor;    // code value = x * factor
  double factor_wide;
  bool wide;
  float qmax;      // the format's largest code value
};
inline BlockScale block_scale(float amax, float qmax) {
  BlockScale s{0, 0, 0, false, qmax};
  if (amax == 0) return s;
  s.scale = amax / qmax;
  s.factor = qmax / amax;
  if (!(s.factor <= FLT_MAX) || s.scale < FLT_MIN) {
    s.wide = true;
    s.factor_wide = static_cast<double>(qmax) / static_cast<double>(amax);
  }
  return s;
}

// ---- The frames: what every format does around its own conversions. ----

// The formats without a scale (bf16, fp16): 16 bits per element. F gives
// its hand-written kernels for the head of a block (encode_avx512/avx2(v, n,
// out), decode_avx512/avx2(in, n, v): how many elements they did) and its
// scalar conversion for the rest (to_code, from_code).
template <typename F>
struct Unscaled {
  static constexpr bool kScaled = false;
  static void encode(const float* v, size_t n, unsigned char* out) {
    uint16_t* o = reinterpret_cast<uint16_t*>(out);
    size_t i = 0;
#if KOLO_WIRE_X86
    i = vector_head([&] { return F::encode_avx512(v, n, o); }, [&] { return F::encode_avx2(v, n, o); });
#endif
    for (; i < n; ++i) o[i] = F::to_code(v[i]);
  }
  static void decode(const unsigned char* in, size_t n, float* v) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(in);
    size_t i = 0;
#if KOLO_WIRE_X86
    i = vector_head([&] { return F::decode_avx512(h, n, v); }, [&] { return F::decode_avx2(h, n, v); });
#endif
    for (; i < n; ++i) v[i] = F::from_code(h[i]);
  }
};

// The block-scaled formats (int8, fp8): the block's float scale (4 bytes),
// then one Code per element. F gives its largest code value (max_value),
// its hand-written kernels for the head of a block (encode_avx512/avx2(v,
// n, scale, q), decode_avx512/avx2(q, n, scale, v)) and its scalar code for
// the rest (encode_tail(v, from, n, scale, q), decode_tail(q, from, n,
// scale, v)). encode_tail takes the scale by value: the codes it stores
// are bytes, which may alias anything the loop reads through a reference.
template <typename F, typename Code>
struct BlockScaled {
  static constexpr bool kScaled = true;
  static void encode(const float* v, size_t n, unsigned char* out) {
    const BlockScale s = block_scale(finite_amax(v, n), F::max_value());
    std::memcpy(out, &s.scale, 4);
    Code* q = reinterpret_cast<Code*>(out + 4);
    size_t i = 0;
#if KOLO_WIRE_X86
    // The kernels multiply in float: a block that needs double (wide) is
    // the scalar code's.
    if (!s.wide) {
      i = vector_head([&] { return F::encode_avx512(v, n, s, q); }, [&] { return F::encode_avx2(v, n, s, q); });
    }
#endif
    F::encode_tail(v, i, n, s, q);
  }
  static void decode(const unsigned char* in, size_t n, float* v) {
    float scale;
    std::memcpy(&scale, in, 4);
    const Code* q = reinterpret_cast<const Code*>(in + 4);
    size_t i = 0;
#if KOLO_WIRE_X86
    i = vector_head([&] { return F::decode_avx512(q, n, scale, v); }, [&] { return F::decode_avx2(q, n, scale, v); });
#endif
    F::decode_tail(q, i, n, scale, v);
  }
};

}  // namespace wire
}  // namespace kolo
