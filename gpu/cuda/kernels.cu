// The reduction kernels of collectives/reduce_kernels.cc on the GPU. Two
// things shape this file:
//  - Results equal the CPU kernels' bit for bit, NaNs included, so a ring
//    mixing GPU and CPU reductions gives every rank the same bytes. The
//    element functions below are __host__ __device__ so they can be checked
//    against the CPU kernels on a machine without a GPU.
//  - The kernels are bound by memory: 16-byte loads and stores, several in
//    flight per thread, and a grid of at most one full wave.
#include "gpu/cuda/kernels.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kolo {
namespace cuda {
namespace {

template <typename To, typename From>
__host__ __device__ __forceinline__ To bit_cast(From v) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between sizes");
  To t;
  memcpy(&t, &v, sizeof(t));
  return t;
}

// ---- NaNs: x86's answer, not the GPU's.
// A GPU returns one canonical NaN (0x7fffffff) from any arithmetic on a NaN.
// x86, where the CPU kernels run, returns the NaN operand made quiet, or its
// "default NaN" (sign set, quiet bit only) when the operation itself is
// invalid (inf - inf, 0 * inf, 0 / 0). A NaN result is rewritten to that.
// When both operands are NaN x86 keeps its first source operand, and which
// one that is the compiler decides: GCC 12 puts b first in every main loop
// of reduce_kernels.cc (a in some scalar tails), so b wins here. Which of two
// NaNs comes out is no promise, only agreement in the common case.
// min/max are selects that never create a NaN, so only sum, prod and divide
// come through here.
__host__ __device__ __forceinline__ bool is_nan(float f) {
  return (bit_cast<uint32_t>(f) & 0x7fffffffu) > 0x7f800000u;
}
__host__ __device__ __forceinline__ bool is_nan(double d) {
  return (bit_cast<uint64_t>(d) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}
__host__ __device__ __forceinline__ float quiet(float f) {
  return bit_cast<float>(bit_cast<uint32_t>(f) | 0x00400000u);
}
__host__ __device__ __forceinline__ double quiet(double d) {
  return bit_cast<double>(bit_cast<uint64_t>(d) | 0x0008000000000000ull);
}
__host__ __device__ __forceinline__ float default_nan(float) { return bit_cast<float>(0xffc00000u); }
__host__ __device__ __forceinline__ double default_nan(double) {
  return bit_cast<double>(0xfff8000000000000ull);
}

template <typename F>
__host__ __device__ __forceinline__ F x86_nan(F r, F a, F b) {
  if (!is_nan(r)) return r;
  if (is_nan(b)) return quiet(b);
  if (is_nan(a)) return quiet(a);
  return default_nan(r);
}

// ---- Element formats: how a stored value becomes the value the op sees.
template <typename T>
struct Native {
  using Storage = T;
  __host__ __device__ static T load(T v) { return v; }
  __host__ __device__ static T store(T v) { return v; }
};

// binary16, converted with cuda_fp16.h's round to nearest even. NaNs go by
// hand, as F16C converts them on the CPU: the payload's top bits are kept and
// the quiet bit set; the GPU's converters may canonicalize them instead.
struct Fp16 {
  using Storage = uint16_t;
  __host__ __device__ static float load(uint16_t h) {
    if ((h & 0x7fffu) > 0x7c00u) {
      return bit_cast<float>((uint32_t{h & 0x8000u} << 16) | 0x7fc00000u | (uint32_t{h & 0x3ffu} << 13));
    }
    __half_raw raw;
    raw.x = h;
    return __half2float(__half(raw));
  }
  __host__ __device__ static uint16_t store(float f) {
    uint32_t bits = bit_cast<uint32_t>(f);
    if (is_nan(f)) return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7e00u | ((bits >> 13) & 0x3ffu));
    return static_cast<__half_raw>(__float2half_rn(f)).x;
  }
};

// bfloat16: collectives/half.h's integer rounding, line for line.
struct Bf16 {
  using Storage = uint16_t;
  __host__ __device__ static float load(uint16_t h) { return bit_cast<float>(uint32_t{h} << 16); }
  __host__ __device__ static uint16_t store(float f) {
    uint32_t bits = bit_cast<uint32_t>(f);
    if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
      return static_cast<uint16_t>((bits >> 16) | 0x0040u);
    }
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<uint16_t>(bits >> 16);
  }
};

