// What one small blocking allreduce costs through the C API, in
// nanoseconds: the mean over a batch of back-to-back calls, the best of
// several batches. kolo_bench times each call on its own (two clock reads
// around it, 0.1 us resolution), which is right for a sweep but too coarse
// for the fixed cost of a call; this is the figure to compare when the call
// path changes (alone in the world: the call path only; on two ranks: the
// call path and one message each way).
//   Usage: kolorun -np N call_cost [--bytes B ...] [--iters I] [--batches K]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bindings/c/kolo.h"

namespace {

struct Options {
  std::vector<size_t> bytes;
  int iters = 100000;
  int batches = 5;
};

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--bytes") == 0 && has_value) {
      o->bytes.push_back(std::strtoull(argv[++i], nullptr, 10));
    } else if (std::strcmp(argv[i], "--iters") == 0 && has_value) {
      o->iters = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--batches") == 0 && has_value) {
      o->batches = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: call_cost [--bytes B ...] [--iters I] [--batches K]  (float32 sum)\n");
      return false;
    }
  }
  if (o->bytes.empty()) o->bytes = {8, 128, 2048};
  for (size_t b : o->bytes) {
    if (b % 4 != 0) {
      std::fprintf(stderr, "call_cost: --bytes %zu is not a whole number of float32 elements\n", b);
      return false;
    }
  }
  if (o->iters < 1 || o->batches < 1) {
    std::fprintf(stderr, "call_cost: --iters and --batches must be at least 1\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) return 2;
  kolo_comm_t comm;
  if (kolo_result_t r = kolo_comm_init_from_env(&comm)) {
    std::fprintf(stderr, "call_cost: %s: %s\n", kolo_result_string(r), kolo_last_error());
    return 1;
  }
  int rank = 0, size = 1;
  kolo_comm_rank(comm, &rank);
  kolo_comm_size(comm, &size);
  if (rank == 0) {
    std::printf("# kolo allreduce float32 sum, %d ranks: mean ns per call, best of %d batches of %d\n", size,
                o.batches, o.iters);
  }
  // A failed call: its message, and the end of the run.
  int status = 0;
  const auto failed = [&](kolo_result_t r) {
    if (r == KOLO_SUCCESS) return false;
    std::fprintf(stderr, "call_cost: rank %d: %s: %s\n", rank, kolo_result_string(r), kolo_last_error());
    status = 1;
    return true;
  };
  for (size_t bytes : o.bytes) {
    const size_t count = bytes / 4;
    std::vector<float> send(count, 1.0f), recv(count);
    double best = 1e300;
    for (int b = 0; b <= o.batches && status == 0; ++b) {  // batch 0 warms up
      if (failed(kolo_barrier(comm))) break;
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < o.iters; ++i) {
        if (failed(kolo_allreduce(comm, send.data(), recv.data(), count, KOLO_FLOAT32, KOLO_SUM))) break;
      }
      const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
      if (b > 0 && ns / o.iters < best) best = ns / o.iters;
    }
    if (status != 0) break;
    if (count > 0 && recv[0] != static_cast<float>(size)) {
      std::fprintf(stderr, "call_cost: rank %d got %g, not %d\n", rank, recv[0], size);
      status = 1;
      break;
    }
    // The slowest rank's best batch: every rank waits for it.
    double mine = best, worst = 0;
    if (failed(kolo_allreduce(comm, &mine, &worst, 1, KOLO_FLOAT64, KOLO_MAX))) break;
    if (rank == 0) std::printf("%10zu B %10.0f ns\n", bytes, worst);
  }
  kolo_comm_destroy(comm);
  return status;
}
