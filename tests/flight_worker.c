/* A rank of the flight recorder's fault matrix (tests/flight_recorder_test.py),
 * in C through the C API only:
 *
 *   flight_worker FAULT CULPRIT STEP
 *
 * Every rank runs 24 steps (30 for the straggler); step i is an allreduce
 * (i % 3 == 0), a broadcast from rank i % n (1) or an allgather (2). Rank
 * CULPRIT misbehaves at step STEP:
 *   missing    stops there (sleeps; kolorun ends it)
 *   skip       leaves that step's call out and goes on
 *   extra      calls an extra allreduce of 7 elements first
 *   dtype      passes int32 instead of float32
 *   count      passes one element more
 *   root       broadcasts from another root
 *   dead       kills itself (SIGKILL)
 *   stuck      stops itself (SIGSTOP)
 *   partition  takes its host's link down (ip link set eth0 down: each rank
 *              on an emulated host of its own, kolorun --netns) and goes on
 *              calling: it and the others are all there, cut apart
 *   straggler  sleeps 20 ms before every call (STEP unused); nothing fails
 *   order      every step runs an allreduce on communicator A, then one on
 *              B (both split from the world); the culprit calls B first
 * With KOLO_FLIGHT_RECORDER_DIR set, every rank writes its record when a
 * communicator fails; when nothing failed, each writes it at the end. Exits
 * 0 when every call succeeded, else 10 + the kolo_result_t. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bindings/c/kolo.h"

static int fail(int rank, const char* what, kolo_result_t r) {
  printf("rank %d: %s failed: %s\n", rank, what, kolo_result_string(r));
  fflush(stdout);
  return 10 + (int)r;
}

static float fbuf[4 * 1001];
static int ibuf[4 * 1001];

static kolo_result_t step_call(kolo_comm_t comm, int i, int n, kolo_dtype_t dtype, size_t count, int root) {
  void* buf = dtype == KOLO_INT32 ? (void*)ibuf : (void*)fbuf;
  switch (i % 3) {
    case 0: return kolo_allreduce(comm, buf, buf, count, dtype, KOLO_SUM);
    case 1: return kolo_broadcast(comm, buf, count, dtype, root);
    default: return kolo_allgather(comm, buf, buf, count / n, dtype);
  }
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: flight_worker FAULT CULPRIT STEP\n");
    return 2;
  }
  const char* fault = argv[1];
  const int culprit = atoi(argv[2]), step = atoi(argv[3]);
  kolo_comm_t world, a, b = NULL;
  kolo_result_t r = kolo_comm_init_from_env(&world);
  if (r) return fail(-1, "init", r);
  int rank, n;
  kolo_comm_rank(world, &rank);
  kolo_comm_size(world, &n);
  const int order = strcmp(fault, "order") == 0;
  a = world;
  if (order) {
    if ((r = kolo_comm_split(world, 0, rank, &a))) return fail(rank, "split", r);
    if ((r = kolo_comm_split(world, 0, rank, &b))) return fail(rank, "split", r);
  }
  const int straggler = strcmp(fault, "straggler") == 0;
  const int steps = straggler ? 30 : 24;
  for (int i = 0; i < steps; ++i) {
    const int me = rank == culprit, now = me && i == step;
    kolo_dtype_t dtype = KOLO_FLOAT32;
    size_t count = 1000;
    int root = i % n;
    if (now) {
      if (strcmp(fault, "missing") == 0) sleep(600);
      if (strcmp(fault, "dead") == 0) raise(SIGKILL);
      if (strcmp(fault, "stuck") == 0) raise(SIGSTOP);
      if (strcmp(fault, "partition") == 0 && system("ip link set dev eth0 down") != 0) {
        fprintf(stderr, "rank %d: cannot take eth0 down (not on an emulated host?)\n", rank);
        return 2;
      }
      if (strcmp(fault, "skip") == 0) continue;
      if (strcmp(fault, "extra") == 0 && (r = kolo_allreduce(a, fbuf, fbuf, 7, KOLO_FLOAT32, KOLO_SUM))) {
        return fail(rank, "the extra allreduce", r);
      }
      if (strcmp(fault, "dtype") == 0) dtype = KOLO_INT32;
      if (strcmp(fault, "count") == 0) count += 1;
      if (strcmp(fault, "root") == 0) root = (root + 1) % n;
    }
    if (me && straggler) usleep(20000);
    if (order) {
      kolo_comm_t first = now ? b : a, second = now ? a : b;
      if ((r = kolo_allreduce(first, fbuf, fbuf, count, dtype, KOLO_SUM))) return fail(rank, "allreduce", r);
      if ((r = kolo_allreduce(second, fbuf, fbuf, count, dtype, KOLO_SUM))) return fail(rank, "allreduce", r);
    } else if ((r = step_call(a, i, n, dtype, count, root))) {
      return fail(rank, "step", r);
    }
  }
  if (getenv("KOLO_FLIGHT_RECORDER_DIR") && (r = kolo_comm_dump_flight_record(a, NULL))) {
    return fail(rank, "dump", r);
  }
  printf("rank %d: all steps done\n", rank);
  if (b) kolo_comm_destroy(b);
  if (a != world) kolo_comm_destroy(a);
  kolo_comm_destroy(world);
  return 0;
}
