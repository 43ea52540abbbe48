// What the kernel files (reduce_kernels.cc, wire_kernels.cc) share to run
// vectorised: the clones GCC makes of a plain loop, the CPU checks for the
// hand-written AVX2 and AVX-512 code, and bf16 rounding eight lanes at a
// time.
#pragma once

#include <cstdint>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

// A plain loop compiled twice, for x86-64-v3 (AVX2, F16C) and the baseline,
// the one to run picked at load time. Not under the sanitizers, whose
// instrumentation does not take target clones.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define KOLO_MULTIVERSION __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define KOLO_MULTIVERSION
#endif

namespace kolo {

#if defined(__x86_64__)
inline bool cpu_has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

inline bool cpu_has_avx2_f16c() {
  static const bool yes = cpu_has_avx2() && __builtin_cpu_supports("f16c");
  return yes;
}

// AVX-512 as x86-64-v4 has it (F, BW, DQ, VL): masks in place of blends,
// and conversions that narrow 16 lanes at once.
inline bool cpu_has_avx512() {
  static const bool yes = cpu_has_avx2_f16c() && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vl");
  return yes;
}

// float_to_bf16 (half.h) on eight floats given as their bits: add 0x7fff
// plus the lowest kept bit (round to nearest even), keep NaNs quiet; the
// eight bf16 in order.
__attribute__((target("avx2"))) inline __m128i floats_to_bf16_avx2(__m256i bits) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
  const __m256i is_nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
  const __m256i result = _mm256_blendv_epi8(rounded, nan, is_nan);
  // 8 x 32-bit -> 8 x 16-bit: pack within lanes, then gather the halves.
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(result, result), 0xd8));
}
#endif

}  // namespace kolo
