// The wire formats' kernels (wire_format.h): a block of floats to codes and
// back, and the hop that fuses decoding, adding and encoding.
#include "collectives/wire_format.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "collectives/half.h"
#include "collectives/simd.h"

namespace kolo {
namespace {

inline uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

#if defined(__x86_64__)
#define KOLO_WIRE_X86 1
// The AVX2 kernels below give the same bits as the scalar ones (the same
// operations, lane by lane); the scalar code does the tails and runs where
// the CPU lacks AVX2 or F16C.
#define KOLO_AVX2 __attribute__((target("avx2,f16c")))
#else
#define KOLO_WIRE_X86 0
#endif

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
    if (cpu_has_avx2_f16c()) i = encode_avx2(v, n, o);
#endif
    for (; i < n; ++i) o[i] = float_to_bf16(v[i]);
  }
  static void decode(const unsigned char* in, size_t n, float* v) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(in);
    size_t i = 0;
#if KOLO_WIRE_X86
    if (cpu_has_avx2_f16c()) i = decode_avx2(h, n, v);
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
#endif
};

struct Fp16Format {
  static constexpr bool kScaled = false;
  static void encode(const float* v, size_t n, unsigned char* out) {
    uint16_t* o = reinterpret_cast<uint16_t*>(out);
    size_t i = 0;
#if KOLO_WIRE_X86
    if (cpu_has_avx2_f16c()) i = encode_avx2(v, n, o);
#endif
    for (; i < n; ++i) o[i] = float_to_fp16(v[i]);
  }
  static void decode(const unsigned char* in, size_t n, float* v) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(in);
    size_t i = 0;
#if KOLO_WIRE_X86
    if (cpu_has_avx2_f16c()) i = decode_avx2(h, n, v);
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
#endif
inline float finite_amax(const float* v, size_t n) {
#if KOLO_WIRE_X86
  if (cpu_has_avx2_f16c()) return finite_amax_avx2(v, n);
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
    if (!s.wide && cpu_has_avx2_f16c()) i = encode_avx2(v, n, s.factor, q);
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
    if (cpu_has_avx2_f16c()) i = decode_avx2(q, n, scale, v);
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
    if (!s.wide && cpu_has_avx2_f16c()) i = encode_avx2(v, n, s.factor, qmax, q);
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
    if (cpu_has_avx2_f16c()) i = decode_avx2(q, n, scale, v);
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
    if (h.divisor != 1) {
      for (size_t i = 0; i < n; ++i) value[i] = sum[i] / divisor;
    } else {
      std::copy(sum, sum + n, value);
    }
    F::encode(value, n, h.encoded + at);
    if (h.residual || h.decoded) F::decode(h.encoded + at, n, back);
    if (h.residual) {
      // What this encoding lost, in the sum's units; a non-finite sum has
      // nothing to carry forward.
      for (size_t i = 0; i < n; ++i) {
        const float r = sum[i] - back[i] * divisor;
        h.residual[b + i] = std::isfinite(r) ? r : 0.0f;
      }
    }
    if (h.decoded) {
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

float fp8_code_value(WireFormat format, uint8_t code) {
  if (format == WireFormat::kFp8E4M3) return E4M3Format::table().value[code];
  if (format == WireFormat::kFp8E5M2) return E5M2Format::table().value[code];
  return NAN;
}

}  // namespace kolo
