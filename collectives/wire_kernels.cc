// The wire formats' kernels (wire_kernels.h): the frame every format shares.
// A format is a struct of encode/decode for a block of at most kWireBlock
// floats (wire_half_formats.h, wire_int8_format.h, wire_fp8_format.h); here
// are the caller's element types, the hop that fuses decoding, adding and
// encoding block by block in the cache, and the choice of kernels.
#include "collectives/wire_kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>

#include "collectives/half.h"
#include "collectives/wire_fp8_format.h"
#include "collectives/wire_half_formats.h"
#include "collectives/wire_int8_format.h"
#include "collectives/wire_kernel_support.h"

namespace kolo {
namespace {

using wire::Bf16Format;
using wire::E4M3Format;
using wire::E5M2Format;
using wire::Fp16Format;
using wire::Int8Format;

WireKernels best_kernels() {
#if KOLO_WIRE_X86
  if (cpu_has_avx512()) return WireKernels::kAvx512;
  if (cpu_has_avx2_f16c()) return WireKernels::kAvx2;
#endif
  return WireKernels::kScalar;
}

std::atomic<int> kernels_in_use{static_cast<int>(best_kernels())};

inline WireKernels kernels() { return static_cast<WireKernels>(kernels_in_use.load(std::memory_order_relaxed)); }

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