// ---- Operators, as in reduce_kernels.cc: integers wrap, computed unsigned.
template <typename T>
using Unsigned = std::make_unsigned_t<T>;

struct Sum {
  template <typename T>
  __host__ __device__ static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Unsigned<T>>(a) + static_cast<Unsigned<T>>(b));
    } else {
      return x86_nan(a + b, a, b);
    }
  }
};
struct Prod {
  template <typename T>
  __host__ __device__ static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      // Narrow types multiply as unsigned int: promoted to int they could
      // overflow, which is undefined.
      using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, Unsigned<T>>;
      return static_cast<T>(static_cast<Wide>(static_cast<Unsigned<T>>(a)) *
                            static_cast<Wide>(static_cast<Unsigned<T>>(b)));
    } else {
      return x86_nan(a * b, a, b);
    }
  }
};
// The comparison order decides which operand a NaN or a signed zero yields.
struct Min {
  template <typename T>
  __host__ __device__ static T apply(T a, T b) { return b < a ? b : a; }
};
struct Max {
  template <typename T>
  __host__ __device__ static T apply(T a, T b) { return a < b ? b : a; }
};

// Integers divide in 64 bits (a divisor of 300 does not fit in int8) and
// truncate back; floating types in their compute type.
struct Divide {
  template <typename T>
  __host__ __device__ static T apply(T x, int divisor) {
    if constexpr (std::is_integral_v<T>) {
      using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
      return static_cast<T>(static_cast<Wide>(x) / static_cast<Wide>(divisor));
    } else {
      const T d = static_cast<T>(divisor);
      return x86_nan(x / d, x, d);
    }
  }
};

// x * factor as collectives/elementwise.cc's scale_copy computes it:
// float32 and the half formats in float (the factor rounded to float
// first), float64 in double; integers in double, truncated toward zero and
// saturated at the type's range (NaN, which a finite factor cannot make, 0).
struct Scale {
  template <typename T>
  __host__ __device__ static T apply(T x, double factor) {
    if constexpr (std::is_integral_v<T>) {
      constexpr T lowest = std::is_signed_v<T> ? static_cast<T>(Unsigned<T>{1} << (sizeof(T) * 8 - 1)) : T{0};
      constexpr T highest = static_cast<T>(~static_cast<Unsigned<T>>(lowest));
      double v = static_cast<double>(x) * factor;
      if (is_nan(v)) return T{0};
      v = trunc(v);
      if (v <= static_cast<double>(lowest)) return lowest;
      if (v >= static_cast<double>(highest)) return highest;
      return static_cast<T>(v);
    } else {
      const T f = static_cast<T>(factor);
      return x86_nan(x * f, x, f);
    }
  }
};

template <typename Fmt, typename Op>
__host__ __device__ __forceinline__ typename Fmt::Storage reduce_one(typename Fmt::Storage a,
                                                                      typename Fmt::Storage b) {
  return Fmt::store(Op::apply(Fmt::load(a), Fmt::load(b)));
}

template <typename Fmt>
__host__ __device__ __forceinline__ typename Fmt::Storage divide_one(typename Fmt::Storage x, int divisor) {
  return Fmt::store(Divide::apply(Fmt::load(x), divisor));
}

template <typename Fmt>
__host__ __device__ __forceinline__ typename Fmt::Storage scale_one(typename Fmt::Storage x, double factor) {
  return Fmt::store(Scale::apply(Fmt::load(x), factor));
}

// ---- Kernels.
// Unrolled on the device only: the host compiler does not know the pragma.
#if defined(__CUDA_ARCH__)
#define KOLO_UNROLL _Pragma("unroll")
#else
#define KOLO_UNROLL
#endif

constexpr int kThreads = 256;
// Vectors each thread loads before it stores any: the stores may alias the
// loads (in place), so the compiler would not hoist later loads itself.
constexpr int kUnroll = 4;

