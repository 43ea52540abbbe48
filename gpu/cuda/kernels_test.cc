// The GPU kernels against the CPU kernels of //collectives:kernels, which
// are the reference (they have their own test against closed-form values):
// every dtype x op, odd sizes, misaligned and in-place buffers, and values
// chosen to hit rounding, overflow, signed zeros, denormals and NaNs.
// Compiled by nvcc as host code (tools/bazel/cuda.bzl says why); without a
// GPU the GPU tests skip and say why.
#include "gpu/cuda/kernels.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/dtype.h"
#include "collectives/elementwise.h"
#include "collectives/reduce_kernels.h"

namespace kolo {

// Parameters print by name in gtest's messages (found by ADL).
void PrintTo(DataType dt, std::ostream* os) { *os << dtype_name(dt); }
void PrintTo(ReduceOp op, std::ostream* os) { *os << op_name(op); }

namespace cuda {
namespace {

// Empty when a GPU is usable, otherwise why not.
const std::string& no_gpu_reason() {
  static const std::string reason = [] {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      return "no usable GPU: cudaGetDeviceCount returned " + std::to_string(err) + " (" + cudaGetErrorString(err) + ")";
    }
    if (n == 0) return std::string("no GPU: cudaGetDeviceCount found no device");
    return std::string();
  }();
  return reason;
}

// ---- Element bit patterns, whatever the dtype.
struct Format {
  size_t size;
  bool floating;
  uint64_t exp_mask, man_mask, quiet;
};

Format format_of(DataType dt) {
  switch (dt) {
    case DataType::kFloat16: return {2, true, 0x7c00, 0x03ff, 0x0200};
    case DataType::kBfloat16: return {2, true, 0x7f80, 0x007f, 0x0040};
    case DataType::kFloat32: return {4, true, 0x7f800000, 0x007fffff, 0x00400000};
    case DataType::kFloat64: return {8, true, 0x7ff0000000000000, 0x000fffffffffffff, 0x0008000000000000};
    default: return {dtype_size(dt), false, 0, 0, 0};
  }
}

uint64_t get(const Format& f, const std::vector<unsigned char>& v, size_t i) {
  uint64_t x = 0;  // little-endian: the low bytes
  std::memcpy(&x, v.data() + i * f.size, f.size);
  return x;
}

void put(const Format& f, std::vector<unsigned char>& v, size_t i, uint64_t x) {
  std::memcpy(v.data() + i * f.size, &x, f.size);
}

bool is_nan(const Format& f, uint64_t x) {
  return f.floating && (x & f.exp_mask) == f.exp_mask && (x & f.man_mask) != 0;
}

// Random values, a quarter of them edge cases. Ordinary floats keep their
// exponent near 1 so sums and products mostly stay finite and round.
std::vector<unsigned char> values(DataType dt, size_t count, std::mt19937_64& rng) {
  const Format f = format_of(dt);
  const uint64_t sign = uint64_t{1} << (8 * f.size - 1);
  const uint64_t all = f.size == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * f.size)) - 1;
  std::vector<uint64_t> edges;
  if (f.floating) {
    const uint64_t inf = f.exp_mask;
    edges = {0,          sign,           inf,       inf | sign,           inf | f.quiet,  // +-0, +-inf, qNaN
             inf | f.quiet | sign | 5, inf | 1, inf | 3 | sign,  // payloads, signaling NaNs
             1,          f.man_mask,     1 | sign,  f.man_mask | sign,  // denormals
             f.man_mask + 1, (inf - 1) & ~f.man_mask, inf - 1, (inf - 1) | sign};  // min normal, max
  } else {
    edges = {0, 1, all, sign, sign - 1, all - 1};  // all ones, signed min and max, -2
  }
  const int man_bits = f.floating ? __builtin_popcountll(f.man_mask) : 0;
  const uint64_t bias = f.floating ? (f.exp_mask >> man_bits) / 2 : 0;
  std::vector<unsigned char> out(count * f.size);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t r = rng();
    uint64_t x = r & all;
    const int kind = static_cast<int>(r % 8);
    if (kind < 2) {
      x = edges[(r >> 8) % edges.size()];
    } else if (f.floating && kind < 6) {
      const uint64_t exp = bias - 5 + (r >> 20) % 11;
      x = (r & f.man_mask) | (exp << man_bits) | ((r >> 40) & 1 ? sign : 0);
    }
    put(f, out, i, x);
  }
  return out;
}

