/* A framework adapter's view of the engine: plain C, linked against
 * libkolo.so and nothing else. Run by tests/engine_c_test.sh under kolorun.
 * Each rank submits named allreduces in its own order (with fusion), an
 * allgather of a different number of rows per rank, a mismatched tensor,
 * and then joins early or late; every result is checked here. Prints
 * "rank R engine ok" on success. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bindings/c/kolo.h"

#define CHECK(call)                                                                          \
  do {                                                                                       \
    kolo_result_t r_ = (call);                                                               \
    if (r_ != KOLO_SUCCESS) {                                                                \
      fprintf(stderr, "%s:%d: %s -> %d %s\n", __FILE__, __LINE__, #call, r_, kolo_last_error()); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

#define EXPECT(cond)                                                         \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);   \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

enum { kTensors = 40 };

static int callbacks_run = 0;
static void on_done(kolo_result_t result, void* user) {
  if (result == KOLO_SUCCESS) __atomic_add_fetch((int*)user, 1, __ATOMIC_SEQ_CST);
}

/* A framework's kernel reads an allgather's output in the completion
 * callback itself (it runs before a wait returns). */
struct gathered_in_callback {
  kolo_handle_t handle;
  int size;
  int64_t rows[8];
  size_t bytes;
  int ok;
};
static void on_gathered(kolo_result_t result, void* user) {
  struct gathered_in_callback* g = user;
  const void* data;
  g->ok = result == KOLO_SUCCESS && kolo_handle_output_rows(g->handle, g->rows, g->size) == KOLO_SUCCESS &&
          kolo_handle_output(g->handle, &data, &g->bytes) == KOLO_SUCCESS && data != NULL;
}

