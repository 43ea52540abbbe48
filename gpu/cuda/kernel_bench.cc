// How close the reduce kernel comes to the GPU's memory bandwidth, measured
// against cudaMemcpy device to device in the same run, 1 MiB to 1 GiB.
// A copy moves 2 bytes per byte (read, write), a reduction 3 (read a, read
// b, write out); the ratio of the two rates is the kernel's efficiency.
// Compiled by nvcc as host code (tools/bazel/cuda.bzl says why).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "collectives/dtype.h"
#include "gpu/cuda/kernels.h"

namespace {

void check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "kernel_bench: %s failed: %s (%d)\n", what, cudaGetErrorString(err), static_cast<int>(err));
  std::exit(1);
}

// Seconds per call of `op`, averaged over enough calls to move ~16 GiB
// (launch overhead dominates small sizes otherwise), after two untimed ones.
double seconds_per_call(size_t bytes, cudaStream_t stream, const std::function<cudaError_t()>& op) {
  const int iters = static_cast<int>(std::clamp<size_t>((size_t{16} << 30) / bytes, 10, 2000));
  for (int i = 0; i < 2; ++i) check(op(), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) check(op(), "timed call");
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1e3 / iters;
}

}  // namespace

int main() {
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "kernel_bench: needs a GPU and found none (cudaGetDeviceCount: %s)\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 1;
  }
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("%s, %d SMs, %.1f GiB\n", prop.name, prop.multiProcessorCount, prop.totalGlobalMem / double(1 << 30));

  // Three buffers of the largest size that fits (1 GiB on any data-centre GPU).
  size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  size_t max_bytes = size_t{1} << 30;
  while (max_bytes > (size_t{1} << 20) && 3 * max_bytes > free_bytes * 9 / 10) max_bytes /= 2;
  void *a, *b, *out;
  check(cudaMalloc(&a, max_bytes), "cudaMalloc");
  check(cudaMalloc(&b, max_bytes), "cudaMalloc");
  check(cudaMalloc(&out, max_bytes), "cudaMalloc");
  // 0x3c3c...: ordinary finite values in every float format.
  check(cudaMemset(a, 0x3c, max_bytes), "cudaMemset");
  check(cudaMemset(b, 0x3c, max_bytes), "cudaMemset");
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");

  struct Kind {
    const char* name;
    kolo::DataType dtype;
    size_t size;
  };
  const Kind kinds[] = {{"fp32", kolo::DataType::kFloat32, 4},
                        {"fp16", kolo::DataType::kFloat16, 2},
                        {"bf16", kolo::DataType::kBfloat16, 2}};
  std::printf("%10s %12s", "size", "copy GB/s");
  for (const Kind& k : kinds) std::printf("   %s sum GB/s (/copy)", k.name);
  std::printf("\n");
  for (size_t bytes = size_t{1} << 20; bytes <= max_bytes; bytes *= 2) {
    const double copy = 2.0 * bytes / seconds_per_call(bytes, stream, [&] {
      return cudaMemcpyAsync(out, a, bytes, cudaMemcpyDeviceToDevice, stream);
    }) / 1e9;
    std::printf("%7zu MiB %12.1f", bytes >> 20, copy);
    for (const Kind& k : kinds) {
      const double rate = 3.0 * bytes / seconds_per_call(bytes, stream, [&] {
        return static_cast<cudaError_t>(
            kolo::cuda::enqueue_reduce(k.dtype, kolo::ReduceOp::kSum, out, a, b, bytes / k.size, stream));
      }) / 1e9;
      std::printf("   %10.1f (%5.1f%%)   ", rate, 100.0 * rate / copy);
    }
    std::printf("\n");
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  cudaStreamDestroy(stream);
  cudaFree(a);
  cudaFree(b);
  cudaFree(out);
  return 0;
}
