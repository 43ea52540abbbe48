// The wire formats' kernels against references computed here from each
// format's definition: every fp8 code's value, encodings that are the
// nearest representable value (found by brute force over all codes), NaN
// and Inf through every format, blocks of zeros, tiny and huge magnitudes,
// the error feedback's residual, and the sizes.
#include "collectives/wire_format.h"
#include "collectives/wire_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/half.h"

namespace kolo {
namespace {

constexpr WireFormat kFormats[] = {WireFormat::kBf16, WireFormat::kFp16, WireFormat::kFp8E4M3, WireFormat::kFp8E5M2,
                                   WireFormat::kInt8};

bool scaled(WireFormat f) { return f != WireFormat::kBf16 && f != WireFormat::kFp16; }

// decode(encode(v)) of one message, through wire_hop as the ring runs it.
std::vector<float> round_trip(WireFormat f, const std::vector<float>& v, float* scale_out = nullptr) {
  std::vector<unsigned char> enc(wire_bytes(f, v.size()));
  std::vector<float> back(v.size());
  WireHop hop;
  hop.local = v.data();
  hop.encoded = enc.data();
  hop.decoded = back.data();
  hop.count = v.size();
  wire_hop(f, hop);
  if (scale_out && scaled(f)) std::memcpy(scale_out, enc.data(), 4);
  std::vector<float> again(v.size());
  wire_decode(f, enc.data(), v.size(), DataType::kFloat32, again.data());
  EXPECT_EQ(std::memcmp(back.data(), again.data(), v.size() * 4), 0) << "the encoder's decode differs from a peer's";
  return back;
}

TEST(WireFormat, NamesParseBack) {
  for (int i = 0; i < kNumWireFormats; ++i) {
    WireFormat f;
    ASSERT_TRUE(parse_wire_format(wire_format_name(static_cast<WireFormat>(i)), &f));
    EXPECT_EQ(static_cast<int>(f), i);
  }
  WireFormat f;
  EXPECT_FALSE(parse_wire_format("fp4", &f));
}

TEST(WireFormat, Sizes) {
  EXPECT_EQ(wire_bytes(WireFormat::kBf16, 1000), 2000u);
  EXPECT_EQ(wire_bytes(WireFormat::kFp16, 3), 6u);
  EXPECT_EQ(wire_bytes(WireFormat::kInt8, 256), 260u);
  EXPECT_EQ(wire_bytes(WireFormat::kInt8, 257), 265u);
  EXPECT_EQ(wire_bytes(WireFormat::kFp8E4M3, 0), 0u);
  EXPECT_EQ(wire_bytes(WireFormat::kFp8E5M2, 1), 5u);
}

TEST(WireFormat, Fp8CodesAreTheOcpValues) {
  // e4m3: bias 7, 3 mantissa bits; 448's code (0x7e) carries Inf here.
  EXPECT_EQ(fp8_code_value(WireFormat::kFp8E4M3, 0x00), 0.0f);
  EXPECT_EQ(fp8_code_value(WireFormat::kFp8E4M3, 0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_code_value(WireFormat::kFp8E4M3, 0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_code_value(WireFormat::kFp8E4M3, 0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(fp8_code_value(WireFormat::kFp8E4M3, 0x38), 1.0f);
  EXPECT_EQ(fp8_code_value(WireFormat::kFp8E4M3, 0x7d), 416.0f);
  EXPECT_EQ(fp8_code_value(WireFormat::kFp8E4M3, 0xfd), -416.0f);
  EXPECT_EQ(fp8_code_value(WireFormat::kFp8E4M3, 0x7e), INFINITY);
  EXPECT_EQ(fp8_code_value(WireFormat::kFp8E4M3, 0xfe), -INFINITY);
  EXPECT_TRUE(std::isnan(fp8_code_value(WireFormat::kFp8E4M3, 0x7f)));
  // e5m2: bias 15, 2 mantissa bits, IEEE-style Inf and NaN.
  EXPECT_EQ(fp8_code_value(WireFormat::kFp8E5M2, 0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(fp8_code_value(WireFormat::kFp8E5M2, 0x04), std::ldexp(1.0f, -14));
  EXPECT_EQ(fp8_code_value(WireFormat::kFp8E5M2, 0x3c), 1.0f);
  EXPECT_EQ(fp8_code_value(WireFormat::kFp8E5M2, 0x7b), 57344.0f);
  EXPECT_EQ(fp8_code_value(WireFormat::kFp8E5M2, 0x7c), INFINITY);
  EXPECT_TRUE(std::isnan(fp8_code_value(WireFormat::kFp8E5M2, 0x7d)));
  // Monotonic over the finite codes.
  for (WireFormat f : {WireFormat::kFp8E4M3, WireFormat::kFp8E5M2}) {
    const int top = f == WireFormat::kFp8E4M3 ? 0x7d : 0x7b;
    for (int c = 1; c <= top; ++c) EXPECT_LT(fp8_code_value(f, c - 1), fp8_code_value(f, c)) << c;
  }
}

// Every finite value the block can decode to, given its scale.
std::vector<float> representable(WireFormat f, float scale) {
  std::vector<float> out;
  if (f == WireFormat::kInt8) {
    for (int c = -126; c <= 126; ++c) out.push_back(static_cast<float>(c) * scale);
  } else {
    for (int c = 0; c < 256; ++c) {
      const float v = fp8_code_value(f, static_cast<uint8_t>(c));
      if (std::isfinite(v)) out.push_back(v * scale);
    }
  }
  return out;
}

TEST(WireFormat, ScaledFormatsEncodeTheNearestValue) {
  std::mt19937 rng(7);
  for (WireFormat f : {WireFormat::kFp8E4M3, WireFormat::kFp8E5M2, WireFormat::kInt8}) {
    for (float magnitude : {1e-30f, 1e-3f, 1.0f, 3e5f, 1e30f}) {
      std::uniform_real_distribution<float> d(-magnitude, magnitude);
      std::vector<float> v(kWireBlock);
      for (float& x : v) x = d(rng);
      v[17] = 0.0f;
      v[18] = magnitude * 1e-6f;  // deep in the subnormal codes
      float scale = 0;
      const std::vector<float> back = round_trip(f, v, &scale);
      const std::vector<float> grid = representable(f, scale);
      for (size_t i = 0; i < v.size(); ++i) {
        float best = INFINITY;
        for (float g : grid) best = std::min(best, std::fabs(g - v[i]));
        // Nearest, up to the rounding of scaling by a non-power of two.
        EXPECT_LE(std::fabs(back[i] - v[i]), best + 1e-6f * std::fabs(v[i]) + 1e-45f)
            << wire_format_name(f) << " magnitude " << magnitude << " element " << i << " " << v[i] << " -> "
            << back[i];
      }
    }
  }
}

TEST(WireFormat, SixteenBitFormatsRoundToNearestEven) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-1000, 1000);
  std::vector<float> v(3000);
  for (float& x : v) x = d(rng);
  // Ties: halfway between two bf16 values (1 + 2^-8 lies between 1 and
  // 1 + 2^-7) goes to the even one.
  v[0] = 1.0f + std::ldexp(1.0f, -8);
  v[1] = 1.0f + 3 * std::ldexp(1.0f, -8);
  const std::vector<float> b = round_trip(WireFormat::kBf16, v);
  EXPECT_EQ(b[0], 1.0f);
  EXPECT_EQ(b[1], 1.0f + std::ldexp(1.0f, -6));
  const std::vector<float> h = round_trip(WireFormat::kFp16, v);
  for (size_t i = 2; i < v.size(); ++i) {
    // Nearest within half a unit in the last place of each format.
    const int e = std::ilogb(v[i]);
    EXPECT_LE(std::fabs(b[i] - v[i]), std::ldexp(1.0f, e - 8)) << v[i];
    EXPECT_LE(std::fabs(h[i] - v[i]), std::ldexp(1.0f, e - 11)) << v[i];
  }
}

TEST(WireFormat, NanAndInfPassThroughAndLeaveTheBlockAlone) {
  for (WireFormat f : kFormats) {
    std::vector<float> v(300, 0.5f);
    v[1] = NAN;
    v[2] = INFINITY;
    v[3] = -INFINITY;
    v[4] = 2.0f;
    v[290] = INFINITY;  // the second block: Inf with no finite magnitude but 0.5
    const std::vector<float> back = round_trip(f, v);
    EXPECT_TRUE(std::isnan(back[1])) << wire_format_name(f);
    EXPECT_EQ(back[2], INFINITY) << wire_format_name(f);
    EXPECT_EQ(back[3], -INFINITY) << wire_format_name(f);
    EXPECT_EQ(back[290], INFINITY) << wire_format_name(f);
    EXPECT_NEAR(back[4], 2.0f, 2.0f / 16) << wire_format_name(f);
    EXPECT_NEAR(back[0], 0.5f, 0.5f / 16) << wire_format_name(f);
    EXPECT_NEAR(back[299], 0.5f, 0.5f / 16) << wire_format_name(f);
  }
  // A block of nothing but Inf and zeros.
  for (WireFormat f : kFormats) {
    std::vector<float> v = {INFINITY, 0.0f, -INFINITY, 0.0f};
    const std::vector<float> back = round_trip(f, v);
    EXPECT_EQ(back[0], INFINITY) << wire_format_name(f);
    EXPECT_EQ(back[1], 0.0f) << wire_format_name(f);
    EXPECT_EQ(back[2], -INFINITY) << wire_format_name(f);
  }
}

TEST(WireFormat, ZerosEqualBlocksAndExtremeMagnitudes) {
  for (WireFormat f : kFormats) {
    const std::vector<float> zeros(kWireBlock + 5, 0.0f);
    for (float x : round_trip(f, zeros)) EXPECT_EQ(x, 0.0f) << wire_format_name(f);
    for (float c : {3.14159f, -1e-38f, 1e-42f /* subnormal */, 3e38f}) {
      if (f == WireFormat::kFp16 && std::fabs(c) > 65504) continue;  // fp16 overflows by definition
      const std::vector<float> equal(100, c);
      const std::vector<float> back = round_trip(f, equal);
      for (float x : back) {
        EXPECT_TRUE(std::isfinite(x)) << wire_format_name(f) << " " << c;
        // bf16 and the scaled formats keep an equal block to within their
        // precision relative to it; fp16 is absolute below its normal
        // range, and so is everything below float32's (bf16's spacing
        // there is 2^-133, and a scale there is itself subnormal).
        const double below_float = std::ldexp(1.0, -133);
        const double tolerance = f == WireFormat::kFp16 ? std::max(std::fabs(c) * 1e-3, 6e-8) :
                                 f == WireFormat::kBf16 ? std::fabs(c) * 4e-3 + below_float
                                                        : std::fabs(c) * 0.02 + below_float;
        EXPECT_NEAR(x, c, tolerance) << wire_format_name(f) << " " << c;
      }
    }
  }
}

TEST(WireFormat, HopAddsInFloatAndTheResidualHoldsTheLoss) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0, 1);
  for (WireFormat f : kFormats) {
    const size_t n = 1000;
    std::vector<float> a(n), local(n), residual(n), sum(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = d(rng);
      local[i] = d(rng);
      residual[i] = 0.01f * d(rng);
    }
    // The received message: a encoded alone.
    std::vector<unsigned char> received(wire_bytes(f, n)), out(wire_bytes(f, n));
    std::vector<float> a_back(n), value(n);
    WireHop first;
    first.local = a.data();
    first.encoded = received.data();
    first.decoded = a_back.data();
    first.count = n;
    wire_hop(f, first);
    for (size_t i = 0; i < n; ++i) sum[i] = a_back[i] + local[i] + residual[i];

    WireHop hop;
    hop.received = received.data();
    hop.local = local.data();
    hop.residual = residual.data();
    hop.divisor = 4;
    hop.encoded = out.data();
    hop.decoded = value.data();
    hop.count = n;
    wire_hop(f, hop);
    for (size_t i = 0; i < n; ++i) {
      // decoded * divisor + residual gives the sum back, to float rounding.
      EXPECT_NEAR(value[i] * 4 + residual[i], sum[i], 1e-5f * (std::fabs(sum[i]) + 1)) << wire_format_name(f);
    }
  }
}

// The SIMD kernels (where the CPU has them) take whole vectors and the
// scalar code the rest: a block of 32 and the same block less its last
// element (which the scalar code then encodes whole) must give the same
// codes and decode to the same bits.
TEST(WireFormat, VectorAndScalarCodesAgree) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int> exponent(-30, 9);  // below v[0]
  for (WireFormat f : kFormats) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> v(32);
      for (float& x : v) x = u(rng) * std::ldexp(1.0f, exponent(rng) / (trial % 3 + 1));
      v[0] = 1e4f;  // the block's largest, in both encodings
      if (trial % 5 == 0) v[3] = NAN;
      if (trial % 7 == 0) v[4] = -INFINITY;
      if (trial % 11 == 0) v[5] = 1e-40f;
      if (f == WireFormat::kFp16) v[0] = 1e3f;
      std::vector<unsigned char> whole(wire_bytes(f, 32)), less(wire_bytes(f, 31));
      WireHop hop;
      hop.local = v.data();
      hop.encoded = whole.data();
      hop.count = 32;
      wire_hop(f, hop);
      hop.encoded = less.data();
      hop.count = 31;
      wire_hop(f, hop);
      const size_t head = scaled(f) ? 4 : 0, width = wire_element_bytes(f);
      ASSERT_EQ(std::memcmp(whole.data(), less.data(), head + 31 * width), 0) << wire_format_name(f) << " trial " << trial;
      std::vector<float> a(32), b(31);
      wire_decode(f, whole.data(), 32, DataType::kFloat32, a.data());
      wire_decode(f, less.data(), 31, DataType::kFloat32, b.data());
      ASSERT_EQ(std::memcmp(a.data(), b.data(), 31 * 4), 0) << wire_format_name(f) << " trial " << trial;
    }
  }
}

// Every kernel level this CPU runs gives the scalar code's bytes and
// decodes to its bits: blocks of every length up to two blocks and a half
// (so every vector width meets its tail), with NaN, both infinities,
// subnormals, signed zeros and values past every format's range.
TEST(WireFormat, EveryKernelLevelGivesTheScalarBits) {
  const WireKernels best = wire_kernels_supported();
  std::cout << "kernel levels on this CPU: scalar";
  for (WireKernels k : {WireKernels::kAvx2, WireKernels::kAvx512}) {
    if (k <= best) std::cout << ", " << wire_kernels_name(k);
  }
  std::cout << "\n";
  struct Restore {
    ~Restore() { set_wire_kernels(wire_kernels_supported()); }
  } restore;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int> exponent(-140, 127), length(1, 2 * 256 + 128), pick(0, 15);
  const float specials[] = {NAN, INFINITY, -INFINITY, 1e-40f, -1e-45f, 0.0f, -0.0f, 3e38f, -65504.0f, 70000.0f};
  for (WireFormat f : kFormats) {
    for (int trial = 0; trial < 60; ++trial) {
      const size_t n = static_cast<size_t>(length(rng));
      std::vector<float> v(n);
      const int range = trial % 3 == 0 ? 140 : 12;  // some blocks span float's whole range
      for (float& x : v) {
        x = u(rng) * std::ldexp(1.0f, std::max(-range, std::min(range, exponent(rng) % (range + 1))));
        if (pick(rng) == 0) x = specials[rng() % (sizeof(specials) / sizeof(specials[0]))];
      }
      auto run = [&](WireKernels k, std::vector<unsigned char>* encoded, std::vector<float>* decoded,
                     std::vector<float>* again) {
        ASSERT_EQ(set_wire_kernels(k), k);
        encoded->assign(wire_bytes(f, n), 0);
        decoded->assign(n, 0);
        again->assign(n, 0);
        WireHop hop;
        hop.local = v.data();
        hop.encoded = encoded->data();
        hop.decoded = decoded->data();
        hop.count = n;
        wire_hop(f, hop);
        wire_decode(f, encoded->data(), n, DataType::kFloat32, again->data());
      };
      std::vector<unsigned char> want_bytes, bytes;
      std::vector<float> want_back, back, want_again, again;
      run(WireKernels::kScalar, &want_bytes, &want_back, &want_again);
      for (WireKernels k : {WireKernels::kAvx2, WireKernels::kAvx512}) {
        if (k > best) continue;
        run(k, &bytes, &back, &again);
        const std::string where = std::string(wire_format_name(f)) + " " + wire_kernels_name(k) + ", " +
                                  std::to_string(n) + " elements, trial " + std::to_string(trial);
        ASSERT_EQ(bytes, want_bytes) << where;
        ASSERT_EQ(std::memcmp(back.data(), want_back.data(), n * 4), 0) << where;
        ASSERT_EQ(std::memcmp(again.data(), want_again.data(), n * 4), 0) << where;
      }
    }
  }
}

TEST(WireFormat, NarrowDtypesInAndOut) {
  for (WireFormat f : kFormats) {
    std::vector<uint16_t> h(50), b(50);
    for (size_t i = 0; i < h.size(); ++i) {
      h[i] = float_to_fp16(static_cast<float>(i) - 20.5f);
      b[i] = float_to_bf16(static_cast<float>(i) * 3 - 20);
    }
    for (DataType dt : {DataType::kFloat16, DataType::kBfloat16}) {
      const std::vector<uint16_t>& in = dt == DataType::kFloat16 ? h : b;
      std::vector<unsigned char> enc(wire_bytes(f, in.size()));
      std::vector<uint16_t> out(in.size());
      WireHop hop;
      hop.local = in.data();
      hop.encoded = enc.data();
      hop.decoded = out.data();
      hop.dtype = dt;
      hop.count = in.size();
      wire_hop(f, hop);
      for (size_t i = 0; i < in.size(); ++i) {
        const float want = dt == DataType::kFloat16 ? fp16_to_float(in[i]) : bf16_to_float(in[i]);
        const float got = dt == DataType::kFloat16 ? fp16_to_float(out[i]) : bf16_to_float(out[i]);
        EXPECT_NEAR(got, want, std::fabs(want) / 8 + 0.5f) << wire_format_name(f) << " " << dtype_name(dt);
      }
    }
  }
}

}  // namespace
}  // namespace kolo
