// The OCP fp8 wire formats (e4m3, e5m2): a block's scale (4 bytes) and one
// code per float, rounded to nearest even from the formats' definition.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "collectives/wire_kernel_support.h"

namespace kolo {
namespace wire {

// An OCP fp8 format with `M` mantissa bits and exponent bias `B`; codes
// above kMaxCode (in magnitude) are kInfCode and NaN.
template <int M, int B, uint8_t MaxCode, uint8_t InfCode, uint8_t NanCode>
struct Fp8Format : BlockScaled<Fp8Format<M, B, MaxCode, InfCode, NanCode>, uint8_t> {
  static constexpr uint8_t kMaxCode = MaxCode;
  static constexpr uint8_t kInfCode = InfCode;
  static constexpr uint8_t kNanCode = NanCode;

  // The value of magnitude code c (0..0x7f), computed from the definition.
  static float magnitude(uint8_t c) {
    const int e = c >> M, f = c & ((1 << M) - 1);
    if (e == 0) return std::ldexp(static_cast<float>(f), 1 - B - M);
    return std::ldexp(1.0f + static_cast<float>(f) / (1 << M), e - B);
  }
  static float max_value() { return magnitude(MaxCode); }

  struct Table {
    float value[256];
    Table() {
      for (int c = 0; c < 256; ++c) {
        const uint8_t m = static_cast<uint8_t>(c & 0x7f);
        float v = m > InfCode ? NAN : (m == InfCode ? INFINITY : magnitude(m));
        value[c] = (c & 0x80) ? -v : v;
      }
    }
  };
  static const Table& table() {
    static const Table t;
    return t;
  }

  // Round a magnitude already scaled into range to the nearest code (ties
  // to even), saturating at MaxCode.
  static uint8_t round_magnitude(float a) {
    constexpr float kMinNormal = 1.0f / (1 << (B - 1));          // 2^(1-B)
    constexpr float kSubnormalSteps = float(1 << (B - 1 + M));   // 2^(B-1+M)
    const uint32_t sub = static_cast<uint32_t>(std::nearbyint(a * kSubnormalSteps));
    constexpr int kShift = 23 - M;
    uint32_t b = bits_of(a);
    b += (1u << (kShift - 1)) - 1 + ((b >> kShift) & 1u);
    const int e = static_cast<int>(b >> 23) - 127 + B;
    const uint32_t normal = (static_cast<uint32_t>(std::max(e, 0)) << M) | ((b >> kShift) & ((1u << M) - 1));
    const uint32_t code = a < kMinNormal ? sub : normal;
    return static_cast<uint8_t>(std::min<uint32_t>(code, MaxCode));
  }