template <typename S>
struct alignas(16) Vec {
  static constexpr int kWidth = 16 / sizeof(S);
  S e[kWidth];
};

// The range splits in three: `head` scalar elements up to the first 16-byte
// boundary, `nvec` aligned vectors, then scalar elements to `count`. When
// the pointers cannot be aligned together, head = nvec = 0 and the scalar
// loop does it all. Thread `tid` of `stride` threads does its share; written
// as a plain function so the host can run it thread by thread (a check of
// the index arithmetic that needs no GPU).
template <typename Fmt, typename Op>
__host__ __device__ __forceinline__ void reduce_range(size_t tid, size_t stride, typename Fmt::Storage* out,
                                                      const typename Fmt::Storage* a,
                                                      const typename Fmt::Storage* b, size_t head, size_t nvec,
                                                      size_t count) {
  using V = Vec<typename Fmt::Storage>;
  for (size_t i = tid; i < head; i += stride) out[i] = reduce_one<Fmt, Op>(a[i], b[i]);
  for (size_t i = head + nvec * V::kWidth + tid; i < count; i += stride) out[i] = reduce_one<Fmt, Op>(a[i], b[i]);

  V* vo = reinterpret_cast<V*>(out + head);
  const V* va = reinterpret_cast<const V*>(a + head);
  const V* vb = reinterpret_cast<const V*>(b + head);
  size_t i = tid;
  for (; i + (kUnroll - 1) * stride < nvec; i += kUnroll * stride) {
    V x[kUnroll], y[kUnroll];
    KOLO_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      x[u] = va[i + u * stride];
      y[u] = vb[i + u * stride];
    }
    KOLO_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      KOLO_UNROLL
      for (int k = 0; k < V::kWidth; ++k) x[u].e[k] = reduce_one<Fmt, Op>(x[u].e[k], y[u].e[k]);
      vo[i + u * stride] = x[u];
    }
  }
  for (; i < nvec; i += stride) {
    V x = va[i];
    const V y = vb[i];
    KOLO_UNROLL
    for (int k = 0; k < V::kWidth; ++k) x.e[k] = reduce_one<Fmt, Op>(x.e[k], y.e[k]);
    vo[i] = x;
  }
}

// Runs once per collective on a buffer already reduced: a plain vector loop.
template <typename Fmt>
__host__ __device__ __forceinline__ void divide_range(size_t tid, size_t stride, typename Fmt::Storage* buf,
                                                      size_t head, size_t nvec, size_t count, int divisor) {
  using V = Vec<typename Fmt::Storage>;
  for (size_t i = tid; i < head; i += stride) buf[i] = divide_one<Fmt>(buf[i], divisor);
  for (size_t i = head + nvec * V::kWidth + tid; i < count; i += stride) buf[i] = divide_one<Fmt>(buf[i], divisor);
  V* v = reinterpret_cast<V*>(buf + head);
  for (size_t i = tid; i < nvec; i += stride) {
    V x = v[i];
    KOLO_UNROLL
    for (int k = 0; k < V::kWidth; ++k) x.e[k] = divide_one<Fmt>(x.e[k], divisor);
    v[i] = x;
  }
}

// out = in * factor (out may be in): once per scaled tensor, a plain vector
// loop like divide_range's.
template <typename Fmt>
__host__ __device__ __forceinline__ void scale_range(size_t tid, size_t stride, typename Fmt::Storage* out,
                                                     const typename Fmt::Storage* in, size_t head, size_t nvec,
                                                     size_t count, double factor) {
  using V = Vec<typename Fmt::Storage>;
  for (size_t i = tid; i < head; i += stride) out[i] = scale_one<Fmt>(in[i], factor);
  for (size_t i = head + nvec * V::kWidth + tid; i < count; i += stride) out[i] = scale_one<Fmt>(in[i], factor);
  V* vo = reinterpret_cast<V*>(out + head);
  const V* vi = reinterpret_cast<const V*>(in + head);
  for (size_t i = tid; i < nvec; i += stride) {
    V x = vi[i];
    KOLO_UNROLL
    for (int k = 0; k < V::kWidth; ++k) x.e[k] = scale_one<Fmt>(x.e[k], factor);
    vo[i] = x;
  }
}

