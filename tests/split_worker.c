/* A rank of the multi-process split tests, in C through the C API only.
 * Every rank splits the world by the parity of its rank, keys reversed.
 *   check  checks ranks and sizes, allreduces in the split and in the
 *          world, a grouped all-to-all of sends and receives in the world
 *          and a ring shift in the split, and destroys the world first
 *   long   allreduces in the split for SPLIT_RUN_S seconds (default 6),
 *          for the test that kills a rank of the other split midway
 *   late   the even split (world rank 0 with it) destroys everything and
 *          returns from main at once; the odd split waits a second,
 *          then runs its first named operation, whose engine connects
 *          through the store that world rank 0's process serves (which
 *          must outlive world rank 0's communicators)
 * Exits 0 on success; on a kolo failure prints kolo_last_error() and exits
 * 10 + the kolo_result_t. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bindings/c/kolo.h"

static int fail(const char* what, kolo_result_t r) {
  printf("%s failed: %s: %s\n", what, kolo_result_string(r), kolo_last_error());
  fflush(stdout);
  return 10 + (int)r;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "check";
  kolo_comm_t world, half;
  kolo_result_t r = kolo_comm_init_from_env(&world);
  if (r != KOLO_SUCCESS) return fail("init", r);
  int rank = 0, n = 0, sub_rank = -1, sub_size = 0;
  kolo_comm_rank(world, &rank);
  kolo_comm_size(world, &n);
  if ((r = kolo_comm_split(world, rank % 2, -rank, &half))) return fail("split", r);
  kolo_comm_rank(half, &sub_rank);
  kolo_comm_size(half, &sub_size);
  /* Members of my parity, and those above me (ranked first: keys reversed). */
  int want_size = 0, want_rank = 0;
  for (int q = rank % 2; q < n; q += 2) {
    ++want_size;
    if (q > rank) ++want_rank;
  }
  if (sub_rank != want_rank || sub_size != want_size) {
    printf("rank %d: split rank %d of %d, expected %d of %d\n", rank, sub_rank, sub_size, want_rank, want_size);
    return 1;
  }
  if (strcmp(mode, "long") == 0) {
    const double run_s = getenv("SPLIT_RUN_S") ? atof(getenv("SPLIT_RUN_S")) : 6.0;
    const size_t count = 1u << 20;
    float* in = calloc(count, sizeof(float));
    float* out = calloc(count, sizeof(float));
    printf("rank %d looping\n", rank);
    fflush(stdout);
    /* The split stops together: element 0 carries "my time is up", and
     * everyone stops once anyone's is (a rank that left alone would fail
     * its partner's allreduce). */
    for (const double start = now_s(); out[0] == 0;) {
      in[0] = now_s() - start >= run_s ? 1.0f : 0.0f;
      if ((r = kolo_allreduce(half, in, out, count, KOLO_FLOAT32, KOLO_SUM))) break;
    }
    int code = r ? fail("allreduce in the split", r) : 0;
    if (!r) printf("rank %d survived\n", rank);
    free(in);
    free(out);
    kolo_comm_destroy(half);
    kolo_comm_destroy(world);
    return code;
  }
  if (strcmp(mode, "late") == 0) {
    if (rank % 2 == 1) {
      struct timespec second = {1, 0};
      nanosleep(&second, NULL);
      float x = 1.0f, sum = 0;
      int64_t one = 1;
      kolo_handle_t h = NULL;
      r = kolo_submit_allreduce(half, "late", &x, &sum, 1, &one, KOLO_FLOAT32, KOLO_SUM, 1.0, 1.0, &h);
      if (r == KOLO_SUCCESS) r = kolo_handle_wait(h, -1);
      if (h) kolo_handle_release(h);
      if (r) return fail("a named allreduce in the split after world rank 0 left", r);
      if (sum != (float)sub_size) {
        printf("rank %d: named sum %g, expected %d\n", rank, sum, sub_size);
        return 1;
      }
    }
    kolo_comm_destroy(half);
    kolo_comm_destroy(world);
    printf("rank %d ok\n", rank);
    return 0;
  }
  /* check: the sum of (world rank + 1) over my parity, then over the world. */
  long long x = rank + 1, sum = 0, want = 0;
  for (int q = rank % 2; q < n; q += 2) want += q + 1;
  if ((r = kolo_allreduce(half, &x, &sum, 1, KOLO_INT64, KOLO_SUM))) return fail("allreduce in the split", r);
  if (sum != want) {
    printf("rank %d: split sum %lld, expected %lld\n", rank, sum, want);
    return 1;
  }
  if ((r = kolo_allreduce(world, &x, &sum, 1, KOLO_INT64, KOLO_SUM))) return fail("allreduce in the world", r);
  if (sum != (long long)n * (n + 1) / 2) {
    printf("rank %d: world sum %lld\n", rank, sum);
    return 1;
  }
  /* Point-to-point in a group: an all-to-all over the world (a block to
   * and from every rank, itself included) and a ring shift in the split. */
  long long* out = malloc(sizeof(long long) * (size_t)n);
  long long* in = malloc(sizeof(long long) * (size_t)n);
  kolo_group_start();
  for (int q = 0; q < n; ++q) {
    out[q] = rank * 100 + q;
    in[q] = -1;
    kolo_send(world, &out[q], 1, KOLO_INT64, q);
    kolo_recv(world, &in[q], 1, KOLO_INT64, q);
  }
  long long shift_out = rank, shift_in = -1;
  kolo_send(half, &shift_out, 1, KOLO_INT64, (sub_rank + 1) % sub_size);
  kolo_recv(half, &shift_in, 1, KOLO_INT64, (sub_rank + sub_size - 1) % sub_size);
  if ((r = kolo_group_end())) return fail("grouped send/recv", r);
  for (int q = 0; q < n; ++q) {
    if (in[q] != q * 100 + rank) {
      printf("rank %d: all-to-all block from %d is %lld\n", rank, q, in[q]);
      return 1;
    }
  }
  /* The split's left neighbour (keys reversed: the next parent rank of my
   * parity, wrapping to the lowest). */
  int left = rank + 2 < n ? rank + 2 : rank % 2;
  if (shift_in != left) {
    printf("rank %d: ring shift in the split got %lld, expected %d\n", rank, shift_in, left);
    return 1;
  }
  free(out);
  free(in);
  kolo_comm_destroy(world); /* the parent first: the split needs nothing of it */
  if ((r = kolo_barrier(half))) return fail("barrier in the split after the world was destroyed", r);
  kolo_comm_destroy(half);
  printf("rank %d ok\n", rank);
  return 0;
}
