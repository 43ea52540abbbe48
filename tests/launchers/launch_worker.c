/* A rank of the launcher tests, in C over the C API: the world comes from
 * whatever launcher started it. Checks allreduce (int32 sum, float average),
 * allgather and broadcast on a few sizes against values computed here, then
 * prints "rank R ok". argv[1]: the world size the launcher was asked for.
 * Exits 10 + the kolo_result_t on a kolo error, 1 on a wrong result. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bindings/c/kolo.h"

static int fail(const char* what, kolo_result_t r) {
  printf("%s failed: %s: %s\n", what, kolo_result_string(r), kolo_last_error());
  fflush(stdout);
  return 10 + (int)r;
}

static int wrong(const char* what, size_t count, size_t i) {
  printf("%s of %zu elements wrong at %zu\n", what, count, i);
  fflush(stdout);
  return 1;
}

int main(int argc, char** argv) {
  kolo_comm_t comm;
  kolo_result_t r = kolo_comm_init_from_env(&comm);
  if (r != KOLO_SUCCESS) return fail("init", r);
  int rank = 0, n = 0, local_rank = 0, local_size = 0;
  kolo_comm_rank(comm, &rank);
  kolo_comm_size(comm, &n);
  kolo_comm_local_rank(comm, &local_rank);
  kolo_comm_local_size(comm, &local_size);
  printf("rank %d of %d, local %d of %d\n", rank, n, local_rank, local_size);
  if (argc > 1 && atoi(argv[1]) != n) {
    printf("world size %d, the launcher was asked for %s\n", n, argv[1]);
    return 1;
  }
  const size_t counts[] = {1, 1000, 300007};
  for (int c = 0; c < 3; ++c) {
    size_t count = counts[c];
    int32_t* in = malloc(count * sizeof(int32_t));
    int32_t* out = malloc(count * sizeof(int32_t));
    float* f = malloc(count * sizeof(float));
    int32_t* all = malloc(count * (size_t)n * sizeof(int32_t));
    for (size_t i = 0; i < count; ++i) {
      in[i] = rank * 1000 + (int32_t)(i % 977);
      f[i] = (float)(rank + 1);
    }
    if ((r = kolo_allreduce(comm, in, out, count, KOLO_INT32, KOLO_SUM))) return fail("allreduce", r);
    for (size_t i = 0; i < count; ++i) {
      if (out[i] != 1000 * n * (n - 1) / 2 + n * (int32_t)(i % 977)) return wrong("allreduce sum", count, i);
    }
    if ((r = kolo_allreduce(comm, f, f, count, KOLO_FLOAT32, KOLO_AVG))) return fail("allreduce", r);
    for (size_t i = 0; i < count; ++i) {
      if (f[i] != (float)(n + 1) / 2.0f) return wrong("allreduce average", count, i);
    }
    if ((r = kolo_allgather(comm, in, all, count, KOLO_INT32))) return fail("allgather", r);
    for (int k = 0; k < n; ++k) {
      if (all[(size_t)k * count] != k * 1000) return wrong("allgather", count, (size_t)k * count);
    }
    if ((r = kolo_broadcast(comm, in, count, KOLO_INT32, n - 1))) return fail("broadcast", r);
    if (in[0] != (n - 1) * 1000) return wrong("broadcast", count, 0);
    free(in);
    free(out);
    free(f);
    free(all);
  }
  if ((r = kolo_barrier(comm))) return fail("barrier", r);
  printf("rank %d ok\n", rank);
  fflush(stdout);
  kolo_comm_destroy(comm);
  return 0;
}
