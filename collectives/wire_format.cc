#include "collectives/wire_format.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "collectives/half.h"

namespace kolo {
namespace {

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define KOLO_MULTIVERSION __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define KOLO_MULTIVERSION
#endif

inline uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
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
    for (size_t i = 0; i < n; ++i) o[i] = float_to_bf16(v[i]);
  }
  static void decode(const unsigned char* in, size_t n, float* v) {
    uint16_t h[kWireBlock];
    std::memcpy(h, in, n * 2);
    for (size_t i = 0; i < n; ++i) v[i] = bf16_to_float(h[i]);
  }
};

struct Fp16Format {
  static constexpr bool kScaled = false;
  static void encode(const float* v, size_t n, unsigned char* out) {
    uint16_t h[kWireBlock];
    for (size_t i = 0; i < n; ++i) h[i] = float_to_fp16(v[i]);
    std::memcpy(out, h, n * 2);
  }
  static void decode(const unsigned char* in, size_t n, float* v) {
    uint16_t h[kWireBlock];
    std::memcpy(h, in, n * 2);
    for (size_t i = 0; i < n; ++i) v[i] = fp16_to_float(h[i]);
  }
};

// The largest finite magnitude of a block, NaN and Inf left out.
inline float finite_amax(const float* v, size_t n) {
  float amax = 0;
  for (size_t i = 0; i < n; ++i) {
    const float a = std::fabs(v[i]);
    amax = (a <= FLT_MAX && a > amax) ? a : amax;
  }
  return amax;
}

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
    float x[kWireBlock];
    if (s.wide) {
      for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(static_cast<double>(v[i]) * s.factor_wide);
    } else {
      for (size_t i = 0; i < n; ++i) x[i] = v[i] * s.factor;
    }
    for (size_t i = 0; i < n; ++i) {
      const uint32_t b = bits_of(v[i]);
      const bool nan = (b & 0x7fffffffu) > 0x7f800000u;
      const bool inf = (b & 0x7fffffffu) == 0x7f800000u;
      const float r = std::min(kMax, std::max(-kMax, std::nearbyint((nan || inf) ? 0.0f : x[i])));
      const int8_t special = nan ? int8_t{-128} : ((b >> 31) ? int8_t{-127} : int8_t{127});
      q[i] = (nan || inf) ? special : static_cast<int8_t>(r);
    }
  }
  static void decode(const unsigned char* in, size_t n, float* v) {
    float scale;
    std::memcpy(&scale, in, 4);
    const int8_t* q = reinterpret_cast<const int8_t*>(in + 4);
    for (size_t i = 0; i < n; ++i) {
      const int c = q[i];
      const float special = c == 127 ? INFINITY : (c == -127 ? -INFINITY : NAN);
      v[i] = (c >= -126 && c <= 126) ? static_cast<float>(c) * scale : special;
    }
  }
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
    float x[kWireBlock];
    if (s.wide) {
      for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(std::fabs(static_cast<double>(v[i])) * s.factor_wide);
    } else {
      for (size_t i = 0; i < n; ++i) x[i] = std::fabs(v[i]) * s.factor;
    }
    for (size_t i = 0; i < n; ++i) {
      const uint32_t b = bits_of(v[i]);
      const uint32_t sign = (b >> 24) & 0x80u;
      const bool nan = (b & 0x7fffffffu) > 0x7f800000u;
      const bool inf = (b & 0x7fffffffu) == 0x7f800000u;
      const uint8_t rounded = round_magnitude((nan || inf) ? 0.0f : std::min(x[i], qmax));
      const uint8_t m = nan ? NanCode : (inf ? InfCode : rounded);
      q[i] = static_cast<uint8_t>(m | sign);
    }
  }
  static void decode(const unsigned char* in, size_t n, float* v) {
    float scale;
    std::memcpy(&scale, in, 4);
    const uint8_t* q = in + 4;
    const float* value = table().value;
    for (size_t i = 0; i < n; ++i) {
      const float m = value[q[i]];
      v[i] = (q[i] & 0x7f) >= InfCode ? m : m * scale;
    }
  }
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

const char* wire_format_name(WireFormat format) {
  switch (format) {
    case WireFormat::kNative: return "native";
    case WireFormat::kBf16: return "bf16";
    case WireFormat::kFp16: return "fp16";
    case WireFormat::kFp8E4M3: return "fp8_e4m3";
    case WireFormat::kFp8E5M2: return "fp8_e5m2";
    case WireFormat::kInt8: return "int8";
  }
  return "unknown";
}

bool parse_wire_format(const std::string& name, WireFormat* format) {
  for (int f = 0; f < kNumWireFormats; ++f) {
    if (name == wire_format_name(static_cast<WireFormat>(f))) {
      *format = static_cast<WireFormat>(f);
      return true;
    }
  }
  return false;
}

bool wire_format_carries(DataType dtype, ReduceOp op) {
  const bool floating = dtype == DataType::kFloat32 || dtype == DataType::kFloat16 || dtype == DataType::kBfloat16;
  return floating && (op == ReduceOp::kSum || op == ReduceOp::kAvg);
}

size_t wire_element_bytes(WireFormat format) {
  switch (format) {
    case WireFormat::kBf16:
    case WireFormat::kFp16: return 2;
    case WireFormat::kFp8E4M3:
    case WireFormat::kFp8E5M2:
    case WireFormat::kInt8: return 1;
    case WireFormat::kNative: return 4;
  }
  return 4;
}

size_t wire_bytes(WireFormat format, size_t count) {
  const size_t codes = count * wire_element_bytes(format);
  if (format == WireFormat::kBf16 || format == WireFormat::kFp16) return codes;
  return codes + 4 * ((count + kWireBlock - 1) / kWireBlock);
}

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
