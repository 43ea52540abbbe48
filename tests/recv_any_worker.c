/* A rank of the multi-process test of kolo_recv_any and
 * kolo_recv_any_async, in C through the C API only, run by kolorun
 * (tests/recv_any_test.sh, over shared memory and over TCP):
 *   check: every rank sends to rank 0 (kolo_send), which takes N-1
 *     messages with kolo_recv_any and checks each sender's payload and that
 *     each sender is reported exactly once; then every rank sends two
 *     messages (kolo_send_async) and rank 0 queues 2(N-1) kolo_recv_any_async
 *     before waiting: each sender's two come in its order, each source is
 *     written by the time its handle completes; then the same to the last
 *     rank, which is the higher rank of every pair it was not connected to;
 *     kolo_recv_any in a group is refused without harm.
 *   mismatch: the last rank sends 5 int32 where rank 0 takes 10: rank 0
 *     gets KOLO_ERR_MISMATCH naming it, and the sender fails at its next
 *     call.
 *   timeout: nobody sends: rank 0 gets KOLO_ERR_TIMEOUT after
 *     KOLO_TIMEOUT_S (the script sets 2) saying that no peer sent
 *     anything; the others, waiting (longer) to receive from rank 0, fail
 *     when it gives up.
 * Prints "rank R ok" and exits 0 when every rank saw what it must. */
#define _POSIX_C_SOURCE 200809L /* setenv, clock_gettime */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bindings/c/kolo.h"

#define COUNT 3000 /* int32: 12000 bytes, several segments under KOLO_SEGMENT_BYTES=4096 */
#define MAX_RANKS 16

static int failures = 0;
static int rank = 0, n = 0;

static void fail(const char* what) {
  printf("rank %d: %s\n", rank, what);
  ++failures;
}

static void called(kolo_result_t r, const char* name) {
  if (r != KOLO_SUCCESS) {
    printf("rank %d: %s failed: %s: %s\n", rank, name, kolo_result_string(r), kolo_last_error());
    ++failures;
  }
}

/* Message k of sender `from`. */
static int32_t value(int from, int k, size_t i) { return (int32_t)(from * 1000000 + k * 100000 + (int)i); }

static void fill(int32_t* buf, int from, int k) {
  for (size_t i = 0; i < COUNT; ++i) buf[i] = value(from, k, i);
}

/* Which message of which sender buf holds, or -1 if none of the senders' k
 * in [0, 2). */
static int message_of(const int32_t* buf, int from) {
  for (int k = 0; k < 2; ++k) {
    size_t i = 0;
    while (i < COUNT && buf[i] == value(from, k, i)) ++i;
    if (i == COUNT) return k;
  }
  return -1;
}

/* Every other rank sends one message, then two, to `to`. */
static void send_to(kolo_comm_t comm, int to) {
  static int32_t out[3][COUNT];
  fill(out[0], rank, 0);
  called(kolo_send(comm, out[0], COUNT, KOLO_INT32, to), "kolo_send");
  called(kolo_barrier(comm), "kolo_barrier");
  kolo_handle_t h[2];
  for (int k = 0; k < 2; ++k) {
    fill(out[1 + k], rank, k);
    called(kolo_send_async(comm, out[1 + k], COUNT, KOLO_INT32, to, &h[k]), "kolo_send_async");
  }
  for (int k = 0; k < 2; ++k) {
    called(kolo_handle_wait(h[k], -1), "kolo_send_async's handle");
    kolo_handle_release(h[k]);
  }
  called(kolo_barrier(comm), "kolo_barrier");
}

static void receive_at(kolo_comm_t comm) {
  static int32_t in[2 * MAX_RANKS][COUNT];
  int seen[MAX_RANKS] = {0};
  char line[256];
  /* One message each, blocking. */
  for (int m = 0; m < n - 1; ++m) {
    int source = -7;
    kolo_result_t r = kolo_recv_any(comm, in[m], COUNT, KOLO_INT32, &source);
    called(r, "kolo_recv_any");
    if (r != KOLO_SUCCESS) return;
    if (source < 0 || source >= n || source == rank) {
      snprintf(line, sizeof(line), "kolo_recv_any reported source %d", source);
      fail(line);
      return;
    }
    ++seen[source];
    if (message_of(in[m], source) != 0) {
      snprintf(line, sizeof(line), "message %d, reported from rank %d, is not that rank's payload", m, source);
      fail(line);
    }
  }
  for (int q = 0; q < n; ++q) {
    if (seen[q] != (q == rank ? 0 : 1)) {
      snprintf(line, sizeof(line), "rank %d was reported %d times", q, seen[q]);
      fail(line);
    }
  }
  called(kolo_barrier(comm), "kolo_barrier");
  /* Two each, all queued before any is waited for. */
  kolo_handle_t h[2 * MAX_RANKS];
  int source[2 * MAX_RANKS];
  const int total = 2 * (n - 1);
  for (int m = 0; m < total; ++m) {
    called(kolo_recv_any_async(comm, in[m], COUNT, KOLO_INT32, &source[m], &h[m]), "kolo_recv_any_async");
  }
  int next[MAX_RANKS] = {0};
  for (int m = 0; m < total; ++m) {
    kolo_result_t r = kolo_handle_wait(h[m], -1);
    called(r, "kolo_recv_any_async's handle");
    kolo_handle_release(h[m]);
    if (r != KOLO_SUCCESS) return;
    const int s = source[m];
    if (s < 0 || s >= n || s == rank) {
      snprintf(line, sizeof(line), "kolo_recv_any_async wrote source %d", s);
      fail(line);
      return;
    }
    const int k = message_of(in[m], s);
    if (k != next[s]) {
      snprintf(line, sizeof(line), "message %d from rank %d is its message %d, expected %d", m, s, k, next[s]);
      fail(line);
    }
    ++next[s];
  }
  for (int q = 0; q < n; ++q) {
    if (q != rank && next[q] != 2) {
      snprintf(line, sizeof(line), "rank %d was reported %d times of 2", q, next[q]);
      fail(line);
    }
  }
  called(kolo_barrier(comm), "kolo_barrier");
}