__device__ __forceinline__ size_t thread_index() { return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t thread_count() { return static_cast<size_t>(gridDim.x) * blockDim.x; }

template <typename Fmt, typename Op>
__global__ void __launch_bounds__(kThreads)
    reduce_elements(typename Fmt::Storage* out, const typename Fmt::Storage* a, const typename Fmt::Storage* b,
                    size_t head, size_t nvec, size_t count) {
  reduce_range<Fmt, Op>(thread_index(), thread_count(), out, a, b, head, nvec, count);
}

template <typename Fmt>
__global__ void __launch_bounds__(kThreads)
    divide_elements(typename Fmt::Storage* buf, size_t head, size_t nvec, size_t count, int divisor) {
  divide_range<Fmt>(thread_index(), thread_count(), buf, head, nvec, count, divisor);
}

template <typename Fmt>
__global__ void __launch_bounds__(kThreads)
    scale_elements(typename Fmt::Storage* out, const typename Fmt::Storage* in, size_t head, size_t nvec,
                   size_t count, double factor) {
  scale_range<Fmt>(thread_index(), thread_count(), out, in, head, nvec, count, factor);
}

// ---- Launch.
constexpr int kMaxDevices = 64;

// Blocks of `kernel` resident on the whole device at once, asked once per
// kernel and device (`cache` is that kernel's). A grid of one full wave
// keeps every SM streaming and the grid-stride loops cover any size beyond
// it; more blocks would only queue behind the first wave. Register use
// differs per kernel (the fp16 ones need more), hence one query for each.
template <typename Kernel>
int wave_blocks(Kernel kernel, std::atomic<int>* cache, int* blocks) {
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  int n = dev < kMaxDevices ? cache[dev].load(std::memory_order_relaxed) : 0;
  if (n == 0) {
    int sms = 0, per_sm = 0;
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (err == cudaSuccess) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0);
    if (err != cudaSuccess) return err;
    n = sms * (per_sm > 0 ? per_sm : 1);
    if (dev < kMaxDevices) cache[dev].store(n, std::memory_order_relaxed);
  }
  *blocks = n;
  return cudaSuccess;
}

// Splits [0, count) into head / vectors / tail for pointers that share
// their offset within 16 bytes; otherwise all scalar.
struct Split {
  size_t head = 0;
  size_t nvec = 0;
};

template <typename S>
Split split(size_t count, const void* p, const void* q, const void* r) {
  const uintptr_t off = reinterpret_cast<uintptr_t>(p) % 16;
  Split s;
  if (off != reinterpret_cast<uintptr_t>(q) % 16 || off != reinterpret_cast<uintptr_t>(r) % 16 || off % sizeof(S) != 0) {
    return s;
  }
  s.head = off == 0 ? 0 : (16 - off) / sizeof(S);
  if (s.head > count) s.head = count;
  s.nvec = (count - s.head) / Vec<S>::kWidth;
  return s;
}

// Enough blocks for one work item (a vector, or a scalar element) per
// thread, capped at one wave.
template <typename Kernel>
int grid_for(Kernel kernel, std::atomic<int>* cache, size_t items, int* grid) {
  int wave = 0;
  if (int err = wave_blocks(kernel, cache, &wave)) return err;
  const size_t want = (items + kThreads - 1) / kThreads;
  *grid = static_cast<int>(want < static_cast<size_t>(wave) ? want : static_cast<size_t>(wave));
  if (*grid < 1) *grid = 1;
  return cudaSuccess;
}

// Each kernel's wave per device (wave_blocks), kept where both its
// launches and load_kernels find it.
template <typename Fmt, typename Op>
std::atomic<int> reduce_wave_cache[kMaxDevices];
template <typename Fmt>
std::atomic<int> divide_wave_cache[kMaxDevices];
template <typename Fmt>
std::atomic<int> scale_wave_cache[kMaxDevices];

