// A rank of the multi-process tests, using only the C API. Modes:
//   check    run every collective on a few sizes and verify the results
//   init     only create the communicator (for rendezvous failure tests)
//   long     allreduce 64 MiB over and over for up to a minute (for fault
//            tests that kill a rank midway)
//   text     rank 0 broadcasts TEXT_TO_SEND (an environment variable),
//            repeated to 1 MiB, and every rank checks it arrived (what an
//            encrypted job must not show on the wire: tests/encrypt_test.sh)
// Exits 0 on success; on failure prints kolo_last_error() and exits with
// 10 + the kolo_result_t, so scripts can tell timeouts from other errors.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bindings/c/kolo.h"

namespace {

int fail(const char* what, kolo_result_t r) {
  std::printf("%s failed: %s: %s\n", what, kolo_result_string(r), kolo_last_error());
  std::fflush(stdout);
  return 10 + static_cast<int>(r);
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "check";
  kolo_comm_t comm;
  kolo_result_t r = kolo_comm_init_from_env(&comm);
  if (r != KOLO_SUCCESS) return fail("init", r);
  int rank = 0, n = 0, local_rank = 0, local_size = 0;
  kolo_comm_rank(comm, &rank);
  kolo_comm_size(comm, &n);
  kolo_comm_local_rank(comm, &local_rank);
  kolo_comm_local_size(comm, &local_size);
  std::printf("rank %d of %d, local %d of %d\n", rank, n, local_rank, local_size);
  if (mode == "long") {
    const size_t count = 16u << 20;
    std::vector<float> in(count, 1.0f), out(count);
    std::printf("rank %d looping\n", rank);
    std::fflush(stdout);
    for (int i = 0; i < 2000; ++i) {
      if ((r = kolo_allreduce(comm, in.data(), out.data(), count, KOLO_FLOAT32, KOLO_SUM))) {
        int code = fail("allreduce", r);
        kolo_result_t async = KOLO_SUCCESS;
        kolo_comm_get_async_error(comm, &async);
        std::printf("async error: %s\n", kolo_result_string(async));
        kolo_comm_destroy(comm);  // a failed communicator must still come apart cleanly
        return code;
      }
    }
  }
  if (mode == "text") {
    const char* text = std::getenv("TEXT_TO_SEND");
    std::string want;
    while (text && *text && want.size() < (1u << 20)) want += text;
    std::string got = rank == 0 ? want : std::string(want.size(), '\0');
    if ((r = kolo_broadcast(comm, &got[0], got.size(), KOLO_UINT8, 0))) return fail("broadcast", r);
    if (got != want) {
      std::printf("rank %d: the broadcast text arrived altered\n", rank);
      return 1;
    }
    std::printf("rank %d: the text arrived\n", rank);
  }
  if (mode == "check") {
    for (size_t count : {size_t{1}, size_t{1000}, size_t{300000}}) {
      std::vector<int32_t> in(count), out(count);
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(rank * 1000 + i % 977);
      if ((r = kolo_allreduce(comm, in.data(), out.data(), count, KOLO_INT32, KOLO_SUM))) return fail("allreduce", r);
      for (size_t i = 0; i < count; ++i) {
        int32_t want = static_cast<int32_t>(1000 * n * (n - 1) / 2 + n * static_cast<int>(i % 977));
        if (out[i] != want) {
          std::printf("allreduce wrong at %zu: %d != %d\n", i, out[i], want);
          return 1;
        }
      }
      std::vector<int32_t> all(count * n);
      if ((r = kolo_allgather(comm, in.data(), all.data(), count, KOLO_INT32))) return fail("allgather", r);
      for (int k = 0; k < n; ++k) {
        if (all[k * count] != k * 1000) {
          std::printf("allgather wrong for block %d\n", k);
          return 1;
        }
      }
      std::vector<int32_t> b = in;
      if ((r = kolo_broadcast(comm, b.data(), count, KOLO_INT32, n - 1))) return fail("broadcast", r);
      if (b[0] != (n - 1) * 1000) {
        std::printf("broadcast wrong\n");
        return 1;
      }
      // The rooted collectives and alltoall, over real processes.
      if ((r = kolo_reduce(comm, in.data(), rank == 0 ? out.data() : nullptr, count, KOLO_INT32, KOLO_SUM, 0))) {
        return fail("reduce", r);
      }
      if (rank == 0 && out[count - 1] != static_cast<int32_t>(1000 * n * (n - 1) / 2 + n * static_cast<int>((count - 1) % 977))) {
        std::printf("reduce wrong\n");
        return 1;
      }
      if ((r = kolo_gather(comm, in.data(), all.data(), count, KOLO_INT32, n - 1))) return fail("gather", r);
      for (int k = 0; k < n && rank == n - 1; ++k) {
        if (all[k * count] != k * 1000) {
          std::printf("gather wrong for block %d\n", k);
          return 1;
        }
      }
      if ((r = kolo_scatter(comm, all.data(), out.data(), count, KOLO_INT32, n - 1))) return fail("scatter", r);
      if (out[0] != rank * 1000) {
        std::printf("scatter wrong\n");
        return 1;
      }
      std::vector<int32_t> to_all(count * n), from_all(count * n);
      for (int k = 0; k < n; ++k) to_all[k * count] = rank * 100 + k;
      if ((r = kolo_alltoall(comm, to_all.data(), from_all.data(), count, KOLO_INT32))) return fail("alltoall", r);
      for (int k = 0; k < n; ++k) {
        if (from_all[k * count] != k * 100 + rank) {
          std::printf("alltoall wrong from rank %d\n", k);
          return 1;
        }
      }
    }
    if ((r = kolo_barrier(comm))) return fail("barrier", r);
    std::printf("rank %d ok\n", rank);
  }
  kolo_comm_destroy(comm);
  return 0;
}
