/* Recovery after a rank dies, with the C API.
 *
 *   bazel build //examples:recovery && tools/kolorun -np 3 bazel-bin/examples/recovery
 *
 * Every rank allreduces a vector for 10 steps. At step 4 the last rank dies
 * (it exits without a word). The survivors get KOLO_ERR_PEER_LOST naming it
 * and shrink their communicator around it (kolo_comm_shrink): nobody names
 * the dead rank, the shrink finds it gone, and nobody waits for it. They
 * finish the remaining steps in the smaller communicator. Each step's
 * result is checked against the sum over the ranks present.
 * (Rank 0's process serves the rendezvous store the shrink meets through:
 * this example loses another rank.) */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bindings/c/kolo.h"

#define COUNT 100000

static int check(const float* v, int world) {
  /* Rank r contributes r + 1 everywhere; the survivors are ranks 0..world-1. */
  const float want = (float)(world * (world + 1) / 2);
  for (int i = 0; i < COUNT; i += 997) {
    if (v[i] != want) return 0;
  }
  return 1;
}

int main(void) {
  kolo_comm_t comm;
  if (kolo_comm_init_from_env(&comm) != KOLO_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", kolo_last_error());
    return 1;
  }
  int rank, size;
  kolo_comm_rank(comm, &rank);
  kolo_comm_size(comm, &size);
  static float v[COUNT];
  int world = size;

  for (int step = 0; step < 10; ++step) {
    if (step == 4 && rank == size - 1) {
      printf("rank %d: dying at step %d\n", rank, step);
      fflush(stdout);
      _exit(0); /* no goodbye: the others find out from the network */
    }
    for (int i = 0; i < COUNT; ++i) v[i] = (float)(rank + 1);
    kolo_result_t r = kolo_allreduce(comm, v, v, COUNT, KOLO_FLOAT32, KOLO_SUM);
    if (r == KOLO_ERR_PEER_LOST || r == KOLO_ERR_TIMEOUT) {
      printf("rank %d: step %d failed: %s\n", rank, step, kolo_result_string(r));
      /* The survivors keep their ranks (the lost one was the last). */
      kolo_comm_t smaller;
      if (kolo_comm_shrink(comm, NULL, 0, NULL, KOLO_SHRINK_ABORT | KOLO_SHRINK_DROP_UNRESPONSIVE, &smaller) !=
          KOLO_SUCCESS) {
        fprintf(stderr, "rank %d: shrinking failed: %s\n", rank, kolo_last_error());
        return 1;
      }
      kolo_comm_destroy(comm);
      comm = smaller;
      kolo_comm_size(comm, &world);
      printf("rank %d: shrank to a world of %d\n", rank, world);
      --step; /* redo the step that failed */
      continue;
    }
    if (r != KOLO_SUCCESS) {
      fprintf(stderr, "rank %d: %s: %s\n", rank, kolo_result_string(r), kolo_last_error());
      return 1;
    }
    if (!check(v, world)) {
      fprintf(stderr, "rank %d: wrong result at step %d\n", rank, step);
      return 1;
    }
  }
  printf("rank %d: all 10 steps done, the last ones on %d ranks\n", rank, world);
  kolo_comm_destroy(comm);
  return 0;
}
