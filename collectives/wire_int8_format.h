// The int8 wire format: a block's scale (4 bytes) and one code per float,
// -126..126 for values, 127/-127 for +-Inf, -128 for NaN.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "collectives/wire_kernel_support.h"

namespace kolo {
namespace wire {

struct Int8Format : BlockScaled<Int8Format, int8_t> {
  static constexpr float kMax = 126;
  static float max_value() { return kMax; }
  static void encode_tail(const float* v, size_t i, size_t n, BlockScale s, int8_t* q) {
    for (; i < n; ++i) {
      const float x = s.wide ? static_cast<float>(static_cast<double>(v[i]) * s.factor_wide) : v[i] * s.factor;
      const uint32_t b = bits_of(v[i]);
      const bool nan = (b & 0x7fffffffu) > 0x7f800000u;
      const bool inf = (b & 0x7fffffffu) == 0x7f800000u;
      const float r = std::min(kMax, std::max(-kMax, std::nearbyint((nan || inf) ? 0.0f : x)));
      const int8_t special = nan ? int8_t{-128} : ((b >> 31) ? int8_t{-127} : int8_t{127});
      q[i] = (nan || inf) ? special : static_cast<int8_t>(r);
    }
  }
  static void decode_tail(const int8_t* q, size_t i, size_t n, float scale, float* v) {
    for (; i < n; ++i) {
      const int c = q[i];
      const float special = c == 127 ? INFINITY : (c == -127 ? -INFINITY : NAN);
      v[i] = (c >= -126 && c <= 126) ? static_cast<float>(c) * scale : special;
    }
  }
#if KOLO_WIRE_X86
  KOLO_AVX2 static size_t encode_avx2(const float* v, size_t n, const BlockScale& s, int8_t* q) {
    const __m256 f = _mm256_set1_ps(s.factor), hi = _mm256_set1_ps(kMax), lo = _mm256_set1_ps(-kMax);
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), infinity = _mm256_set1_epi32(0x7f800000);
    const __m256i plus_inf = _mm256_set1_epi32(127), minus_inf = _mm256_set1_epi32(-127);
    const __m256i nan_code = _mm256_set1_epi32(-128);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
      __m256i c[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 x = _mm256_loadu_ps(v + i + 8 * k);
        const __m256i b = _mm256_castps_si256(x);
        const __m256i a = _mm256_and_si256(b, abs_mask);
        // max and min give their second operand for NaN: a NaN lane
        // clamps to -126, and is then replaced.
        __m256 r = _mm256_round_ps(_mm256_mul_ps(x, f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
        __m256i code = _mm256_cvtps_epi32(r);
        const __m256i inf_code = _mm256_blendv_epi8(plus_inf, minus_inf, _mm256_srai_epi32(b, 31));
        code = _mm256_blendv_epi8(code, inf_code, _mm256_cmpeq_epi32(a, infinity));
        c[k] = _mm256_blendv_epi8(code, nan_code, _mm256_cmpgt_epi32(a, infinity));
      }
      store_bytes(c, /*is_signed=*/true, q + i);
    }
    return i;
  }
  KOLO_AVX2 static size_t decode_avx2(const int8_t* q, size_t n, float scale, float* v) {
    const __m256 s = _mm256_set1_ps(scale);
    const __m256 plus_inf = _mm256_set1_ps(INFINITY), minus_inf = _mm256_set1_ps(-INFINITY);
    const __m256 nan = _mm256_set1_ps(NAN);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256i c = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i)));
      __m256 x = _mm256_mul_ps(_mm256_cvtepi32_ps(c), s);
      x = _mm256_blendv_ps(x, plus_inf, _mm256_castsi256_ps(_mm256_cmpeq_epi32(c, _mm256_set1_epi32(127))));
      x = _mm256_blendv_ps(x, minus_inf, _mm256_castsi256_ps(_mm256_cmpeq_epi32(c, _mm256_set1_epi32(-127))));
      x = _mm256_blendv_ps(x, nan, _mm256_castsi256_ps(_mm256_cmpeq_epi32(c, _mm256_set1_epi32(-128))));
      _mm256_storeu_ps(v + i, x);
    }
    return i;
  }
  // encode_avx2 with masks, sixteen lanes narrowed to bytes at once.
  KOLO_AVX512 static size_t encode_avx512(const float* v, size_t n, const BlockScale& s, int8_t* q) {
    const __m512 f = _mm512_set1_ps(s.factor), hi = _mm512_set1_ps(kMax), lo = _mm512_set1_ps(-kMax);
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), infinity = _mm512_set1_epi32(0x7f800000);
    const __m512i plus_inf = _mm512_set1_epi32(127), minus_inf = _mm512_set1_epi32(-127);
    const __m512i nan_code = _mm512_set1_epi32(-128);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m512 x = _mm512_loadu_ps(v + i);
      const __m512i b = _mm512_castps_si512(x);
      const __m512i a = _mm512_and_si512(b, abs_mask);
      __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(x, f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);  // a NaN lane clamps to -126, then is replaced
      __m512i code = _mm512_cvtps_epi32(r);
      const __m512i inf_code = _mm512_mask_blend_epi32(_mm512_movepi32_mask(b), plus_inf, minus_inf);
      code = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(a, infinity), code, inf_code);
      code = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(a, infinity), code, nan_code);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtsepi32_epi8(code));
    }
    return i;
  }
  KOLO_AVX512 static size_t decode_avx512(const int8_t* q, size_t n, float scale, float* v) {
    const __m512 s = _mm512_set1_ps(scale);
    const __m512 plus_inf = _mm512_set1_ps(INFINITY), minus_inf = _mm512_set1_ps(-INFINITY);
    const __m512 nan = _mm512_set1_ps(NAN);
    const __m512i plus_inf_code = _mm512_set1_epi32(127), minus_inf_code = _mm512_set1_epi32(-127);
    const __m512i nan_code = _mm512_set1_epi32(-128);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m512i c = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i)));
      __m512 x = _mm512_mul_ps(_mm512_cvtepi32_ps(c), s);
      x = _mm512_mask_mov_ps(x, _mm512_cmpeq_epi32_mask(c, plus_inf_code), plus_inf);
      x = _mm512_mask_mov_ps(x, _mm512_cmpeq_epi32_mask(c, minus_inf_code), minus_inf);
      x = _mm512_mask_mov_ps(x, _mm512_cmpeq_epi32_mask(c, nan_code), nan);
      _mm512_storeu_ps(v + i, x);
    }
    return i;
  }
#endif
};

}  // namespace wire
}  // namespace kolo
