/* A rank of the multi-process resize test, in C through the C API only.
 *   survive VICTIM  allreduces in a loop; rank VICTIM kills itself
 *                   (SIGKILL) at step 30. The others, once their
 *                   allreduce fails, shrink with KOLO_SHRINK_ABORT |
 *                   KOLO_SHRINK_DROP_UNRESPONSIVE (nobody names the dead
 *                   rank), check the new numbering and allreduce in the
 *                   shrunk communicator. With GROW_ID_FILE set, they then
 *                   grow it back to the world's size: the new rank 0 writes
 *                   the grow's id there for a replacement process.
 *   survive VICTIM stop
 *                   the same, but rank VICTIM stops itself (SIGSTOP): alive
 *                   and stuck, it holds its connections open; the others
 *                   time out and shrink around it within their deadline.
 *   survive VICTIM kill|stop named
 *                   the survivors name the victim (exclude {VICTIM}, no
 *                   flags), as a program that knows whom it lost does.
 * With VICTIM 0 the rendezvous store's host is the one lost: the survivors
 * agree on rank 1's standby store instead (runtime/rendezvous.h). With
 * LOSE_GROWN_RANK_0 set too, the grown communicator then loses its rank 0
 * (rank 1's process, the store's host since): a second fail-over, the
 * replacement among the survivors.
 *   join N          the replacement: reads the id from GROW_ID_FILE and
 *                   joins the grow as rank N - 1 of N.
 * Every allreduce's result is checked against the sum it must have. Exits
 * 0 on success; on a kolo failure prints kolo_last_error() and exits
 * 10 + the kolo_result_t. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* Allreduces `steps` times, each rank giving value(rank); checks the sum. */
static int allreduce_checked(kolo_comm_t comm, int64_t mine, int64_t want, int steps, const char* what) {
  enum { kCount = 50000 };
  static int64_t buf[kCount];
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < kCount; ++i) buf[i] = mine + i;
    int n = 0;
    kolo_comm_size(comm, &n);
    kolo_result_t r = kolo_allreduce(comm, buf, buf, kCount, KOLO_INT64, KOLO_SUM);
    if (r != KOLO_SUCCESS) return fail(what, r);
    for (int i = 0; i < kCount; i += 997) {
      if (buf[i] != want + (int64_t)n * i) {
        printf("%s: element %d is %lld, expected %lld\n", what, i, (long long)buf[i], (long long)(want + (int64_t)n * i));
        return 1;
      }
    }
  }
  return 0;
}

/* With LOSE_GROWN_RANK_0 set, the grown communicator's rank 0 (whose
 * process serves its store now) kills itself, and the others, the
 * replacement among them, shrink it away by name. */
static int lose_grown_rank_0(kolo_comm_t grown, const char* who) {
  int rank = -1, n = 0;
  kolo_comm_rank(grown, &rank);
  kolo_comm_size(grown, &n);
  if (rank == 0) {
    printf("%s: rank 0 of the grown communicator kills itself\n", who);
    fflush(stdout);
    raise(SIGKILL);
  }
  int64_t buf = 1;
  kolo_result_t r = kolo_allreduce(grown, &buf, &buf, 1, KOLO_INT64, KOLO_SUM);
  if (r == KOLO_SUCCESS) {
    printf("%s: an allreduce without rank 0 succeeded\n", who);
    return 1;
  }
  int exclude[1] = {0};
  kolo_comm_t shrunk;
  if ((r = kolo_comm_shrink(grown, exclude, 1, NULL, KOLO_SHRINK_DEFAULT, &shrunk))) return fail("second shrink", r);
  int rc = allreduce_checked(shrunk, rank, (int64_t)n * (n - 1) / 2, 20, "allreduce after the second shrink");
  if (rc) return rc;
  printf("%s: rank %d of %d after losing the grown communicator's rank 0\n", who, rank - 1, n - 1);
  fflush(stdout);
  kolo_comm_destroy(shrunk);
  return 0;
}

static int grow_checked(kolo_comm_t grown, const char* who) {
  int rank = -1, n = 0;
  kolo_comm_rank(grown, &rank);
  kolo_comm_size(grown, &n);
  int rc = allreduce_checked(grown, rank + 1, (int64_t)n * (n + 1) / 2, 20, "allreduce in the grown communicator");
  if (rc) return rc;
  printf("%s: rank %d of %d in the grown communicator\n", who, rank, n);
  fflush(stdout);
  if (getenv("LOSE_GROWN_RANK_0") && (rc = lose_grown_rank_0(grown, who))) return rc;
  kolo_comm_destroy(grown);
  return 0;
}