int main(int argc, char** argv) {
  const char* timeline = argc > 1 ? argv[1] : NULL;
  kolo_comm_t comm;
  CHECK(kolo_comm_init_from_env(&comm));
  int rank, size;
  CHECK(kolo_comm_rank(comm, &rank));
  CHECK(kolo_comm_size(comm, &size));
  if (timeline && rank == 0) CHECK(kolo_timeline_start(comm, timeline));

  /* 1. Allreduces in a rank-dependent order. */
  float* in[kTensors];
  float* out[kTensors];
  kolo_handle_t h[kTensors];
  int64_t count[kTensors];
  for (int t = 0; t < kTensors; ++t) {
    count[t] = 1 + (t * 7919) % 50000;
    in[t] = malloc(sizeof(float) * count[t]);
    out[t] = malloc(sizeof(float) * count[t]);
    for (int64_t i = 0; i < count[t]; ++i) in[t][i] = (float)((rank + t + i) % 11);
  }
  static const int steps[8] = {1, 3, 7, 9, 11, 13, 17, 19}; /* coprime with kTensors */
  for (int k = 0; k < kTensors; ++k) {
    int t = (k * steps[rank % 8] + rank) % kTensors; /* a different permutation per rank */
    char name[32];
    snprintf(name, sizeof(name), "grad/%d", t);
    CHECK(kolo_submit_allreduce(comm, name, in[t], out[t], 1, &count[t], KOLO_FLOAT32, KOLO_SUM, 1.0, 1.0, &h[t]));
    CHECK(kolo_handle_set_callback(h[t], on_done, &callbacks_run));
  }
  for (int t = 0; t < kTensors; ++t) {
    CHECK(kolo_handle_wait(h[t], -1));
    for (int64_t i = 0; i < count[t]; ++i) {
      float expect = 0;
      for (int q = 0; q < size; ++q) expect += (float)((q + t + i) % 11);
      EXPECT(out[t][i] == expect);
    }
    int done = 0;
    CHECK(kolo_handle_test(h[t], &done));
    EXPECT(done == 1);
    CHECK(kolo_handle_release(h[t]));
  }

  /* 2. Allgather with rank + 1 rows of 3 int64s. */
  int64_t rows[3 * 8];
  for (int i = 0; i < 3 * (rank + 1); ++i) rows[i] = rank * 100 + i;
  int64_t shape[2] = {rank + 1, 3};
  kolo_handle_t g;
  if (rank != 0) { /* rank 0 (which writes the timeline) waits for the others */
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  CHECK(kolo_submit_allgather(comm, "rows", rows, 2, shape, KOLO_INT64, &g));
  struct gathered_in_callback in_callback = {g, size, {0}, 0, 0};
  CHECK(kolo_handle_set_callback(g, on_gathered, &in_callback));
  CHECK(kolo_handle_wait(g, 60));
  EXPECT(in_callback.ok == 1);
  for (int q = 0; q < size; ++q) EXPECT(in_callback.rows[q] == q + 1);
  const void* data;
  size_t bytes;
  CHECK(kolo_handle_output(g, &data, &bytes));
  int64_t per_rank[8];
  CHECK(kolo_handle_output_rows(g, per_rank, size));
  const int64_t* all = data;
  size_t k = 0;
  for (int q = 0; q < size; ++q) {
    EXPECT(per_rank[q] == q + 1);
    for (int i = 0; i < 3 * (q + 1); ++i) EXPECT(all[k++] == q * 100 + i);
  }
  EXPECT(bytes == k * sizeof(int64_t));
  EXPECT(in_callback.bytes == bytes);
  CHECK(kolo_handle_release(g));

  /* 3. A mismatch: rank 1 says int32. Every rank gets KOLO_ERR_MISMATCH. */
  int32_t m[4] = {1, 2, 3, 4};
  kolo_handle_t mh;
  int64_t four = 4;
  CHECK(kolo_submit_allreduce(comm, "bad", m, m, 1, &four, rank == 1 ? KOLO_INT32 : KOLO_FLOAT32, KOLO_SUM, 1, 1, &mh));
  kolo_result_t mr = kolo_handle_wait(mh, 60);
  EXPECT(mr == KOLO_ERR_MISMATCH);
  EXPECT(strstr(kolo_last_error(), "'bad'") != NULL);
  EXPECT(strstr(kolo_last_error(), "dtype") != NULL);
  CHECK(kolo_handle_release(mh));

  /* 4. Bad arguments come back from the submit call itself. */
  kolo_handle_t none;
  EXPECT(kolo_submit_allreduce(comm, "x", NULL, out[0], 1, &count[0], KOLO_FLOAT32, KOLO_SUM, 1, 1, &none) ==
         KOLO_ERR_INVALID_ARGUMENT);
  EXPECT(kolo_submit_broadcast(comm, "y", out[0], 1, &count[0], KOLO_FLOAT32, size, &none) == KOLO_ERR_INVALID_ARGUMENT);
  EXPECT(kolo_handle_wait(NULL, 1) == KOLO_ERR_INVALID_ARGUMENT);

  /* 5. Uneven data: rank r runs r + 1 extra steps, then joins. */
  for (int step = 0; step <= rank; ++step) {
    float v = 1, s = 0;
    int64_t one = 1;
    char name[32];
    snprintf(name, sizeof(name), "extra/%d", step);
    kolo_handle_t eh;
    CHECK(kolo_submit_allreduce(comm, name, &v, &s, 1, &one, KOLO_FLOAT32, KOLO_SUM, 1, 1, &eh));
    CHECK(kolo_handle_wait(eh, 60));
    EXPECT(s == (float)(size - step)); /* ranks below `step` have joined */
    CHECK(kolo_handle_release(eh));
  }
  kolo_handle_t j;
  CHECK(kolo_join(comm, &j));
  CHECK(kolo_handle_wait(j, 60));
  int last = -1;
  CHECK(kolo_handle_join_rank(j, &last));
  EXPECT(last == size - 1);
  CHECK(kolo_handle_release(j));

  if (timeline && rank == 0) CHECK(kolo_timeline_stop(comm));
  EXPECT(__atomic_load_n(&callbacks_run, __ATOMIC_SEQ_CST) == kTensors);
  for (int t = 0; t < kTensors; ++t) {
    free(in[t]);
    free(out[t]);
  }
  kolo_result_t async;
  CHECK(kolo_comm_get_async_error(comm, &async));
  EXPECT(async == KOLO_SUCCESS);
  CHECK(kolo_comm_destroy(comm));
  printf("rank %d engine ok\n", rank);
  return 0;
}
