// The 16-bit wire formats: a block of floats to bf16 or fp16 codes and back
// (no scale), scalar and AVX2/AVX-512 giving the same bits.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "collectives/half.h"

#include "collectives/wire_kernel_support.h"

namespace kolo {
namespace wire {

struct Bf16Format : Unscaled<Bf16Format> {
  static uint16_t to_code(float x) { return float_to_bf16(x); }
  static float from_code(uint16_t c) { return bf16_to_float(c); }
#if KOLO_WIRE_X86
  KOLO_AVX2 static size_t encode_avx2(const float* v, size_t n, uint16_t* o) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i),
                       floats_to_bf16_avx2(_mm256_castps_si256(_mm256_loadu_ps(v + i))));
    }
    return i;
  }
  KOLO_AVX2 static size_t decode_avx2(const uint16_t* h, size_t n, float* v) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
      _mm256_storeu_ps(v + i, _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)));
    }
    return i;
  }
  // floats_to_bf16_avx2's rounding, sixteen lanes at a time.
  KOLO_AVX512 static size_t encode_avx512(const float* v, size_t n, uint16_t* o) {
    const __m512i one = _mm512_set1_epi32(1), half_less = _mm512_set1_epi32(0x7fff);
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), infinity = _mm512_set1_epi32(0x7f800000);
    const __m512i quiet = _mm512_set1_epi32(0x40);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m512i bits = _mm512_castps_si512(_mm512_loadu_ps(v + i));
      const __m512i high = _mm512_srli_epi32(bits, 16);
      const __m512i rounded = _mm512_srli_epi32(
          _mm512_add_epi32(bits, _mm512_add_epi32(half_less, _mm512_and_si512(high, one))), 16);
      const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(bits, abs_mask), infinity);
      const __m512i result = _mm512_mask_or_epi32(rounded, nan, high, quiet);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + i), _mm512_cvtepi32_epi16(result));
    }
    return i;
  }
  KOLO_AVX512 static size_t decode_avx512(const uint16_t* h, size_t n, float* v) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m512i x = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i)));
      _mm512_storeu_ps(v + i, _mm512_castsi512_ps(_mm512_slli_epi32(x, 16)));
    }
    return i;
  }
#endif
};

struct Fp16Format : Unscaled<Fp16Format> {
  static uint16_t to_code(float x) { return float_to_fp16(x); }
  static float from_code(uint16_t c) { return fp16_to_float(c); }
#if KOLO_WIRE_X86
  // F16C: round to nearest even, as the _Float16 conversions.
  KOLO_AVX2 static size_t encode_avx2(const float* v, size_t n, uint16_t* o) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i), _mm256_cvtps_ph(_mm256_loadu_ps(v + i), _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
  }
  KOLO_AVX2 static size_t decode_avx2(const uint16_t* h, size_t n, float* v) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(v + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
    }
    return i;
  }
  KOLO_AVX512 static size_t encode_avx512(const float* v, size_t n, uint16_t* o) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + i),
                          _mm512_cvtps_ph(_mm512_loadu_ps(v + i), _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
  }
  KOLO_AVX512 static size_t decode_avx512(const uint16_t* h, size_t n, float* v) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      _mm512_storeu_ps(v + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
    }
    return i;
  }
#endif
};

}  // namespace wire
}  // namespace kolo