template <typename Fmt, typename Op>
int launch_reduce(void* out, const void* a, const void* b, size_t count, cudaStream_t stream) {
  using S = typename Fmt::Storage;
  std::atomic<int>* wave_cache = reduce_wave_cache<Fmt, Op>;
  const auto kernel = &reduce_elements<Fmt, Op>;
  const Split s = split<S>(count, out, a, b);
  const size_t scalars = count - s.nvec * Vec<S>::kWidth;
  int grid = 0;
  if (int err = grid_for(kernel, wave_cache, s.nvec > scalars ? s.nvec : scalars, &grid)) return err;
  kernel<<<grid, kThreads, 0, stream>>>(static_cast<S*>(out), static_cast<const S*>(a), static_cast<const S*>(b),
                                        s.head, s.nvec, count);
  // Launch errors (bad configuration, no device) only; faults inside the
  // kernel surface at the stream's next synchronization.
  return cudaGetLastError();
}

template <typename Op>
int reduce_for(DataType dtype, void* out, const void* a, const void* b, size_t count, cudaStream_t stream) {
  switch (dtype) {
    case DataType::kInt8: return launch_reduce<Native<int8_t>, Op>(out, a, b, count, stream);
    case DataType::kUint8: return launch_reduce<Native<uint8_t>, Op>(out, a, b, count, stream);
    case DataType::kInt32: return launch_reduce<Native<int32_t>, Op>(out, a, b, count, stream);
    case DataType::kUint32: return launch_reduce<Native<uint32_t>, Op>(out, a, b, count, stream);
    case DataType::kInt64: return launch_reduce<Native<int64_t>, Op>(out, a, b, count, stream);
    case DataType::kUint64: return launch_reduce<Native<uint64_t>, Op>(out, a, b, count, stream);
    case DataType::kFloat16: return launch_reduce<Fp16, Op>(out, a, b, count, stream);
    case DataType::kBfloat16: return launch_reduce<Bf16, Op>(out, a, b, count, stream);
    case DataType::kFloat32: return launch_reduce<Native<float>, Op>(out, a, b, count, stream);
    case DataType::kFloat64: return launch_reduce<Native<double>, Op>(out, a, b, count, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename Fmt>
int launch_divide(void* buf, size_t count, int divisor, cudaStream_t stream) {
  using S = typename Fmt::Storage;
  std::atomic<int>* wave_cache = divide_wave_cache<Fmt>;
  const auto kernel = &divide_elements<Fmt>;
  const Split s = split<S>(count, buf, buf, buf);
  const size_t scalars = count - s.nvec * Vec<S>::kWidth;
  int grid = 0;
  if (int err = grid_for(kernel, wave_cache, s.nvec > scalars ? s.nvec : scalars, &grid)) return err;
  kernel<<<grid, kThreads, 0, stream>>>(static_cast<S*>(buf), s.head, s.nvec, count, divisor);
  return cudaGetLastError();
}

template <typename Fmt>
int launch_scale(void* out, const void* in, size_t count, double factor, cudaStream_t stream) {
  using S = typename Fmt::Storage;
  std::atomic<int>* wave_cache = scale_wave_cache<Fmt>;
  const auto kernel = &scale_elements<Fmt>;
  const Split s = split<S>(count, out, in, in);
  const size_t scalars = count - s.nvec * Vec<S>::kWidth;
  int grid = 0;
  if (int err = grid_for(kernel, wave_cache, s.nvec > scalars ? s.nvec : scalars, &grid)) return err;
  kernel<<<grid, kThreads, 0, stream>>>(static_cast<S*>(out), static_cast<const S*>(in), s.head, s.nvec, count,
                                        factor);
  return cudaGetLastError();
}

// A kernel's module loaded and its wave cached.
template <typename Kernel>
int load(Kernel kernel, std::atomic<int>* cache) {
  cudaFuncAttributes attributes;
  cudaError_t err = cudaFuncGetAttributes(&attributes, kernel);
  if (err != cudaSuccess) return err;
  int blocks = 0;
  return wave_blocks(kernel, cache, &blocks);
}

template <typename Fmt>
int load_format() {
  int err = load(&reduce_elements<Fmt, Sum>, reduce_wave_cache<Fmt, Sum>);
  if (!err) err = load(&reduce_elements<Fmt, Prod>, reduce_wave_cache<Fmt, Prod>);
  if (!err) err = load(&reduce_elements<Fmt, Min>, reduce_wave_cache<Fmt, Min>);
  if (!err) err = load(&reduce_elements<Fmt, Max>, reduce_wave_cache<Fmt, Max>);
  if (!err) err = load(&divide_elements<Fmt>, divide_wave_cache<Fmt>);
  if (!err) err = load(&scale_elements<Fmt>, scale_wave_cache<Fmt>);
  return err;
}

}  // namespace

int load_kernels() {
  int err = load_format<Native<int8_t>>();
  if (!err) err = load_format<Native<uint8_t>>();
  if (!err) err = load_format<Native<int32_t>>();
  if (!err) err = load_format<Native<uint32_t>>();
  if (!err) err = load_format<Native<int64_t>>();
  if (!err) err = load_format<Native<uint64_t>>();
  if (!err) err = load_format<Fp16>();
  if (!err) err = load_format<Bf16>();
  if (!err) err = load_format<Native<float>>();
  if (!err) err = load_format<Native<double>>();
  return err;
}

int enqueue_reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count, void* stream) {
  if (count == 0) return cudaSuccess;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return reduce_for<Sum>(dtype, out, a, b, count, s);
    case ReduceOp::kProd: return reduce_for<Prod>(dtype, out, a, b, count, s);
    case ReduceOp::kMin: return reduce_for<Min>(dtype, out, a, b, count, s);
    case ReduceOp::kMax: return reduce_for<Max>(dtype, out, a, b, count, s);
  }
  return cudaErrorInvalidValue;
}