std::string hex(uint64_t x) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(x));
  return buf;
}

// Element i of the GPU's answer against the CPU's. Where the CPU gives a
// NaN, which NaN is partly the compiler's choice: of two NaN operands x86
// keeps the first, and GCC orders them differently in the vector loops and
// the scalar tails; a signaling NaN that a min/max passes through comes out
// quiet from F16C but not from the scalar fp16 tail. So a NaN result may be
// the CPU's bits or either NaN operand made quiet. The default NaN of
// invalid operations (inf - inf) has no such freedom.
::testing::AssertionResult same(const Format& f, uint64_t a, uint64_t b, uint64_t want, uint64_t got, size_t i) {
  if (got == want) return ::testing::AssertionSuccess();
  if (is_nan(f, want) && ((is_nan(f, a) && got == (a | f.quiet)) || (is_nan(f, b) && got == (b | f.quiet)))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "element " << i << ": a=" << hex(a) << " b=" << hex(b) << " cpu=" << hex(want)
                                       << " gpu=" << hex(got);
}

// Device memory, freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) { EXPECT_EQ(cudaMalloc(&ptr_, bytes), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  unsigned char* get() const { return static_cast<unsigned char*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

// 1 << 20 elements go through the vector loop many times over; the others
// are all tail, or one vector and a tail.
const size_t kCounts[] = {0, 1, 3, 1000, (size_t{1} << 20) + 7};

// Element offsets of out, a and b from a 256-byte aligned cudaMalloc: all
// aligned, all one element off (a scalar head, then vectors), and a alone
// off (no common alignment: all scalar).
struct Layout {
  size_t out, a, b;
};
const Layout kLayouts[] = {{0, 0, 0}, {1, 1, 1}, {0, 1, 0}};

enum class Alias { kNone, kOutIsA, kOutIsB };

class ReduceTest : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp>> {
 protected:
  void SetUp() override {
    if (!no_gpu_reason().empty()) GTEST_SKIP() << no_gpu_reason();
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_P(ReduceTest, MatchesCpuBitForBit) {
  const auto [dt, op] = GetParam();
  const Format f = format_of(dt);
  const ReduceFn cpu = reduce_kernel(dt, op);
  ASSERT_NE(cpu, nullptr);
  std::mt19937_64 rng(static_cast<uint64_t>(dt) * 131 + static_cast<uint64_t>(op));
  for (size_t count : kCounts) {
    for (const Layout& l : kLayouts) {
      for (Alias alias : {Alias::kNone, Alias::kOutIsA, Alias::kOutIsB}) {
        SCOPED_TRACE("count " + std::to_string(count) + ", offsets out/a/b " + std::to_string(l.out) + "/" +
                     std::to_string(l.a) + "/" + std::to_string(l.b) + ", alias " +
                     std::to_string(static_cast<int>(alias)));
        // Buffers hold 16 spare elements: a kernel that writes outside
        // [offset, offset + count) changes them.
        const size_t slots = count + 16;
        std::vector<unsigned char> a = values(dt, slots, rng), b = values(dt, slots, rng);
        // One float pair in twenty is (x, -x): a zero whose sign the
        // rounding mode decides.
        for (size_t i = 0; f.floating && i < count; ++i) {
          if (rng() % 20 == 0) put(f, b, i + l.b, get(f, a, i + l.a) ^ (uint64_t{1} << (8 * f.size - 1)));
        }
        std::vector<unsigned char> guard = values(dt, slots, rng);
        DeviceBuffer da(slots * f.size), db(slots * f.size), dout(slots * f.size);
        ASSERT_EQ(cudaMemcpy(da.get(), a.data(), a.size(), cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(db.get(), b.data(), b.size(), cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dout.get(), guard.data(), guard.size(), cudaMemcpyHostToDevice), cudaSuccess);

        unsigned char* pa = da.get() + l.a * f.size;
        unsigned char* pb = db.get() + l.b * f.size;
        unsigned char* po = alias == Alias::kOutIsA ? pa : alias == Alias::kOutIsB ? pb : dout.get() + l.out * f.size;
        // The legacy default stream for one layout, a created one otherwise.
        void* s = l.out == 1 ? nullptr : stream_;
        ASSERT_EQ(enqueue_reduce(dt, op, po, pa, pb, count, s), 0);
        ASSERT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(s)), cudaSuccess);

        // What the output buffer should now hold, spare slots included.
        std::vector<unsigned char> want = alias == Alias::kOutIsA ? a : alias == Alias::kOutIsB ? b : guard;
        const size_t out_off = alias == Alias::kOutIsA ? l.a : alias == Alias::kOutIsB ? l.b : l.out;
        cpu(want.data() + out_off * f.size, a.data() + l.a * f.size, b.data() + l.b * f.size, count);
        unsigned char* dev_out = alias == Alias::kOutIsA ? da.get() : alias == Alias::kOutIsB ? db.get() : dout.get();
        std::vector<unsigned char> got(want.size());
        ASSERT_EQ(cudaMemcpy(got.data(), dev_out, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
        int failures = 0;
        for (size_t i = 0; i < slots && failures < 5; ++i) {
          const bool in_range = i >= out_off && i < out_off + count;
          const uint64_t ea = in_range ? get(f, a, i - out_off + l.a) : 0;
          const uint64_t eb = in_range ? get(f, b, i - out_off + l.b) : 0;
          auto r = same(f, ea, eb, get(f, want, i), get(f, got, i), i);
          if (!r) {
            ++failures;
            ADD_FAILURE() << (in_range ? "" : "outside the range: ") << r.message();
          }
        }
        if (failures) return;  // one layout's failures say enough
      }
    }
  }
}

// Failures (up to 5 reported) of a kernel of one input, element by element
// against the host's result.
int elementwise_failures(const Format& f, const std::vector<unsigned char>& in, const std::vector<unsigned char>& want,
                         const std::vector<unsigned char>& got) {
  int failures = 0;
  for (size_t i = 0; i < in.size() / f.size && failures < 5; ++i) {
    const uint64_t x = get(f, in, i);
    auto r = same(f, x, x, get(f, want, i), get(f, got, i), i);
    if (!r) {
      ++failures;
      ADD_FAILURE() << r.message();
    }
  }
  return failures;
}

class PerDtypeTest : public ::testing::TestWithParam<DataType> {
 protected:
  void SetUp() override {
    if (!no_gpu_reason().empty()) GTEST_SKIP() << no_gpu_reason();
  }
};
using DivideTest = PerDtypeTest;
using ScaleTest = PerDtypeTest;

TEST_P(DivideTest, MatchesCpuBitForBit) {
  const DataType dt = GetParam();
  const Format f = format_of(dt);
  const FinalizeFn cpu = finalize_kernel(dt, ReduceOp::kAvg);
  ASSERT_NE(cpu, nullptr);
  std::mt19937_64 rng(static_cast<uint64_t>(dt) + 7);
  for (int divisor : {1, 3, 300}) {
    for (size_t count : kCounts) {
      for (size_t offset : {0, 1}) {
        SCOPED_TRACE("divisor " + std::to_string(divisor) + ", count " + std::to_string(count) + ", offset " +
                     std::to_string(offset));
        const size_t slots = count + 16;
        const std::vector<unsigned char> in = values(dt, slots, rng);
        DeviceBuffer d(slots * f.size);
        ASSERT_EQ(cudaMemcpy(d.get(), in.data(), in.size(), cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(enqueue_divide(dt, d.get() + offset * f.size, count, divisor, nullptr), 0);
        std::vector<unsigned char> want = in, got(in.size());
        cpu(want.data() + offset * f.size, count, divisor);
        ASSERT_EQ(cudaMemcpy(got.data(), d.get(), got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
        if (elementwise_failures(f, in, want, got)) return;
      }
    }
  }
}

// The engine's prescale and postscale on a GPU against scale_copy, into
// another buffer and in place.
TEST_P(ScaleTest, MatchesCpuBitForBit) {
  const DataType dt = GetParam();
  const Format f = format_of(dt);
  std::mt19937_64 rng(static_cast<uint64_t>(dt) + 11);
  for (double factor : {0.5, 1.0 / 3, -2.5, 1e30}) {
    for (size_t count : kCounts) {
      for (bool in_place : {false, true}) {
        SCOPED_TRACE("factor " + std::to_string(factor) + ", count " + std::to_string(count) +
                     (in_place ? ", in place" : ""));
        const size_t slots = count + 16;
        const std::vector<unsigned char> in = values(dt, slots, rng);
        DeviceBuffer d_in(slots * f.size), d_out(slots * f.size);
        ASSERT_EQ(cudaMemcpy(d_in.get(), in.data(), in.size(), cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(d_out.get(), in.data(), in.size(), cudaMemcpyHostToDevice), cudaSuccess);
        unsigned char* out = in_place ? d_in.get() : d_out.get();
        ASSERT_EQ(enqueue_scale(dt, out + f.size, d_in.get() + f.size, count, factor, nullptr), 0);
        std::vector<unsigned char> want = in, got(in.size());
        scale_copy(dt, want.data() + f.size, in.data() + f.size, count, factor);
        ASSERT_EQ(cudaMemcpy(got.data(), out, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
        if (elementwise_failures(f, in, want, got)) return;
      }
    }
  }
}

const DataType kAllTypes[] = {DataType::kInt8,    DataType::kUint8,   DataType::kInt32,    DataType::kUint32,
                              DataType::kInt64,   DataType::kUint64,  DataType::kFloat16,  DataType::kBfloat16,
                              DataType::kFloat32, DataType::kFloat64};

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceTest,
                         ::testing::Combine(::testing::ValuesIn(kAllTypes),
                                            ::testing::Values(ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin,
                                                              ReduceOp::kMax, ReduceOp::kAvg)),
                         [](const ::testing::TestParamInfo<ReduceTest::ParamType>& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_" +
                                  op_name(std::get<1>(info.param));
                         });

INSTANTIATE_TEST_SUITE_P(AllTypes, DivideTest, ::testing::ValuesIn(kAllTypes),
                         [](const ::testing::TestParamInfo<DataType>& info) { return dtype_name(info.param); });
INSTANTIATE_TEST_SUITE_P(AllTypes, ScaleTest, ::testing::ValuesIn(kAllTypes),
                         [](const ::testing::TestParamInfo<DataType>& info) { return dtype_name(info.param); });

// These run with or without a GPU: the calls return before touching CUDA,
// or report CUDA's error instead of crashing.
TEST(KernelsWithoutGpu, EmptyRangesLaunchNothing) {
  EXPECT_EQ(enqueue_reduce(DataType::kFloat32, ReduceOp::kSum, nullptr, nullptr, nullptr, 0, nullptr), 0);
  EXPECT_EQ(enqueue_divide(DataType::kFloat32, nullptr, 0, 3, nullptr), 0);
  EXPECT_EQ(enqueue_scale(DataType::kFloat32, nullptr, nullptr, 0, 0.5, nullptr), 0);
}

// Without a GPU the suite's point (the kernels on a GPU) is not reached:
// one "SKIPPED: reason" line, which tools/test.sh counts as a skip.
class SayWhySkipped : public ::testing::Environment {
 public:
  void SetUp() override {
    if (!no_gpu_reason().empty()) std::printf("SKIPPED: %s\n", no_gpu_reason().c_str());
  }
};
const auto* const kSayWhySkipped = ::testing::AddGlobalTestEnvironment(new SayWhySkipped);

TEST(KernelsWithoutGpu, DivisionByZeroIsRefused) {
  EXPECT_EQ(enqueue_divide(DataType::kInt32, nullptr, 1, 0, nullptr), cudaErrorInvalidValue);
}

TEST(KernelsWithoutGpu, LaunchWithoutGpuReturnsCudaError) {
  if (no_gpu_reason().empty()) GTEST_SKIP() << "a GPU is present";
  float x = 0;  // never touched: the launch fails first
  const int err = enqueue_reduce(DataType::kFloat32, ReduceOp::kSum, &x, &x, &x, 1, nullptr);
  EXPECT_NE(err, 0);
  std::printf("without a GPU enqueue_reduce returns %d (%s)\n", err, cudaGetErrorString(static_cast<cudaError_t>(err)));
}

}  // namespace
}  // namespace cuda
}  // namespace kolo