  static void encode_tail(const float* v, size_t i, size_t n, BlockScale s, uint8_t* q) {
    const float qmax = s.qmax;
    for (; i < n; ++i) {
      const float x = s.wide ? static_cast<float>(std::fabs(static_cast<double>(v[i])) * s.factor_wide)
                             : std::fabs(v[i]) * s.factor;
      const uint32_t b = bits_of(v[i]);
      const uint32_t sign = (b >> 24) & 0x80u;
      const bool nan = (b & 0x7fffffffu) > 0x7f800000u;
      const bool inf = (b & 0x7fffffffu) == 0x7f800000u;
      const uint8_t rounded = round_magnitude((nan || inf) ? 0.0f : std::min(x, qmax));
      const uint8_t m = nan ? NanCode : (inf ? InfCode : rounded);
      q[i] = static_cast<uint8_t>(m | sign);
    }
  }
  static void decode_tail(const uint8_t* q, size_t i, size_t n, float scale, float* v) {
    const float* value = table().value;
    for (; i < n; ++i) {
      const float m = value[q[i]];
      v[i] = (q[i] & 0x7f) >= InfCode ? m : m * scale;
    }
  }
#if KOLO_WIRE_X86
  // round_magnitude eight lanes at a time, in integer and float SIMD.
  KOLO_AVX2 static size_t encode_avx2(const float* v, size_t n, const BlockScale& s, uint8_t* q) {
    constexpr int kShift = 23 - M;
    const __m256 f = _mm256_set1_ps(s.factor), top = _mm256_set1_ps(s.qmax);
    const __m256 abs_ps = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 min_normal = _mm256_set1_ps(1.0f / (1 << (B - 1)));
    const __m256 subnormal_steps = _mm256_set1_ps(float(1 << (B - 1 + M)));
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), infinity = _mm256_set1_epi32(0x7f800000);
    const __m256i half_less = _mm256_set1_epi32((1 << (kShift - 1)) - 1), one = _mm256_set1_epi32(1);
    const __m256i rebias = _mm256_set1_epi32(127 - B), zero = _mm256_setzero_si256();
    const __m256i mantissa = _mm256_set1_epi32((1 << M) - 1), max_code = _mm256_set1_epi32(MaxCode);
    const __m256i inf_code = _mm256_set1_epi32(InfCode), nan_code = _mm256_set1_epi32(NanCode);
    const __m256i sign_bit = _mm256_set1_epi32(0x80);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
      __m256i c[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 x = _mm256_loadu_ps(v + i + 8 * k);
        const __m256i b = _mm256_castps_si256(x);
        const __m256i a_bits = _mm256_and_si256(b, abs_mask);
        // min gives its second operand for NaN: such lanes are replaced.
        const __m256 a = _mm256_min_ps(_mm256_mul_ps(_mm256_and_ps(x, abs_ps), f), top);
        const __m256i sub = _mm256_cvtps_epi32(_mm256_mul_ps(a, subnormal_steps));
        __m256i r = _mm256_castps_si256(a);
        r = _mm256_add_epi32(r, _mm256_add_epi32(half_less, _mm256_and_si256(_mm256_srli_epi32(r, kShift), one)));
        const __m256i e = _mm256_max_epi32(_mm256_sub_epi32(_mm256_srli_epi32(r, 23), rebias), zero);
        const __m256i normal = _mm256_or_si256(_mm256_slli_epi32(e, M),
                                               _mm256_and_si256(_mm256_srli_epi32(r, kShift), mantissa));
        const __m256i is_sub = _mm256_castps_si256(_mm256_cmp_ps(a, min_normal, _CMP_LT_OQ));
        __m256i code = _mm256_min_epi32(_mm256_blendv_epi8(normal, sub, is_sub), max_code);
        code = _mm256_blendv_epi8(code, inf_code, _mm256_cmpeq_epi32(a_bits, infinity));
        code = _mm256_blendv_epi8(code, nan_code, _mm256_cmpgt_epi32(a_bits, infinity));
        c[k] = _mm256_or_si256(code, _mm256_and_si256(_mm256_srli_epi32(b, 24), sign_bit));
      }
      store_bytes(c, /*is_signed=*/false, q + i);
    }
    return i;
  }
  // A code's magnitude is its bits moved into a float's exponent and
  // mantissa, times 2^(127-B) (exact); subnormal codes (exponent 0) are
  // their mantissa times 2^(1-B-M), so no float denormal is involved.
  KOLO_AVX2 static size_t decode_avx2(const uint8_t* q, size_t n, float scale, float* v) {
    const __m256 s = _mm256_set1_ps(scale);
    const __m256 rebias = _mm256_set1_ps(std::ldexp(1.0f, 127 - B));
    const __m256 sub_step = _mm256_set1_ps(std::ldexp(1.0f, 1 - B - M));
    const __m256 inf = _mm256_set1_ps(INFINITY), nan = _mm256_set1_ps(NAN);
    const __m256i low7 = _mm256_set1_epi32(0x7f), sign = _mm256_set1_epi32(0x80);
    const __m256i inf_code = _mm256_set1_epi32(InfCode), zero = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i)));
      const __m256i m = _mm256_and_si256(c, low7);
      const __m256 normal = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(m, 23 - M)), rebias);
      const __m256 subnormal = _mm256_mul_ps(_mm256_cvtepi32_ps(m), sub_step);
      const __m256i exponent_zero = _mm256_cmpeq_epi32(_mm256_srli_epi32(m, M), zero);
      __m256 x = _mm256_mul_ps(_mm256_blendv_ps(normal, subnormal, _mm256_castsi256_ps(exponent_zero)), s);
      x = _mm256_blendv_ps(x, inf, _mm256_castsi256_ps(_mm256_cmpeq_epi32(m, inf_code)));
      x = _mm256_blendv_ps(x, nan, _mm256_castsi256_ps(_mm256_cmpgt_epi32(m, inf_code)));
      x = _mm256_or_ps(x, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(c, sign), 24)));
      _mm256_storeu_ps(v + i, x);
    }
    return i;
  }
  // The AVX2 kernels with masks, sixteen lanes at a time.
  KOLO_AVX512 static size_t encode_avx512(const float* v, size_t n, const BlockScale& s, uint8_t* q) {
    constexpr int kShift = 23 - M;
    const __m512 f = _mm512_set1_ps(s.factor), top = _mm512_set1_ps(s.qmax);
    const __m512 min_normal = _mm512_set1_ps(1.0f / (1 << (B - 1)));
    const __m512 subnormal_steps = _mm512_set1_ps(float(1 << (B - 1 + M)));
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), infinity = _mm512_set1_epi32(0x7f800000);
    const __m512i half_less = _mm512_set1_epi32((1 << (kShift - 1)) - 1), one = _mm512_set1_epi32(1);
    const __m512i rebias = _mm512_set1_epi32(127 - B), zero = _mm512_setzero_si512();
    const __m512i mantissa = _mm512_set1_epi32((1 << M) - 1), max_code = _mm512_set1_epi32(MaxCode);
    const __m512i inf_code = _mm512_set1_epi32(InfCode), nan_code = _mm512_set1_epi32(NanCode);
    const __m512i sign_bit = _mm512_set1_epi32(0x80);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m512 x = _mm512_loadu_ps(v + i);
      const __m512i b = _mm512_castps_si512(x);
      const __m512i a_bits = _mm512_and_si512(b, abs_mask);
      const __m512 a = _mm512_min_ps(_mm512_mul_ps(_mm512_abs_ps(x), f), top);  // NaN lanes: replaced below
      const __m512i sub = _mm512_cvtps_epi32(_mm512_mul_ps(a, subnormal_steps));
      __m512i r = _mm512_castps_si512(a);
      r = _mm512_add_epi32(r, _mm512_add_epi32(half_less, _mm512_and_si512(_mm512_srli_epi32(r, kShift), one)));
      const __m512i e = _mm512_max_epi32(_mm512_sub_epi32(_mm512_srli_epi32(r, 23), rebias), zero);
      const __m512i normal = _mm512_or_si512(_mm512_slli_epi32(e, M),
                                             _mm512_and_si512(_mm512_srli_epi32(r, kShift), mantissa));
      const __mmask16 is_sub = _mm512_cmp_ps_mask(a, min_normal, _CMP_LT_OQ);
      __m512i code = _mm512_min_epi32(_mm512_mask_blend_epi32(is_sub, normal, sub), max_code);
      code = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(a_bits, infinity), code, inf_code);
      code = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(a_bits, infinity), code, nan_code);
      code = _mm512_or_si512(code, _mm512_and_si512(_mm512_srli_epi32(b, 24), sign_bit));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(code));
    }
    return i;
  }
  KOLO_AVX512 static size_t decode_avx512(const uint8_t* q, size_t n, float scale, float* v) {
    const __m512 s = _mm512_set1_ps(scale);
    const __m512 rebias = _mm512_set1_ps(std::ldexp(1.0f, 127 - B));
    const __m512 sub_step = _mm512_set1_ps(std::ldexp(1.0f, 1 - B - M));
    const __m512 inf = _mm512_set1_ps(INFINITY), nan = _mm512_set1_ps(NAN);
    const __m512i low7 = _mm512_set1_epi32(0x7f), sign = _mm512_set1_epi32(0x80);
    const __m512i inf_code = _mm512_set1_epi32(InfCode), zero = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i)));
      const __m512i m = _mm512_and_si512(c, low7);
      const __m512 normal = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(m, 23 - M)), rebias);
      const __m512 subnormal = _mm512_mul_ps(_mm512_cvtepi32_ps(m), sub_step);
      const __mmask16 exponent_zero = _mm512_cmpeq_epi32_mask(_mm512_srli_epi32(m, M), zero);
      __m512 x = _mm512_mul_ps(_mm512_mask_blend_ps(exponent_zero, normal, subnormal), s);
      x = _mm512_mask_mov_ps(x, _mm512_cmpeq_epi32_mask(m, inf_code), inf);
      x = _mm512_mask_mov_ps(x, _mm512_cmpgt_epi32_mask(m, inf_code), nan);
      x = _mm512_or_ps(x, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_and_si512(c, sign), 24)));
      _mm512_storeu_ps(v + i, x);
    }
    return i;
  }
#endif
};

// e4m3 (FN): 448's code carries Inf, so the largest finite is 416.
using E4M3Format = Fp8Format<3, 7, 0x7d, 0x7e, 0x7f>;
using E5M2Format = Fp8Format<2, 15, 0x7b, 0x7c, 0x7e>;

}  // namespace wire
}  // namespace kolo