int enqueue_divide(DataType dtype, void* buf, size_t count, int divisor, void* stream) {
  if (count == 0) return cudaSuccess;
  // The CPU kernel would trap on an integer division by zero; the GPU
  // would write garbage.
  if (divisor == 0) return cudaErrorInvalidValue;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DataType::kInt8: return launch_divide<Native<int8_t>>(buf, count, divisor, s);
    case DataType::kUint8: return launch_divide<Native<uint8_t>>(buf, count, divisor, s);
    case DataType::kInt32: return launch_divide<Native<int32_t>>(buf, count, divisor, s);
    case DataType::kUint32: return launch_divide<Native<uint32_t>>(buf, count, divisor, s);
    case DataType::kInt64: return launch_divide<Native<int64_t>>(buf, count, divisor, s);
    case DataType::kUint64: return launch_divide<Native<uint64_t>>(buf, count, divisor, s);
    case DataType::kFloat16: return launch_divide<Fp16>(buf, count, divisor, s);
    case DataType::kBfloat16: return launch_divide<Bf16>(buf, count, divisor, s);
    case DataType::kFloat32: return launch_divide<Native<float>>(buf, count, divisor, s);
    case DataType::kFloat64: return launch_divide<Native<double>>(buf, count, divisor, s);
  }
  return cudaErrorInvalidValue;
}

int enqueue_scale(DataType dtype, void* out, const void* in, size_t count, double factor, void* stream) {
  if (count == 0) return cudaSuccess;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DataType::kInt8: return launch_scale<Native<int8_t>>(out, in, count, factor, s);
    case DataType::kUint8: return launch_scale<Native<uint8_t>>(out, in, count, factor, s);
    case DataType::kInt32: return launch_scale<Native<int32_t>>(out, in, count, factor, s);
    case DataType::kUint32: return launch_scale<Native<uint32_t>>(out, in, count, factor, s);
    case DataType::kInt64: return launch_scale<Native<int64_t>>(out, in, count, factor, s);
    case DataType::kUint64: return launch_scale<Native<uint64_t>>(out, in, count, factor, s);
    case DataType::kFloat16: return launch_scale<Fp16>(out, in, count, factor, s);
    case DataType::kBfloat16: return launch_scale<Bf16>(out, in, count, factor, s);
    case DataType::kFloat32: return launch_scale<Native<float>>(out, in, count, factor, s);
    case DataType::kFloat64: return launch_scale<Native<double>>(out, in, count, factor, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace kolo
