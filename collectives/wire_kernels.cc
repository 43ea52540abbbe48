// The wire formats' kernels (wire_format.h): a block of floats to codes and
// back, and the hop that fuses decoding, adding and encoding.
#include "collectives/wire_format.h"

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "collectives/half.h"
#include "collectives/simd.h"

// GCC 12's AVX-512 headers start some intrinsics from an undefined vector,
// which -Wmaybe-uninitialized reports at every use (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kolo {
namespace {

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

WireKernels best_kernels() {
#if KOLO_WIRE_X86
  if (cpu_has_avx512()) return WireKernels::kAvx512;
  if (cpu_has_avx2_f16c()) return WireKernels::kAvx2;
#endif
  return WireKernels::kScalar;
}

std::atomic<int> kernels_in_use{static_cast<int>(best_kernels())};

inline WireKernels kernels() { return static_cast<WireKernels>(kernels_in_use.load(std::memory_order_relaxed)); }

// The hand-written kernel in use over the head of a block: how many
// elements it did (whole vectors); the scalar code does the rest.
template <typename Avx512, typename Avx2>
inline size_t vector_head(Avx512 avx512, Avx2 avx2) {
  switch (kernels()) {
    case WireKernels::kAvx512: return avx512();
    case WireKernels::kAvx2: return avx2();
    case WireKernels::kScalar: break;
  }
  return 0;
}

// ---- The caller's element types, read and written as float. ----

template <typename T>
struct Element;
template <>
struct Element<float> {
  static float load(const void* p, size_t i) { return static_cast<const float*>(p)[i]; }
  static void store(void* p, size_t i, float v) { static_cast<float*>(p)[i] = v; }
};
struct Fp16Tag {};
struct Bf16Tag {};
template <>
struct Element<Fp16Tag> {
  static float load(const void* p, size_t i) { return fp16_to_float(static_cast<const uint16_t*>(p)[i]); }
  static void store(void* p, size_t i, float v) { static_cast<uint16_t*>(p)[i] = float_to_fp16(v); }
};
template <>
struct Element<Bf16Tag> {
  static float load(const void* p, size_t i) { return bf16_to_float(static_cast<const uint16_t*>(p)[i]); }
  static void store(void* p, size_t i, float v) { static_cast<uint16_t*>(p)[i] = float_to_bf16(v); }
};

// ---- The formats: a block of at most kWireBlock floats to bytes and back. ----

struct Bf16Format {
  static constexpr bool kScaled = false;
  static void encode(const float* v, size_t n, unsigned char* out) {
    uint16_t* o = reinterpret_cast<uint16_t*>(out);
    size_t i = 0;
#if KOLO_WIRE_X86
    i = vector_head([&] { return encode_avx512(v, n, o); }, [&] { return encode_avx2(v, n, o); });
#endif
    for (; i < n; ++i) o[i] = float_to_bf16(v[i]);
  }
  static void decode(const unsigned char* in, size_t n, float* v) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(in);
    size_t i = 0;
#if KOLO_WIRE_X86
    i = vector_head([&] { return decode_avx512(h, n, v); }, [&] { return decode_avx2(h, n, v); });
#endif
    for (; i < n; ++i) v[i] = bf16_to_float(h[i]);
  }
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

struct Fp16Format {
  static constexpr bool kScaled = false;
  static void encode(const float* v, size_t n, unsigned char* out) {
    uint16_t* o = reinterpret_cast<uint16_t*>(out);
    size_t i = 0;
#if KOLO_WIRE_X86
    i = vector_head([&] { return encode_avx512(v, n, o); }, [&] { return encode_avx2(v, n, o); });
#endif
    for (; i < n; ++i) o[i] = float_to_fp16(v[i]);
  }
  static void decode(const unsigned char* in, size_t n, float* v) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(in);
    size_t i = 0;
#if KOLO_WIRE_X86
    i = vector_head([&] { return decode_avx512(h, n, v); }, [&] { return decode_avx2(h, n, v); });
#endif
    for (; i < n; ++i) v[i] = fp16_to_float(h[i]);
  }
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

// The largest finite magnitude of a block, NaN and Inf left out.
inline float finite_amax_from(const float* v, size_t from, size_t n, float amax) {
  for (size_t i = from; i < n; ++i) {
    const float a = std::fabs(v[i]);
    amax = (a <= FLT_MAX && a > amax) ? a : amax;
  }
  return amax;
}
#if KOLO_WIRE_X86
KOLO_AVX2 float finite_amax_avx2(const float* v, size_t n) {
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
KOLO_AVX512 float finite_amax_avx512(const float* v, size_t n) {
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
  switch (kernels()) {
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
};
inline BlockScale block_scale(float amax, float qmax) {
  BlockScale s{0, 0, 0, false};
  if (amax == 0) return s;
  s.scale = amax / qmax;
  s.factor = qmax / amax;
  if (!(s.factor <= FLT_MAX) || s.scale < FLT_MIN) {
    s.wide = true;
    s.factor_wide = static_cast<double>(qmax) / static_cast<double>(amax);
  }
  return s;
}

struct Int8Format {
  static constexpr bool kScaled = true;
  static constexpr float kMax = 126;
  static void encode(const float* v, size_t n, unsigned char* out) {
    const BlockScale s = block_scale(finite_amax(v, n), kMax);
    std::memcpy(out, &s.scale, 4);
    int8_t* q = reinterpret_cast<int8_t*>(out + 4);
    size_t i = 0;
#if KOLO_WIRE_X86
    if (!s.wide) {
      i = vector_head([&] { return encode_avx512(v, n, s.factor, q); }, [&] { return encode_avx2(v, n, s.factor, q); });
    }
#endif
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
  static void decode(const unsigned char* in, size_t n, float* v) {
    float scale;
    std::memcpy(&scale, in, 4);
    const int8_t* q = reinterpret_cast<const int8_t*>(in + 4);
    size_t i = 0;
#if KOLO_WIRE_X86
    i = vector_head([&] { return decode_avx512(q, n, scale, v); }, [&] { return decode_avx2(q, n, scale, v); });
#endif
    for (; i < n; ++i) {
      const int c = q[i];
      const float special = c == 127 ? INFINITY : (c == -127 ? -INFINITY : NAN);
      v[i] = (c >= -126 && c <= 126) ? static_cast<float>(c) * scale : special;
    }
  }
#if KOLO_WIRE_X86
  KOLO_AVX2 static size_t encode_avx2(const float* v, size_t n, float factor, int8_t* q) {
    const __m256 f = _mm256_set1_ps(factor), hi = _mm256_set1_ps(kMax), lo = _mm256_set1_ps(-kMax);
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
  KOLO_AVX512 static size_t encode_avx512(const float* v, size_t n, float factor, int8_t* q) {
    const __m512 f = _mm512_set1_ps(factor), hi = _mm512_set1_ps(kMax), lo = _mm512_set1_ps(-kMax);
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

// An OCP fp8 format with `M` mantissa bits and exponent bias `B`; codes
// above kMaxCode (in magnitude) are kInfCode and NaN.
template <int M, int B, uint8_t MaxCode, uint8_t InfCode, uint8_t NanCode>
struct Fp8Format {
  static constexpr bool kScaled = true;
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

  static void encode(const float* v, size_t n, unsigned char* out) {
    const float qmax = max_value();
    const BlockScale s = block_scale(finite_amax(v, n), qmax);
    std::memcpy(out, &s.scale, 4);
    uint8_t* q = out + 4;
    size_t i = 0;
#if KOLO_WIRE_X86
    if (!s.wide) {
      i = vector_head([&] { return encode_avx512(v, n, s.factor, qmax, q); },
                      [&] { return encode_avx2(v, n, s.factor, qmax, q); });
    }
#endif
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
  static void decode(const unsigned char* in, size_t n, float* v) {
    float scale;
    std::memcpy(&scale, in, 4);
    const uint8_t* q = in + 4;
    size_t i = 0;
#if KOLO_WIRE_X86
    i = vector_head([&] { return decode_avx512(q, n, scale, v); }, [&] { return decode_avx2(q, n, scale, v); });
#endif
    const float* value = table().value;
    for (; i < n; ++i) {
      const float m = value[q[i]];
      v[i] = (q[i] & 0x7f) >= InfCode ? m : m * scale;
    }
  }
#if KOLO_WIRE_X86
  // round_magnitude eight lanes at a time, in integer and float SIMD.
  KOLO_AVX2 static size_t encode_avx2(const float* v, size_t n, float factor, float qmax, uint8_t* q) {
    constexpr int kShift = 23 - M;
    const __m256 f = _mm256_set1_ps(factor), top = _mm256_set1_ps(qmax);
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
  KOLO_AVX512 static size_t encode_avx512(const float* v, size_t n, float factor, float qmax, uint8_t* q) {
    constexpr int kShift = 23 - M;
    const __m512 f = _mm512_set1_ps(factor), top = _mm512_set1_ps(qmax);
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

template <typename F>
constexpr size_t block_bytes(size_t n) {
  if constexpr (F::kScaled) {
    return 4 + n;
  } else {
    return 2 * n;
  }
}

// ---- The hop: decode, add, encode, decode back, per block in the cache. ----

template <typename F, typename T>
KOLO_MULTIVERSION void hop_kernel(const WireHop& h) {
  const float divisor = static_cast<float>(h.divisor);
  size_t at = 0;  // in the encoded bytes
  for (size_t b = 0; b < h.count; b += kWireBlock) {
    const size_t n = std::min(kWireBlock, h.count - b);
    float sum[kWireBlock], value[kWireBlock], back[kWireBlock];
    if (h.received) {
      F::decode(h.received + at, n, sum);
    } else {
      std::fill(sum, sum + n, 0.0f);
    }
    if (h.local) {
      for (size_t i = 0; i < n; ++i) sum[i] += Element<T>::load(h.local, b + i);
    }
    if (h.residual) {
      for (size_t i = 0; i < n; ++i) sum[i] += h.residual[b + i];
    }
    const float* to_encode = sum;
    if (h.divisor != 1) {
      for (size_t i = 0; i < n; ++i) value[i] = sum[i] / divisor;
      to_encode = value;
    }
    F::encode(to_encode, n, h.encoded + at);
    // A float32 result is decoded straight into place (local, which it may
    // alias, is already in sum); a narrower one by way of `back`.
    constexpr bool kFloatOut = std::is_same_v<T, float>;
    float* const decoded = kFloatOut && h.decoded ? static_cast<float*>(h.decoded) + b : back;
    if (h.residual || h.decoded) F::decode(h.encoded + at, n, decoded);
    if (h.residual) {
      // What this encoding lost, in the sum's units; a non-finite sum has
      // nothing to carry forward.
      for (size_t i = 0; i < n; ++i) {
        const float r = sum[i] - decoded[i] * divisor;
        h.residual[b + i] = std::isfinite(r) ? r : 0.0f;
      }
    }
    if (!kFloatOut && h.decoded) {
      for (size_t i = 0; i < n; ++i) Element<T>::store(h.decoded, b + i, back[i]);
    }
    at += block_bytes<F>(n);
  }
}

template <typename F, typename T>
KOLO_MULTIVERSION void decode_kernel(const unsigned char* in, size_t count, void* out) {
  size_t at = 0;
  for (size_t b = 0; b < count; b += kWireBlock) {
    const size_t n = std::min(kWireBlock, count - b);
    float v[kWireBlock];
    F::decode(in + at, n, v);
    for (size_t i = 0; i < n; ++i) Element<T>::store(out, b + i, v[i]);
    at += block_bytes<F>(n);
  }
}

// Calls fn.template operator()<Format, Element>() for the pair.
template <typename Fn>
void with_types(WireFormat format, DataType dtype, Fn&& fn) {
  auto by_dtype = [&](auto format_tag) {
    using F = decltype(format_tag);
    switch (dtype) {
      case DataType::kFloat16: return fn(F{}, Fp16Tag{});
      case DataType::kBfloat16: return fn(F{}, Bf16Tag{});
      default: return fn(F{}, float{});
    }
  };
  switch (format) {
    case WireFormat::kBf16: return by_dtype(Bf16Format{});
    case WireFormat::kFp16: return by_dtype(Fp16Format{});
    case WireFormat::kFp8E4M3: return by_dtype(E4M3Format{});
    case WireFormat::kFp8E5M2: return by_dtype(E5M2Format{});
    case WireFormat::kInt8: return by_dtype(Int8Format{});
    case WireFormat::kNative: return;
  }
}

}  // namespace

void wire_hop(WireFormat format, const WireHop& hop) {
  with_types(format, hop.dtype, [&](auto f, auto t) { hop_kernel<decltype(f), decltype(t)>(hop); });
}

void wire_decode(WireFormat format, const unsigned char* in, size_t count, DataType dtype, void* out) {
  with_types(format, dtype, [&](auto f, auto t) { decode_kernel<decltype(f), decltype(t)>(in, count, out); });
}

const char* wire_kernels_name(WireKernels kernels) {
  switch (kernels) {
    case WireKernels::kScalar: return "scalar";
    case WireKernels::kAvx2: return "avx2";
    case WireKernels::kAvx512: return "avx512";
  }
  return "?";
}

WireKernels wire_kernels_supported() { return best_kernels(); }

WireKernels wire_kernels() { return kernels(); }

WireKernels set_wire_kernels(WireKernels wanted) {
  const WireKernels set = std::min(wanted, best_kernels());
  kernels_in_use.store(static_cast<int>(set), std::memory_order_relaxed);
  return set;
}

float fp8_code_value(WireFormat format, uint8_t code) {
  if (format == WireFormat::kFp8E4M3) return E4M3Format::table().value[code];
  if (format == WireFormat::kFp8E5M2) return E5M2Format::table().value[code];
  return NAN;
}

}  // namespace kolo