static void check(kolo_comm_t comm) {
  for (int to = 0; to < n; to += n - 1) {
    if (rank == to) {
      receive_at(comm);
    } else {
      send_to(comm, to);
    }
  }
  /* Refused in a group, saying why; the communicator is unharmed. */
  int32_t x = 0;
  int source = 5;
  called(kolo_group_start(), "kolo_group_start");
  kolo_result_t r = kolo_recv_any(comm, &x, 1, KOLO_INT32, &source);
  if (r != KOLO_ERR_INVALID_ARGUMENT || !strstr(kolo_last_error(), "group") || source != -1) {
    printf("rank %d: kolo_recv_any in a group returned %s (%s), source %d\n", rank, kolo_result_string(r),
           kolo_last_error(), source);
    ++failures;
  }
  called(kolo_group_end(), "kolo_group_end");
  called(kolo_barrier(comm), "kolo_barrier after the refusal");
}

static void mismatch(kolo_comm_t comm) {
  int32_t buf[10] = {0};
  char line[512];
  if (rank == 0) {
    int source = -7;
    kolo_result_t r = kolo_recv_any(comm, buf, 10, KOLO_INT32, &source);
    char who[32];
    snprintf(who, sizeof(who), "rank %d", n - 1);
    if (r != KOLO_ERR_MISMATCH || !strstr(kolo_last_error(), who)) {
      snprintf(line, sizeof(line), "kolo_recv_any returned %s (%s), expected a mismatch naming %s",
               kolo_result_string(r), kolo_last_error(), who);
      fail(line);
    }
    return;
  }
  kolo_result_t r = KOLO_SUCCESS;
  if (rank == n - 1) r = kolo_send(comm, buf, 5, KOLO_INT32, 0);
  /* The sender's bytes may have left: it learns at its next call. */
  if (r == KOLO_SUCCESS) r = kolo_barrier(comm);
  if (r == KOLO_SUCCESS) fail("the mismatch did not reach this rank");
  if (rank == n - 1 && r != KOLO_ERR_MISMATCH) {
    snprintf(line, sizeof(line), "the sender got %s (%s), expected a mismatch", kolo_result_string(r),
             kolo_last_error());
    fail(line);
  }
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void timeout(kolo_comm_t comm) {
  char line[512];
  if (rank == 0) {
    int32_t x;
    int source = -7;
    const double start = now();
    kolo_result_t r = kolo_recv_any(comm, &x, 1, KOLO_INT32, &source);
    const double took = now() - start;
    if (r != KOLO_ERR_TIMEOUT || !strstr(kolo_last_error(), "no peer sent anything") || source != -1) {
      snprintf(line, sizeof(line), "kolo_recv_any returned %s (%s), source %d", kolo_result_string(r),
               kolo_last_error(), source);
      fail(line);
    }
    if (took < 1.5 || took > 10) {
      snprintf(line, sizeof(line), "kolo_recv_any timed out after %.2f s, KOLO_TIMEOUT_S is 2", took);
      fail(line);
    }
    printf("rank 0: %s after %.2f s: %s\n", kolo_result_string(r), took, kolo_last_error());
    return;
  }
  /* Alive until rank 0 has given up, then told of it: a receive from rank
   * 0 sends nothing to it (a collective would, and rank 0 would not wait
   * for a rank whose next message is a collective's). */
  int32_t x;
  if (kolo_recv(comm, &x, 1, KOLO_INT32, 0) == KOLO_SUCCESS) fail("a message came from rank 0");
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "check";
  /* timeout: only rank 0 has the short deadline; the others wait longer,
   * and learn of rank 0's failure when it closes its connections. */
  const char* launched_rank = getenv("KOLO_RANK");
  if (strcmp(mode, "timeout") == 0 && launched_rank && strcmp(launched_rank, "0") != 0) {
    setenv("KOLO_TIMEOUT_S", "60", 1);
  }
  kolo_comm_t comm;
  kolo_result_t r = kolo_comm_init_from_env(&comm);
  if (r != KOLO_SUCCESS) {
    printf("init failed: %s\n", kolo_last_error());
    return 1;
  }
  kolo_comm_rank(comm, &rank);
  kolo_comm_size(comm, &n);
  if (n < 2 || n > MAX_RANKS) {
    printf("rank %d: needs 2 to %d ranks, got %d\n", rank, MAX_RANKS, n);
    return 1;
  }
  if (strcmp(mode, "check") == 0) {
    check(comm);
  } else if (strcmp(mode, "mismatch") == 0) {
    mismatch(comm);
  } else if (strcmp(mode, "timeout") == 0) {
    timeout(comm);
  } else {
    printf("unknown mode %s\n", mode);
    return 2;
  }
  kolo_comm_destroy(comm);
  if (failures) return 1;
  printf("rank %d ok\n", rank);
  return 0;
}
