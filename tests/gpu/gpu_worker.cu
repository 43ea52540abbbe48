// A rank of the GPU tests and benchmark, through the C API, on a real GPU
// (several ranks may share one). Modes:
//   check  every collective on device buffers, every dtype x op for
//          allreduce, blocking and on a stream, checked against
//          tests/reference.h; stream ordering (the stream's earlier kernel
//          writes the input, its later copy reads the result)
//   bench  allreduce bus bandwidth on device buffers, 1 MiB .. 1 GiB, next
//          to the GPU's device-to-device copy bandwidth measured in the
//          same run (rank 0 prints the table)
// With no GPU it prints "SKIP: <why>" and exits 0 (gpu_test.sh reports
// that as a skip). Failures exit 1 after printing what differed.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bindings/c/kolo.h"
#include "collectives/dtype.h"
#include "tests/reference.h"

namespace {

using kolo::DataType;
using kolo::ReduceOp;

int failures = 0;
int rank = 0, world = 1;

#define CUDA_OK(call)                                                                            \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::printf("rank %d: %s failed: %s\n", rank, #call, cudaGetErrorString(e_));              \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

#define KOLO_OK(call)                                                                            \
  do {                                                                                           \
    kolo_result_t r_ = (call);                                                                   \
    if (r_ != KOLO_SUCCESS) {                                                                    \
      std::printf("rank %d: %s failed: %s: %s\n", rank, #call, kolo_result_string(r_), kolo_last_error()); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

std::vector<unsigned char> inputs(DataType d, ReduceOp op, int r, size_t count) {
  std::vector<unsigned char> b(count * kolo::dtype_size(d));
  for (size_t i = 0; i < count; ++i) kolo::ref::store(d, b.data(), i, kolo::ref::input_value(r, i, op, kolo::ref::is_signed(d)));
  return b;
}

std::vector<unsigned char> expected(DataType d, ReduceOp op, size_t count) {
  std::vector<unsigned char> b(count * kolo::dtype_size(d));
  for (size_t i = 0; i < count; ++i) kolo::ref::expected(d, op, world, i, b.data(), i);
  return b;
}

void expect_equal(const void* device, const std::vector<unsigned char>& want, const std::string& what) {
  std::vector<unsigned char> got(want.size());
  if (!want.empty()) CUDA_OK(cudaMemcpy(got.data(), device, want.size(), cudaMemcpyDeviceToHost));
  if (got != want) {
    ++failures;
    std::printf("rank %d: FAIL %s\n", rank, what.c_str());
  }
}

// Keeps the stream busy a while: the collective enqueued after it (and
// after the copy of its input) must wait for both.
__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

int check(kolo_comm_t comm) {
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t counts[] = {0, 1, 1031, (1u << 20) + 3};
  for (int di = 0; di < kolo::kNumDataTypes; ++di) {
    for (int oi = 0; oi < kolo::kNumReduceOps; ++oi) {
      const auto d = static_cast<DataType>(di);
      const auto op = static_cast<ReduceOp>(oi);
      for (size_t count : counts) {
        const auto in = inputs(d, op, rank, count);
        const auto want = expected(d, op, count);
        void* buf = nullptr;
        CUDA_OK(cudaMalloc(&buf, in.size() + 1));
        const bool on_stream = count % 2 == 1;
        const std::string what = std::string(kolo::dtype_name(d)) + " " + kolo::op_name(op) + " count " +
                                 std::to_string(count) + (on_stream ? " on a stream" : " blocking");
        if (on_stream) {
          // The input arrives late on the stream; the result is read on it.
          spin<<<1, 1, 0, stream>>>(1 << 20);
          CUDA_OK(cudaMemcpyAsync(buf, in.data(), in.size(), cudaMemcpyHostToDevice, stream));
          KOLO_OK(kolo_allreduce_stream(comm, buf, buf, count, static_cast<kolo_dtype_t>(di),
                                        static_cast<kolo_op_t>(oi), stream));
          std::vector<unsigned char> got(in.size());
          CUDA_OK(cudaMemcpyAsync(got.data(), buf, in.size(), cudaMemcpyDeviceToHost, stream));
          CUDA_OK(cudaStreamSynchronize(stream));
          if (got != want) {
            ++failures;
            std::printf("rank %d: FAIL %s\n", rank, what.c_str());
          }
        } else {
          if (!in.empty()) CUDA_OK(cudaMemcpy(buf, in.data(), in.size(), cudaMemcpyHostToDevice));
          KOLO_OK(kolo_allreduce(comm, buf, buf, count, static_cast<kolo_dtype_t>(di), static_cast<kolo_op_t>(oi)));
          expect_equal(buf, want, what);
        }
        CUDA_OK(cudaFree(buf));
      }
    }
  }
  // A wire format on device buffers is refused, saying why, and leaves the
  // communicator working; the communicator's default gives way to them.
  {
    void* buf = nullptr;
    CUDA_OK(cudaMalloc(&buf, 4096));
    const kolo_result_t r = kolo_allreduce_wire(comm, buf, buf, 1024, KOLO_FLOAT32, KOLO_SUM, KOLO_WIRE_BF16, nullptr);
    if (r != KOLO_ERR_UNSUPPORTED || std::string(kolo_last_error()).find("needs host buffers") == std::string::npos) {
      ++failures;
      std::printf("rank %d: FAIL wire format on device buffers gave %s: %s\n", rank, kolo_result_string(r),
                  kolo_last_error());
    }
    CUDA_OK(cudaFree(buf));
  }
  kolo_result_t async_error;
  KOLO_OK(kolo_comm_get_async_error(comm, &async_error));
  if (async_error != KOLO_SUCCESS) {
    ++failures;
    std::printf("rank %d: FAIL async error %s: %s\n", rank, kolo_result_string(async_error), kolo_last_error());
  }

  // reduce-scatter, allgather (in place), broadcast from the last rank.
  const auto d = DataType::kFloat32;
  const size_t block = 100003;
  const auto sum = expected(d, ReduceOp::kSum, block * world);
  void *send, *recv, *all;
  CUDA_OK(cudaMalloc(&send, block * world * 4));
  CUDA_OK(cudaMalloc(&recv, block * 4));
  CUDA_OK(cudaMalloc(&all, block * world * 4));
  const auto in = inputs(d, ReduceOp::kSum, rank, block * world);
  CUDA_OK(cudaMemcpy(send, in.data(), in.size(), cudaMemcpyHostToDevice));
  KOLO_OK(kolo_reduce_scatter_stream(comm, send, recv, block, KOLO_FLOAT32, KOLO_SUM, stream));
  CUDA_OK(cudaMemcpyAsync(static_cast<char*>(all) + rank * block * 4, recv, block * 4, cudaMemcpyDeviceToDevice,
                          stream));
  KOLO_OK(kolo_allgather_stream(comm, static_cast<char*>(all) + rank * block * 4, all, block, KOLO_FLOAT32, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  expect_equal(all, sum, "reduce_scatter then allgather");
  const auto root_data = inputs(d, ReduceOp::kSum, world - 1, block);
  if (rank == world - 1) CUDA_OK(cudaMemcpy(send, root_data.data(), root_data.size(), cudaMemcpyHostToDevice));
  KOLO_OK(kolo_broadcast(comm, send, block, KOLO_FLOAT32, world - 1));
  expect_equal(send, root_data, "broadcast");

  // Mixing host and device buffers is refused, naming them.
  std::vector<float> host(16);
  kolo_result_t mixed = kolo_allreduce(comm, send, host.data(), 16, KOLO_FLOAT32, KOLO_SUM);
  if (mixed != KOLO_ERR_INVALID_ARGUMENT) {
    ++failures;
    std::printf("rank %d: FAIL mixing host and device buffers returned %s\n", rank, kolo_result_string(mixed));
  }
  CUDA_OK(cudaFree(send));
  CUDA_OK(cudaFree(recv));
  CUDA_OK(cudaFree(all));
  CUDA_OK(cudaStreamDestroy(stream));
  if (failures == 0) std::printf("rank %d ok\n", rank);
  return failures == 0 ? 0 : 1;
}

// Device-to-device copy bandwidth: bytes read plus bytes written per second.
double copy_bandwidth(size_t bytes) {
  void *a, *b;
  CUDA_OK(cudaMalloc(&a, bytes));
  CUDA_OK(cudaMalloc(&b, bytes));
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  CUDA_OK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  const int reps = 20;
  CUDA_OK(cudaEventRecord(start));
  for (int i = 0; i < reps; ++i) CUDA_OK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
  CUDA_OK(cudaEventRecord(stop));
  CUDA_OK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaFree(b));
  return 2.0 * bytes * reps / (ms / 1e3);
}

int bench(kolo_comm_t comm) {
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  double copy_bw = 0;
  if (rank == 0) copy_bw = copy_bandwidth(size_t{1} << 30);
  KOLO_OK(kolo_barrier(comm));
  if (rank == 0) {
    std::printf("device-to-device copy bandwidth (read + write): %.1f GB/s\n", copy_bw / 1e9);
    std::printf("%12s %10s %12s %14s\n", "bytes", "time_us", "busbw_GB/s", "busbw/copy_bw");
  }
  for (size_t bytes = size_t{1} << 20; bytes <= (size_t{1} << 30); bytes *= 4) {
    void* buf;
    CUDA_OK(cudaMalloc(&buf, bytes));
    CUDA_OK(cudaMemset(buf, 0, bytes));
    const size_t count = bytes / 4;
    for (int i = 0; i < 2; ++i) KOLO_OK(kolo_allreduce_stream(comm, buf, buf, count, KOLO_FLOAT32, KOLO_SUM, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    KOLO_OK(kolo_barrier(comm));
    const int reps = bytes >= (size_t{256} << 20) ? 5 : 20;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) KOLO_OK(kolo_allreduce_stream(comm, buf, buf, count, KOLO_FLOAT32, KOLO_SUM, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
    // Bus bandwidth as NCCL's tests define it: algbw * 2(N-1)/N.
    const double busbw = bytes / s * 2.0 * (world - 1) / world;
    if (rank == 0) std::printf("%12zu %10.1f %12.2f %14.3f\n", bytes, s * 1e6, busbw / 1e9, busbw / copy_bw);
    CUDA_OK(cudaFree(buf));
  }
  CUDA_OK(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "check";
  int gpus = 0;
  cudaError_t e = cudaGetDeviceCount(&gpus);
  if (e != cudaSuccess || gpus == 0) {
    std::printf("SKIP: no GPU (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    return 0;
  }
  if (mode == "probe") {
    std::printf("%d GPU(s)\n", gpus);
    return 0;
  }
  kolo_comm_t comm;
  KOLO_OK(kolo_comm_init_from_env(&comm));
  kolo_comm_rank(comm, &rank);
  kolo_comm_size(comm, &world);
  int device = -1;
  KOLO_OK(kolo_comm_gpu(comm, &device));
  CUDA_OK(cudaSetDevice(device));
  if (rank == 0) std::printf("%d ranks, rank 0 on GPU %d\n", world, device);
  const int rc = mode == "bench" ? bench(comm) : check(comm);
  kolo_comm_destroy(comm);
  return rc;
}
