/* One rank of a job started with kolo_get_unique_id / kolo_comm_init_rank,
 * in plain C. Rank 0 makes the id and writes it to ID_FILE (the framework's
 * own channel); the others wait for the file and read it.
 *
 *   uid_worker ID_FILE RANK NRANKS [wrong]
 *
 * Prints "rank R ok init_s S" after an allreduce checked, or, with "wrong"
 * (every rank but 0 flips a byte of the id's secret), "rank R refused" when init
 * fails with KOLO_ERR_AUTH or KOLO_ERR_TIMEOUT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bindings/c/kolo.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  kolo_unique_id_t id;
  kolo_config_t config = KOLO_CONFIG_INITIALIZER;
  kolo_comm_t comm = NULL;
  kolo_result_t r;
  int rank, n, i, wrong;
  double start, init_s;
  float in[100], out[100];
  memset(&id, 0, sizeof(id));
  if (argc < 4) {
    fprintf(stderr, "usage: uid_worker ID_FILE RANK NRANKS [wrong]\n");
    return 2;
  }
  rank = atoi(argv[2]);
  n = atoi(argv[3]);
  wrong = argc > 4 && strcmp(argv[4], "wrong") == 0;

  /* The config in C: a bad field is named, a newer version refused. */
  config.segment_bytes = 3;
  if (kolo_comm_init_rank(&comm, n, &id, rank, &config) != KOLO_ERR_INVALID_ARGUMENT ||
      !strstr(kolo_last_error(), "config.segment_bytes = 3")) {
    fprintf(stderr, "rank %d: bad segment_bytes not refused: %s\n", rank, kolo_last_error());
    return 1;
  }
  config.segment_bytes = KOLO_CONFIG_UNSET_INT;
  config.version = KOLO_CONFIG_VERSION + 1;
  if (kolo_comm_init_rank(&comm, n, &id, rank, &config) != KOLO_ERR_INVALID_ARGUMENT) {
    fprintf(stderr, "rank %d: newer version not refused\n", rank);
    return 1;
  }
  config.version = KOLO_CONFIG_VERSION;
  config.timeout_s = wrong ? 5 : 60;

  start = now();
  if (rank == 0) {
    char tmp[4096];
    FILE* f;
    if (kolo_get_unique_id(&id) != KOLO_SUCCESS) {
      fprintf(stderr, "kolo_get_unique_id: %s\n", kolo_last_error());
      return 1;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", argv[1]);
    f = fopen(tmp, "wb");
    if (!f || fwrite(&id, sizeof(id), 1, f) != 1 || fclose(f) != 0 || rename(tmp, argv[1]) != 0) {
      perror("writing the id");
      return 1;
    }
  } else {
    FILE* f = NULL;
    for (i = 0; i < 60000 && !(f = fopen(argv[1], "rb")); ++i) usleep(1000);
    if (!f || fread(&id, sizeof(id), 1, f) != 1) {
      fprintf(stderr, "rank %d: no id in %s\n", rank, argv[1]);
      return 1;
    }
    fclose(f);
  }
  if (wrong && rank != 0) id.internal[90] ^= 1; /* a byte of the secret: rank 0 keeps the true one */

  r = kolo_comm_init_rank(&comm, n, &id, rank, &config);
  init_s = now() - start;
  if (wrong) {
    if (r == KOLO_ERR_AUTH || r == KOLO_ERR_TIMEOUT) {
      printf("rank %d refused (%s) after %.2f s\n", rank, kolo_result_string(r), init_s);
      return 0;
    }
    fprintf(stderr, "rank %d: wrong id gave %d: %s\n", rank, (int)r, kolo_last_error());
    return 1;
  }
  if (r != KOLO_SUCCESS) {
    fprintf(stderr, "rank %d: kolo_comm_init_rank: %s\n", rank, kolo_last_error());
    return 1;
  }
  for (i = 0; i < 100; ++i) in[i] = (float)(rank + i);
  if (kolo_allreduce(comm, in, out, 100, KOLO_FLOAT32, KOLO_SUM) != KOLO_SUCCESS) {
    fprintf(stderr, "rank %d: allreduce: %s\n", rank, kolo_last_error());
    return 1;
  }
  for (i = 0; i < 100; ++i) {
    float want = (float)(n * (n - 1) / 2 + n * i);
    if (out[i] != want) {
      fprintf(stderr, "rank %d: out[%d] = %g, want %g\n", rank, i, out[i], want);
      return 1;
    }
  }
  kolo_comm_destroy(comm);
  printf("rank %d ok init_s %.3f\n", rank, init_s);
  return 0;
}
