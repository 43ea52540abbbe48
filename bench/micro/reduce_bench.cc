// Reduction kernels against memcpy: how close each dtype x op kernel gets to
// the memory system's own speed.
//
// A ring step reduces a received segment with local data into a third
// buffer (out = a op b), so that is what is measured, out of place, through
// the same ReduceFn pointer the pipeline calls. Two sizes show two regimes:
//   1 MiB   three buffers fit in L2/L3, like the pipeline's 512 KiB segments
//           reduced right after they arrive;
//   64 MiB  three buffers stream from DRAM.
// Bytes per second count every byte touched: reduce reads a and b and writes
// out (3x the buffer), memcpy reads and writes (2x). A kernel is memory-bound
// when its GB/s is near memcpy's at the same size; far below means compute
// (conversions, missing vectorization) is the limit.
//
// Names: reduce/<dtype>/<op>/<bytes> and memcpy/<bytes>, so
// --benchmark_filter='reduce/float32/sum/' or '/67108864$' pick slices.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "collectives/dtype.h"
#include "collectives/reduce_kernels.h"

namespace {

constexpr size_t kSizes[] = {size_t{1} << 20, size_t{64} << 20};
constexpr size_t kMaxBytes = size_t{64} << 20;

// Three buffers shared by every benchmark, allocated and filled once: filling
// 3 x 64 MiB per benchmark run would dominate the run time of the suite.
struct Buffers {
  uint8_t* a;
  uint8_t* b;
  uint8_t* out;
};

uint8_t* alloc_filled(uint8_t byte) {
  // Page-aligned so every dtype's vector loads are aligned, and written now
  // so page faults happen here, not inside the first timed iteration.
  void* p = std::aligned_alloc(4096, kMaxBytes);
  if (p == nullptr) std::abort();
  std::memset(p, byte, kMaxBytes);
  return static_cast<uint8_t*>(p);
}

const Buffers& buffers() {
  // One byte pattern that is an ordinary (normal, finite) value in every
  // dtype, so no float kernel hits the slow denormal or NaN paths:
  //   0x3C.. is ~1.06 as fp16, ~0.0115 as bf16/float32, ~1.6e-18 as float64,
  //   60 as int8; 0x3B.. is about the same. Products stay normal too (the
  //   inputs never change, so nothing accumulates across iterations).
  // The integer results wrap, which the kernels define.
  static const Buffers b{alloc_filled(0x3C), alloc_filled(0x3B), alloc_filled(0)};
  return b;
}

void BM_reduce(benchmark::State& state, kolo::DataType dtype, kolo::ReduceOp op, size_t bytes) {
  const Buffers& buf = buffers();
  const kolo::ReduceFn fn = kolo::reduce_kernel(dtype, op);
  const size_t count = bytes / kolo::dtype_size(dtype);
  for (auto _ : state) {
    fn(buf.out, buf.a, buf.b, count);
    // The call is through a pointer into another translation unit, so it
    // cannot be elided; this only keeps the store from being reordered out.
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 3 * static_cast<int64_t>(bytes));
}

void BM_memcpy(benchmark::State& state, size_t bytes) {
  const Buffers& buf = buffers();
  for (auto _ : state) {
    // memcpy on a pointer the compiler can see is never read could be
    // dropped; DoNotOptimize + ClobberMemory make the copy observable.
    std::memcpy(buf.out, buf.a, bytes);
    benchmark::DoNotOptimize(buf.out);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * static_cast<int64_t>(bytes));
}

void register_all() {
  for (size_t bytes : kSizes) {
    // memcpy first at each size: it is the reference the kernels are read
    // against.
    benchmark::RegisterBenchmark(("memcpy/" + std::to_string(bytes)).c_str(), BM_memcpy, bytes);
    for (int d = 0; d < kolo::kNumDataTypes; ++d) {
      for (int o = 0; o < kolo::kNumReduceOps; ++o) {
        const auto dtype = static_cast<kolo::DataType>(d);
        const auto op = static_cast<kolo::ReduceOp>(o);
        const std::string name = std::string("reduce/") + kolo::dtype_name(dtype) + "/" + kolo::op_name(op) + "/" +
                                 std::to_string(bytes);
        benchmark::RegisterBenchmark(name.c_str(), BM_reduce, dtype, op, bytes);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
