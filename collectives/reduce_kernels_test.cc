// Checks every dtype x op kernel against a straightforward reference written
// here, including the fp16/bf16 rounding, which the reference does with its
// own bit-level conversion rather than kolo's.
#include "collectives/reduce_kernels.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace kolo {
namespace {

// Reference float -> bf16 by examining the discarded bits.
uint16_t ref_bf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((b >> 16) | 0x40);
  uint32_t upper = b >> 16, lower = b & 0xffff;
  if (lower > 0x8000 || (lower == 0x8000 && (upper & 1))) ++upper;
  return static_cast<uint16_t>(upper);
}
float ref_bf16_to_float(uint16_t h) {
  uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Reference binary16 decode by the formula.
float ref_fp16_to_float(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(man | 0x400), exp - 25);
  return sign ? -v : v;
}
// Reference encode: the nearest binary16 by search over the two neighbours.
uint16_t ref_fp16(float f) {
  if (std::isnan(f)) return 0x7e00;
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7c00;  // rounds to infinity
  // Find the largest magnitude code <= a.
  uint16_t lo = 0;
  for (int step = 1 << 14; step > 0; step >>= 1) {
    if (lo + step <= 0x7bff && ref_fp16_to_float(static_cast<uint16_t>(lo + step)) <= a) lo = static_cast<uint16_t>(lo + step);
  }
  if (ref_fp16_to_float(lo) == a || lo == 0x7bff) return sign | lo;
  float dl = a - ref_fp16_to_float(lo), dh = ref_fp16_to_float(static_cast<uint16_t>(lo + 1)) - a;
  uint16_t pick = (dl < dh || (dl == dh && (lo & 1) == 0)) ? lo : static_cast<uint16_t>(lo + 1);
  return sign | pick;
}

template <typename T>
T ref_apply(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
      else return a + b;
    case ReduceOp::kProd:
      if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
      else return a * b;
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
  }
  return a;
}

template <typename T>
void check_native(DataType dt) {
  std::mt19937 rng(42);
  const size_t n = 1003;  // odd, so vector tails are exercised
  for (int o = 0; o < kNumReduceOps; ++o) {
    ReduceOp op = static_cast<ReduceOp>(o);
    std::vector<T> a(n), b(n), out(n);
    for (size_t i = 0; i < n; ++i) {
      if constexpr (std::is_integral_v<T>) {
        a[i] = static_cast<T>(rng());
        b[i] = static_cast<T>(rng());
      } else {
        a[i] = static_cast<T>(std::uniform_real_distribution<double>(-100, 100)(rng));
        b[i] = static_cast<T>(std::uniform_real_distribution<double>(-100, 100)(rng));
      }
    }
    reduce_kernel(dt, op)(out.data(), a.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i], ref_apply(op, a[i], b[i])) << dtype_name(dt) << " " << op_name(op) << " at " << i;
    }
    // In place: out aliases a.
    std::vector<T> c = a;
    reduce_kernel(dt, op)(c.data(), c.data(), b.data(), n);
    ASSERT_EQ(c, out);
  }
}

TEST(ReduceKernels, NativeTypesMatchReference) {
  check_native<int8_t>(DataType::kInt8);
  check_native<uint8_t>(DataType::kUint8);
  check_native<int32_t>(DataType::kInt32);
  check_native<uint32_t>(DataType::kUint32);
  check_native<int64_t>(DataType::kInt64);
  check_native<uint64_t>(DataType::kUint64);
  check_native<float>(DataType::kFloat32);
  check_native<double>(DataType::kFloat64);
}

void check_half(DataType dt, float (*decode)(uint16_t), uint16_t (*encode)(float)) {
  std::mt19937 rng(7);
  const size_t n = 4099;
  for (int o = 0; o < kNumReduceOps; ++o) {
    ReduceOp op = static_cast<ReduceOp>(o);
    std::vector<uint16_t> a(n), b(n), out(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = encode(std::uniform_real_distribution<float>(-300, 300)(rng));
      b[i] = encode(std::uniform_real_distribution<float>(-300, 300)(rng));
    }
    reduce_kernel(dt, op)(out.data(), a.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i) {
      float expect = ref_apply(op, decode(a[i]), decode(b[i]));
      ASSERT_EQ(out[i], encode(expect)) << dtype_name(dt) << " " << op_name(op) << " at " << i << ": "
                                        << decode(a[i]) << " op " << decode(b[i]);
    }
  }
}

