/* Compiles kolo.h as plain C and exercises the API from C: a world of one
 * rank, results, and argument errors that must not crash. */
#include <stdio.h>
#include <string.h>

#include "bindings/c/kolo.h"

static int failures = 0;
#define EXPECT(cond)                                                   \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "%s:%d: expected %s (last error: %s)\n", __FILE__, __LINE__, #cond, kolo_last_error()); \
      ++failures;                                                      \
    }                                                                  \
  } while (0)

int main(void) {
  kolo_comm_t comm = NULL;
  int rank = -1, size = -1, local_rank = -1, local_size = -1;
  float in[5] = {1, 2, 3, 4, 5}, out[5] = {0};
  int i;

  EXPECT(KOLO_SUCCESS == 0);
  EXPECT(kolo_comm_init(&comm, 0, 1, "127.0.0.1", 0) == KOLO_SUCCESS);
  EXPECT(comm != NULL);
  EXPECT(kolo_comm_rank(comm, &rank) == KOLO_SUCCESS && rank == 0);
  EXPECT(kolo_comm_size(comm, &size) == KOLO_SUCCESS && size == 1);
  EXPECT(kolo_comm_local_rank(comm, &local_rank) == KOLO_SUCCESS && local_rank == 0);
  EXPECT(kolo_comm_local_size(comm, &local_size) == KOLO_SUCCESS && local_size == 1);

  /* What it runs on: a world of one has no transport. */
  {
    const char* name = NULL;
    EXPECT(kolo_comm_get_transport(comm, &name) == KOLO_SUCCESS && strcmp(name, "none") == 0);
    EXPECT(kolo_comm_get_allreduce_algorithm(comm, 1 << 20, &name) == KOLO_SUCCESS && strcmp(name, "ring") == 0);
    EXPECT(kolo_comm_get_transport(comm, NULL) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_get_allreduce_algorithm(NULL, 1, &name) == KOLO_ERR_INVALID_ARGUMENT);
  }
  {
    /* Alone, every call costs nothing; other collectives are refused by name. */
    const char* name = NULL;
    double seconds = -1;
    EXPECT(kolo_comm_estimate(comm, "allreduce", 1 << 20, &seconds, &name) == KOLO_SUCCESS && seconds == 0 &&
           strcmp(name, "ring") == 0);
    EXPECT(kolo_comm_estimate(comm, "reduce_scatter", 64, NULL, NULL) == KOLO_SUCCESS);
    EXPECT(kolo_comm_estimate(comm, "broadcast", 64, &seconds, &name) == KOLO_SUCCESS && strcmp(name, "ring") == 0);
    EXPECT(kolo_comm_estimate(comm, "bcast", 64, &seconds, &name) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(strstr(kolo_last_error(), "collective 'bcast'") != NULL);
    EXPECT(kolo_comm_estimate(comm, NULL, 64, &seconds, &name) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_estimate(NULL, "allreduce", 64, &seconds, &name) == KOLO_ERR_INVALID_ARGUMENT);
  }

  EXPECT(kolo_allreduce(comm, in, out, 5, KOLO_FLOAT32, KOLO_SUM) == KOLO_SUCCESS);
  for (i = 0; i < 5; ++i) EXPECT(out[i] == in[i]);
  EXPECT(kolo_allgather(comm, in, out, 5, KOLO_FLOAT32) == KOLO_SUCCESS);
  EXPECT(kolo_broadcast(comm, out, 5, KOLO_FLOAT32, 0) == KOLO_SUCCESS);
  EXPECT(kolo_reduce_scatter(comm, in, out, 5, KOLO_FLOAT32, KOLO_AVG) == KOLO_SUCCESS);
  EXPECT(kolo_barrier(comm) == KOLO_SUCCESS);
  EXPECT(kolo_allreduce(comm, NULL, NULL, 0, KOLO_INT8, KOLO_MAX) == KOLO_SUCCESS); /* count 0 needs no buffers */
  /* Declared memory works like any other (no transport in a world of one). */
  EXPECT(kolo_comm_register_memory(comm, in, sizeof(in)) == KOLO_SUCCESS);
  EXPECT(kolo_comm_register_memory(comm, out, sizeof(out)) == KOLO_SUCCESS);
  EXPECT(kolo_allreduce(comm, in, out, 5, KOLO_FLOAT32, KOLO_SUM) == KOLO_SUCCESS);
  for (i = 0; i < 5; ++i) EXPECT(out[i] == in[i]);
  EXPECT(kolo_comm_deregister_memory(comm, in, sizeof(in)) == KOLO_SUCCESS);
  EXPECT(kolo_comm_deregister_memory(comm, out, sizeof(out)) == KOLO_SUCCESS);
  EXPECT(kolo_comm_register_memory(comm, NULL, 0) == KOLO_SUCCESS);

  /* The rooted and "v" collectives, in a world of one. */
  {
    size_t one[1] = {5}, zero[1] = {0}, at2[1] = {2};
    float wide[8] = {0};
    EXPECT(kolo_reduce(comm, in, out, 5, KOLO_FLOAT32, KOLO_AVG, 0) == KOLO_SUCCESS);
    for (i = 0; i < 5; ++i) EXPECT(out[i] == in[i]);
    EXPECT(kolo_reduce(comm, out, out, 5, KOLO_FLOAT32, KOLO_SUM, 0) == KOLO_SUCCESS); /* in place at root */
    EXPECT(kolo_gather(comm, in, out, 5, KOLO_FLOAT32, 0) == KOLO_SUCCESS);
    EXPECT(kolo_gatherv(comm, in, 5, wide, one, at2, KOLO_FLOAT32, 0) == KOLO_SUCCESS);
    EXPECT(wide[2] == in[0] && wide[6] == in[4]);
    EXPECT(kolo_scatter(comm, in, out, 5, KOLO_FLOAT32, 0) == KOLO_SUCCESS);
    EXPECT(kolo_scatterv(comm, wide, one, at2, out, 5, KOLO_FLOAT32, 0) == KOLO_SUCCESS);
    EXPECT(out[0] == in[0]);
    EXPECT(kolo_allgatherv(comm, in, 5, out, one, NULL, KOLO_FLOAT32) == KOLO_SUCCESS);
    EXPECT(kolo_reduce_scatterv(comm, in, out, one, KOLO_FLOAT32, KOLO_MIN) == KOLO_SUCCESS);
    EXPECT(kolo_alltoall(comm, in, out, 5, KOLO_FLOAT32) == KOLO_SUCCESS);
    EXPECT(kolo_alltoallv(comm, in, one, NULL, out, one, NULL, KOLO_FLOAT32) == KOLO_SUCCESS);
    for (i = 0; i < 5; ++i) EXPECT(out[i] == in[i]);
    EXPECT(kolo_alltoallv(comm, NULL, zero, NULL, NULL, zero, NULL, KOLO_INT8) == KOLO_SUCCESS); /* count 0 */
    EXPECT(kolo_reduce(comm, in, out, 5, KOLO_FLOAT32, KOLO_SUM, 1) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(strstr(kolo_last_error(), "root") != NULL);
    EXPECT(kolo_gatherv(comm, in, 5, out, NULL, NULL, KOLO_FLOAT32, 0) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(strstr(kolo_last_error(), "recvcounts") != NULL);
    EXPECT(kolo_scatter(comm, NULL, out, 5, KOLO_FLOAT32, 0) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(strstr(kolo_last_error(), "sendbuf") != NULL);
    EXPECT(kolo_alltoall(comm, in, in, 5, KOLO_FLOAT32) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_reduce_scatterv(comm, in, out, one, (kolo_dtype_t)42, KOLO_SUM) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(strstr(kolo_last_error(), "dtype") != NULL);
    EXPECT(kolo_alltoallv(NULL, in, one, NULL, out, one, NULL, KOLO_FLOAT32) == KOLO_ERR_INVALID_ARGUMENT);
    /* Asynchronous calls and point-to-point: a handle only when queued. */
    kolo_handle_t h = (kolo_handle_t)1;
    EXPECT(kolo_allreduce_async(comm, in, out, 5, (kolo_dtype_t)42, KOLO_SUM, &h) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(h == NULL && strstr(kolo_last_error(), "dtype") != NULL);
    EXPECT(kolo_barrier_async(comm, NULL) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_send(comm, in, 5, (kolo_dtype_t)42, 0) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_recv_async(comm, out, 5, KOLO_FLOAT32, 0, NULL) == KOLO_ERR_INVALID_ARGUMENT);
    for (i = 0; i < 5; ++i) out[i] = -1;
    EXPECT(kolo_alltoall_async(comm, in, out, 5, KOLO_FLOAT32, &h) == KOLO_SUCCESS && h != NULL);
    EXPECT(kolo_handle_wait(h, 10) == KOLO_SUCCESS && kolo_handle_release(h) == KOLO_SUCCESS);
    for (i = 0; i < 5; ++i) EXPECT(out[i] == in[i]);
  }

  /* Several buffers in one allreduce (in a world of one, each its own
   * sum), blocking and asynchronous, and what it refuses. */
  {
    float a[3] = {1, 2, 3}, b[2] = {4, 5}, ra[3] = {0}, rb[2] = {0};
    const void* sends[2] = {a, b};
    void* recvs[2] = {ra, rb};
    size_t counts[2] = {3, 2};
    kolo_handle_t h = NULL;
    EXPECT(kolo_allreduce_many(comm, sends, recvs, counts, 2, KOLO_FLOAT32, KOLO_SUM) == KOLO_SUCCESS);
    for (i = 0; i < 3; ++i) EXPECT(ra[i] == a[i]);
    for (i = 0; i < 2; ++i) EXPECT(rb[i] == b[i]);
    ra[0] = rb[1] = -1;
    EXPECT(kolo_allreduce_many_async(comm, sends, recvs, counts, 2, KOLO_FLOAT32, KOLO_MAX, &h) == KOLO_SUCCESS);
    EXPECT(kolo_handle_wait(h, 10) == KOLO_SUCCESS && kolo_handle_release(h) == KOLO_SUCCESS);
    EXPECT(ra[0] == 1 && rb[1] == 5);
    EXPECT(kolo_allreduce_many(comm, NULL, recvs, counts, 2, KOLO_FLOAT32, KOLO_SUM) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(strstr(kolo_last_error(), "sendbufs") != NULL);
    EXPECT(kolo_allreduce_many(comm, sends, recvs, counts, 0, KOLO_FLOAT32, KOLO_SUM) == KOLO_ERR_INVALID_ARGUMENT);
    recvs[1] = b + 1; /* overlaps its sendbuf */
    EXPECT(kolo_allreduce_many(comm, sends, recvs, counts, 2, KOLO_FLOAT32, KOLO_SUM) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(strstr(kolo_last_error(), "buffer 1") != NULL);
  }

  /* Bad arguments: an error code and a message, never a crash. */
  EXPECT(kolo_allreduce(NULL, in, out, 5, KOLO_FLOAT32, KOLO_SUM) == KOLO_ERR_INVALID_ARGUMENT);
  EXPECT(strstr(kolo_last_error(), "comm") != NULL);
  EXPECT(kolo_allreduce(comm, NULL, out, 5, KOLO_FLOAT32, KOLO_SUM) == KOLO_ERR_INVALID_ARGUMENT);
  EXPECT(strstr(kolo_last_error(), "sendbuf") != NULL);
  EXPECT(kolo_allreduce(comm, in, out, 5, (kolo_dtype_t)42, KOLO_SUM) == KOLO_ERR_INVALID_ARGUMENT);
  EXPECT(strstr(kolo_last_error(), "dtype") != NULL);
  EXPECT(kolo_allreduce(comm, in, out, 5, KOLO_FLOAT32, (kolo_op_t)-1) == KOLO_ERR_INVALID_ARGUMENT);
  EXPECT(strstr(kolo_last_error(), "op") != NULL);
  EXPECT(kolo_allreduce(comm, in, in + 1, 3, KOLO_FLOAT32, KOLO_SUM) == KOLO_ERR_INVALID_ARGUMENT);
  EXPECT(kolo_broadcast(comm, out, 5, KOLO_FLOAT32, 1) == KOLO_ERR_INVALID_ARGUMENT);
  EXPECT(strstr(kolo_last_error(), "root") != NULL);
  EXPECT(kolo_broadcast(comm, out, 5, KOLO_FLOAT32, -1) == KOLO_ERR_INVALID_ARGUMENT);
  EXPECT(kolo_allgather(comm, NULL, out, 5, KOLO_FLOAT32) == KOLO_ERR_INVALID_ARGUMENT);
  EXPECT(kolo_reduce_scatter(comm, in, NULL, 5, KOLO_FLOAT32, KOLO_SUM) == KOLO_ERR_INVALID_ARGUMENT);
  EXPECT(kolo_comm_rank(comm, NULL) == KOLO_ERR_INVALID_ARGUMENT);
  EXPECT(kolo_barrier(NULL) == KOLO_ERR_INVALID_ARGUMENT);
  EXPECT(kolo_comm_register_memory(comm, NULL, 64) == KOLO_ERR_INVALID_ARGUMENT);
  EXPECT(strstr(kolo_last_error(), "buf is NULL") != NULL);
  EXPECT(kolo_comm_deregister_memory(comm, NULL, 64) == KOLO_ERR_INVALID_ARGUMENT);
  EXPECT(kolo_comm_register_memory(NULL, in, 4) == KOLO_ERR_INVALID_ARGUMENT);
  /* A bad argument does not poison the communicator. */
  EXPECT(kolo_allreduce(comm, in, out, 5, KOLO_FLOAT32, KOLO_MAX) == KOLO_SUCCESS);

  /* GPU calls where this rank has no GPU (this machine, or a build without
   * CUDA) say so and leave the communicator healthy. */
  {
    int device = -1;
    kolo_result_t async_error = KOLO_ERR_INTERNAL;
    EXPECT(kolo_comm_gpu(comm, &device) == KOLO_ERR_UNSUPPORTED);
    EXPECT(strstr(kolo_last_error(), "without CUDA") != NULL || strstr(kolo_last_error(), "no GPU") != NULL);
    EXPECT(kolo_comm_gpu(comm, NULL) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_allreduce_stream(comm, in, out, 5, KOLO_FLOAT32, KOLO_SUM, NULL) == KOLO_ERR_UNSUPPORTED);
    EXPECT(kolo_allgather_stream(comm, in, out, 1, KOLO_FLOAT32, NULL) == KOLO_ERR_UNSUPPORTED);
    EXPECT(kolo_broadcast_stream(comm, out, 5, KOLO_FLOAT32, 0, NULL) == KOLO_ERR_UNSUPPORTED);
    EXPECT(kolo_reduce_scatter_stream(comm, in, out, 5, KOLO_FLOAT32, KOLO_SUM, NULL) == KOLO_ERR_UNSUPPORTED);
    {
      const void* sends[1] = {in};
      void* recvs[1] = {out};
      size_t counts[1] = {5};
      EXPECT(kolo_allreduce_many_stream(comm, sends, recvs, counts, 1, KOLO_FLOAT32, KOLO_SUM, NULL) ==
             KOLO_ERR_UNSUPPORTED);
    }
    EXPECT(kolo_alltoall_stream(comm, in, out, 1, KOLO_FLOAT32, NULL) == KOLO_ERR_UNSUPPORTED);
    EXPECT(kolo_allreduce_stream(NULL, in, out, 5, KOLO_FLOAT32, KOLO_SUM, NULL) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_get_async_error(comm, &async_error) == KOLO_SUCCESS && async_error == KOLO_SUCCESS);
    EXPECT(kolo_allreduce(comm, in, out, 5, KOLO_FLOAT32, KOLO_SUM) == KOLO_SUCCESS);
  }

  EXPECT(kolo_comm_init(NULL, 0, 1, "127.0.0.1", 0) == KOLO_ERR_INVALID_ARGUMENT);
  {
    kolo_comm_t other = NULL;
    EXPECT(kolo_comm_init(&other, 2, 2, "127.0.0.1", 1234) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_init(&other, 0, 0, "127.0.0.1", 1234) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_init(&other, 0, 2, NULL, 1234) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_init(&other, 0, 2, "127.0.0.1", 70000) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(other == NULL);
  }
  EXPECT(strlen(kolo_result_string(KOLO_ERR_TIMEOUT)) > 0);
  EXPECT(strlen(kolo_result_string(KOLO_ERR_REVOKED)) > 0);
  EXPECT(strlen(kolo_result_string((kolo_result_t)99)) > 0);

  /* Revoke, shrink and grow: their bad arguments, and a world of one
   * revoked and shrunk (to itself) working again. */
  {
    kolo_comm_t smaller = NULL, grown = NULL;
    kolo_unique_id_t id, job_id;
    const int self = 0, beyond = 3;
    EXPECT(kolo_comm_revoke(NULL) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_shrink(NULL, NULL, 0, NULL, 0, &smaller) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_shrink(comm, NULL, 0, NULL, 0, NULL) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_shrink(comm, NULL, 1, NULL, 0, &smaller) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_shrink(comm, &self, -1, NULL, 0, &smaller) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_shrink(comm, &self, 1, NULL, 0, &smaller) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(strstr(kolo_last_error(), "excludes itself") != NULL);
    EXPECT(kolo_comm_shrink(comm, &beyond, 1, NULL, 0, &smaller) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_shrink(comm, NULL, 0, NULL, 16, &smaller) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(smaller == NULL);
    EXPECT(kolo_comm_get_unique_id(NULL, &id) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_get_unique_id(comm, NULL) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_grow(comm, 1, NULL, -1, NULL, &grown) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_grow(NULL, 2, NULL, 1, NULL, &grown) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_comm_grow(comm, 2, NULL, -1, NULL, NULL) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(kolo_get_unique_id(&job_id) == KOLO_SUCCESS);
    EXPECT(kolo_comm_grow(NULL, 2, &job_id, 1, NULL, &grown) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(strstr(kolo_last_error(), "not a grow's") != NULL);
    EXPECT(kolo_comm_get_unique_id(comm, &id) == KOLO_SUCCESS);
    EXPECT(kolo_comm_init_rank(&smaller, 2, &id, 1, NULL) == KOLO_ERR_INVALID_ARGUMENT);
    EXPECT(smaller == NULL && grown == NULL);
    EXPECT(kolo_comm_revoke(comm) == KOLO_SUCCESS);
    EXPECT(kolo_allreduce(comm, in, out, 5, KOLO_FLOAT32, KOLO_SUM) == KOLO_ERR_REVOKED);
    EXPECT(kolo_comm_shrink(comm, NULL, 0, NULL, KOLO_SHRINK_DEFAULT, &smaller) == KOLO_SUCCESS);
    EXPECT(kolo_comm_size(smaller, &size) == KOLO_SUCCESS && size == 1);
    EXPECT(kolo_allreduce(smaller, in, out, 5, KOLO_FLOAT32, KOLO_SUM) == KOLO_SUCCESS);
    for (i = 0; i < 5; ++i) EXPECT(out[i] == in[i]);
    EXPECT(kolo_comm_destroy(smaller) == KOLO_SUCCESS);
  }

  EXPECT(kolo_comm_destroy(comm) == KOLO_SUCCESS);
  EXPECT(kolo_comm_destroy(NULL) == KOLO_SUCCESS);
  if (failures == 0) printf("c_api_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