static int join(int n) {
  const char* path = getenv("GROW_ID_FILE");
  kolo_unique_id_t id;
  FILE* f = NULL;
  for (int i = 0; i < 600 && !f; ++i) {  /* up to a minute */
    f = fopen(path, "rb");
    if (!f) usleep(100000);
  }
  if (!f || fread(&id, sizeof(id), 1, f) != 1) {
    printf("no grow id in %s\n", path);
    return 1;
  }
  fclose(f);
  const double start = now_s();
  kolo_comm_t grown;
  kolo_result_t r = kolo_comm_grow(NULL, n, &id, n - 1, NULL, &grown);
  if (r != KOLO_SUCCESS) return fail("grow (joining)", r);
  printf("replacement joined in %.2f s\n", now_s() - start);
  return grow_checked(grown, "replacement");
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "survive";
  if (strcmp(mode, "join") == 0) return join(argc > 2 ? atoi(argv[2]) : 0);
  const int victim = argc > 2 ? atoi(argv[2]) : 1;
  const int stop = argc > 3 && strcmp(argv[3], "stop") == 0;
  const int named = argc > 4 && strcmp(argv[4], "named") == 0;
  kolo_comm_t world;
  kolo_result_t r = kolo_comm_init_from_env(&world);
  if (r != KOLO_SUCCESS) return fail("init", r);
  int rank = 0, n = 0;
  kolo_comm_rank(world, &rank);
  kolo_comm_size(world, &n);
  printf("rank %d looping\n", rank);
  fflush(stdout);
  double failed_at = 0;
  for (int step = 0; step < 100000; ++step) {
    if (rank == victim && step == 30) raise(stop ? SIGSTOP : SIGKILL);
    int64_t buf = rank + 1;
    r = kolo_allreduce(world, &buf, &buf, 1, KOLO_INT64, KOLO_SUM);
    if (r != KOLO_SUCCESS) {
      failed_at = now_s();
      printf("rank %d: allreduce failed at step %d: %s\n", rank, step, kolo_result_string(r));
      break;
    }
    if (buf != (int64_t)n * (n + 1) / 2) {
      printf("rank %d: step %d summed to %lld\n", rank, step, (long long)buf);
      return 1;
    }
  }
  if (failed_at == 0) {
    printf("rank %d: nothing failed\n", rank);
    return 1;
  }
  kolo_comm_t shrunk;
  if (named) {
    int exclude[1] = {victim};
    r = kolo_comm_shrink(world, exclude, 1, NULL, KOLO_SHRINK_DEFAULT, &shrunk);
  } else {
    r = kolo_comm_shrink(world, NULL, 0, NULL, KOLO_SHRINK_ABORT | KOLO_SHRINK_DROP_UNRESPONSIVE, &shrunk);
  }
  if (r != KOLO_SUCCESS) return fail("shrink", r);
  const double shrunk_at = now_s();
  int new_rank = -1, new_size = 0;
  kolo_comm_rank(shrunk, &new_rank);
  kolo_comm_size(shrunk, &new_size);
  if (new_size != n - 1 || new_rank != (rank < victim ? rank : rank - 1)) {
    printf("rank %d: shrunk to rank %d of %d, expected %d of %d\n", rank, new_rank, new_size,
           rank < victim ? rank : rank - 1, n - 1);
    return 1;
  }
  /* Each survivor gives its old rank + 1: the sum lacks the victim's. */
  int rc = allreduce_checked(shrunk, rank + 1, (int64_t)n * (n + 1) / 2 - (victim + 1), 20, "allreduce after shrink");
  if (rc) return rc;
  printf("rank %d: shrank to rank %d of %d in %.2f s, training again after %.2f s\n", rank, new_rank, new_size,
         shrunk_at - failed_at, now_s() - failed_at);
  fflush(stdout);
  const char* id_file = getenv("GROW_ID_FILE");
  if (id_file) {
    if (new_rank == 0) {
      kolo_unique_id_t id;
      if ((r = kolo_comm_get_unique_id(shrunk, &id))) return fail("get_unique_id", r);
      char tmp[4096];
      snprintf(tmp, sizeof(tmp), "%s.tmp", id_file);
      FILE* f = fopen(tmp, "wb");
      if (!f || fwrite(&id, sizeof(id), 1, f) != 1 || fclose(f) != 0 || rename(tmp, id_file) != 0) {
        printf("cannot write %s\n", id_file);
        return 1;
      }
    }
    kolo_comm_t grown;
    if ((r = kolo_comm_grow(shrunk, n, NULL, -1, NULL, &grown))) return fail("grow", r);
    char who[32];
    snprintf(who, sizeof(who), "rank %d", rank);
    if ((rc = grow_checked(grown, who))) return rc;
  }
  kolo_comm_destroy(shrunk);
  kolo_comm_destroy(world);
  printf("rank %d survived\n", rank);
  return 0;
}