TEST(ReduceKernels, HalfTypesComputeInFloatAndRoundToNearestEven) {
  check_half(DataType::kFloat16, ref_fp16_to_float, ref_fp16);
  check_half(DataType::kBfloat16, ref_bf16_to_float, ref_bf16);
}

TEST(ReduceKernels, HalfRoundingTiesGoToEven) {
  // 1 + 2^-11 lies exactly between two fp16 values (1 and 1 + 2^-10): even wins.
  uint16_t one = ref_fp16(1.0f), tiny = ref_fp16(std::ldexp(1.0f, -11));
  uint16_t out;
  reduce_kernel(DataType::kFloat16, ReduceOp::kSum)(&out, &one, &tiny, 1);
  EXPECT_EQ(out, one);
  // bf16: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  uint16_t bone = ref_bf16(1.0f), btiny = ref_bf16(std::ldexp(1.0f, -8));
  reduce_kernel(DataType::kBfloat16, ReduceOp::kSum)(&out, &bone, &btiny, 1);
  EXPECT_EQ(out, bone);
}

TEST(ReduceKernels, HalfTypesKeepNanAndInfinity) {
  // 17 elements: two full vectors and a scalar tail.
  for (DataType dt : {DataType::kFloat16, DataType::kBfloat16}) {
    const bool fp16 = dt == DataType::kFloat16;
    auto enc = [&](float f) { return fp16 ? ref_fp16(f) : ref_bf16(f); };
    auto dec = [&](uint16_t h) { return fp16 ? ref_fp16_to_float(h) : ref_bf16_to_float(h); };
    for (int o = 0; o < kNumReduceOps; ++o) {
      std::vector<uint16_t> a(17, enc(1.5f)), b(17, enc(2.0f)), out(17);
      a[3] = enc(NAN);
      b[12] = enc(NAN);
      a[16] = enc(NAN);
      a[5] = enc(INFINITY);
      reduce_kernel(dt, static_cast<ReduceOp>(o))(out.data(), a.data(), b.data(), 17);
      for (size_t i : {size_t{3}, size_t{16}}) {
        EXPECT_TRUE(std::isnan(dec(out[i]))) << dtype_name(dt) << " " << op_name(static_cast<ReduceOp>(o)) << " " << i;
      }
      // A NaN in the second operand: min and max follow the scalar
      // definitions (b < a ? b : a, a < b ? b : a), which keep `a` here.
      const ReduceOp op = static_cast<ReduceOp>(o);
      if (op == ReduceOp::kMin || op == ReduceOp::kMax) EXPECT_EQ(dec(out[12]), 1.5f);
      else EXPECT_TRUE(std::isnan(dec(out[12])));
      const float inf_result = dec(out[5]);
      if (op == ReduceOp::kMin) EXPECT_EQ(inf_result, 2.0f);
      else EXPECT_TRUE(std::isinf(inf_result)) << dtype_name(dt) << " " << op_name(op);
    }
  }
}

TEST(ReduceKernels, AverageDividesOnceWithIntegerDivision) {
  std::vector<int32_t> v = {7, -7, 8, 1};
  finalize_kernel(DataType::kInt32, ReduceOp::kAvg)(v.data(), v.size(), 2);
  EXPECT_EQ(v, (std::vector<int32_t>{3, -3, 4, 0}));
  std::vector<uint8_t> u = {255, 200};
  finalize_kernel(DataType::kUint8, ReduceOp::kAvg)(u.data(), u.size(), 300);  // divisor wider than the type
  EXPECT_EQ(u, (std::vector<uint8_t>{0, 0}));
  std::vector<double> d = {3.0};
  finalize_kernel(DataType::kFloat64, ReduceOp::kAvg)(d.data(), 1, 4);
  EXPECT_EQ(d[0], 0.75);
  EXPECT_EQ(finalize_kernel(DataType::kFloat32, ReduceOp::kSum), nullptr);
}

}  // namespace
}  // namespace kolo
