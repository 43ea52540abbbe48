/* A rank of the multi-process test of every collective and point-to-point
 * call on a split communicator, in C through the C API only, run by
 * kolorun (tests/split_collectives_test.sh). The world splits by the
 * parity of its ranks, keys reversed. On the split, for every dtype, first
 * with the blocking calls and then with their _async twins (everything of
 * one dtype queued before anything is waited for):
 *   allreduce, reduce and reduce_scatter for every op, checked against
 *   values computed here from the inputs (small integers, exact in every
 *   dtype; avg within the dtype's rounding);
 *   allgatherv, gatherv and scatterv with uneven counts (a zero among
 *   them), alltoall, broadcast, a grouped ring shift of sends and
 *   receives, and a barrier, checked byte for byte.
 * Then the named operations of the engine on both halves at once, under
 * the same names (a name is scoped to its communicator: Horovod's process
 * sets through the C API).
 * Exits 0 and prints "rank R ok" on success; else prints what differed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bindings/c/kolo.h"

#define NUM_DTYPES 10
#define NUM_OPS 5
#define COUNT 1000   /* allreduce and reduce elements */
#define SCATTER 300  /* reduce_scatter elements per rank */
#define MAX_HANDLES 64

static const char* dtype_names[NUM_DTYPES] = {"int8",    "uint8",    "int32",   "uint32", "int64",
                                              "uint64",  "float16", "bfloat16", "float32", "float64"};
static const size_t dtype_sizes[NUM_DTYPES] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
static const char* op_names[NUM_OPS] = {"sum", "prod", "min", "max", "avg"};

static int failures = 0;

/* Small integers 0..3 in every dtype; the 16-bit floats by their bits. */
static void encode(int d, void* base, size_t i, int v) {
  static const uint16_t half[4] = {0x0000, 0x3C00, 0x4000, 0x4200};
  static const uint16_t bf16[4] = {0x0000, 0x3F80, 0x4000, 0x4040};
  char* p = (char*)base + i * dtype_sizes[d];
  int8_t i8 = (int8_t)v;
  int32_t i32 = v;
  int64_t i64 = v;
  float f = (float)v;
  double g = v;
  switch (d) {
    case KOLO_INT8: case KOLO_UINT8: memcpy(p, &i8, 1); break;
    case KOLO_INT32: case KOLO_UINT32: memcpy(p, &i32, 4); break;
    case KOLO_INT64: case KOLO_UINT64: memcpy(p, &i64, 8); break;
    case KOLO_FLOAT16: memcpy(p, &half[v], 2); break;
    case KOLO_BFLOAT16: memcpy(p, &bf16[v], 2); break;
    case KOLO_FLOAT32: memcpy(p, &f, 4); break;
    default: memcpy(p, &g, 8); break;
  }
}

static double decode(int d, const void* base, size_t i) {
  const char* p = (const char*)base + i * dtype_sizes[d];
  switch (d) {
    case KOLO_INT8: { int8_t v; memcpy(&v, p, 1); return v; }
    case KOLO_UINT8: { uint8_t v; memcpy(&v, p, 1); return v; }
    case KOLO_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case KOLO_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case KOLO_INT64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case KOLO_UINT64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
    case KOLO_FLOAT16: {
      uint16_t h;
      memcpy(&h, p, 2);
      const int e = (h >> 10) & 31, m = h & 1023;
      const double mag = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
      return (h & 0x8000) ? -mag : mag;
    }
    case KOLO_BFLOAT16: {
      uint16_t h;
      memcpy(&h, p, 2);
      uint32_t bits = (uint32_t)h << 16;
      float f;
      memcpy(&f, &bits, 4);
      return f;
    }
    case KOLO_FLOAT32: { float v; memcpy(&v, p, 4); return v; }
    default: { double v; memcpy(&v, p, 8); return v; }
  }
}

/* Rank r's input at element i: 1..3 (products over 4 ranks fit int8). */
static int input(int r, size_t i) { return 1 + (int)((r + i) % 3); }

static double expected(int d, int op, int n, size_t i) {
  double acc = input(0, i);
  for (int r = 1; r < n; ++r) {
    const double v = input(r, i);
    if (op == KOLO_SUM || op == KOLO_AVG) acc += v;
    if (op == KOLO_PROD) acc *= v;
    if (op == KOLO_MIN && v < acc) acc = v;
    if (op == KOLO_MAX && v > acc) acc = v;
  }
  if (op != KOLO_AVG) return acc;
  return d <= KOLO_UINT64 ? floor(acc / n) : acc / n;
}

static int close_enough(int d, double got, double want) {
  const double tolerance = d == KOLO_FLOAT16 || d == KOLO_BFLOAT16 ? 1e-2 : 1e-6;
  return fabs(got - want) <= tolerance * fabs(want);
}

static void check_reduced(const char* what, const char* how, int d, int op, const void* buf, size_t first,
                          size_t count, int n, int rank) {
  for (size_t i = 0; i < count; ++i) {
    const double got = decode(d, buf, i), want = expected(d, op, n, first + i);
    if (!close_enough(d, got, want)) {
      printf("rank %d: %s %s %s %s element %zu: %g, expected %g\n", rank, how, what, dtype_names[d], op_names[op],
             first + i, got, want);
      ++failures;
      return;
    }
  }
}

static unsigned char pattern(int from, int to, size_t i) { return (unsigned char)(from * 37 + to * 11 + i * 7 + 1); }

static void check_bytes(const char* what, const char* how, int d, const unsigned char* got, int from, int to,
                        size_t bytes, int rank) {
  for (size_t i = 0; i < bytes; ++i) {
    if (got[i] != pattern(from, to, i)) {
      printf("rank %d: %s %s %s: byte %zu from rank %d differs\n", rank, how, what, dtype_names[d], i, from);
      ++failures;
      return;
    }
  }
}

/* The blocking or the _async form of a call: with handles, queued. */
typedef struct {
  int async;
  kolo_handle_t handles[MAX_HANDLES];
  int queued;
  const char* names[MAX_HANDLES];
} Calls;

static kolo_handle_t* next_handle(Calls* c, const char* name) {
  if (!c->async) return NULL;
  c->names[c->queued] = name;
  return &c->handles[c->queued++];
}

static void called(kolo_result_t r, const char* name, int rank) {
  if (r != KOLO_SUCCESS) {
    printf("rank %d: %s failed: %s: %s\n", rank, name, kolo_result_string(r), kolo_last_error());
    ++failures;
  }
}

/* Each collective of the C API, blocking or queued. */
#define CALL(calls, name, blocking_args, async_args)                                    \
  do {                                                                                   \
    kolo_handle_t* h_ = next_handle(calls, #name);                                      \
    called(h_ ? kolo_##name##_async async_args : kolo_##name blocking_args, #name, rank); \
  } while (0)

static void wait_all(Calls* c, int rank) {
  for (int k = 0; k < c->queued; ++k) {
    called(kolo_handle_wait(c->handles[k], 60), c->names[k], rank);
    kolo_handle_release(c->handles[k]);
  }
  c->queued = 0;
}

static void run_dtype(kolo_comm_t comm, int d, int async, int rank, int n) {
  const char* how = async ? "async" : "blocking";
  const size_t es = dtype_sizes[d];
  Calls calls = {async, {0}, 0, {0}};
  Calls* c = &calls;

  /* Reductions, every op. */
  void* in = malloc(COUNT * es);
  void* all[NUM_OPS];
  void* rooted[NUM_OPS];
  void* scattered_in = malloc((size_t)n * SCATTER * es);
  void* scattered[NUM_OPS];
  for (size_t i = 0; i < COUNT; ++i) encode(d, in, i, input(rank, i));
  for (size_t i = 0; i < (size_t)n * SCATTER; ++i) encode(d, scattered_in, i, input(rank, i));
  for (int op = 0; op < NUM_OPS; ++op) {
    all[op] = calloc(COUNT, es);
    rooted[op] = calloc(COUNT, es);
    scattered[op] = calloc(SCATTER, es);
    CALL(c, allreduce, (comm, in, all[op], COUNT, d, op), (comm, in, all[op], COUNT, d, op, h_));
    CALL(c, reduce, (comm, in, rooted[op], COUNT, d, op, n - 1), (comm, in, rooted[op], COUNT, d, op, n - 1, h_));
    CALL(c, reduce_scatter, (comm, scattered_in, scattered[op], SCATTER, d, op),
         (comm, scattered_in, scattered[op], SCATTER, d, op, h_));
  }

  /* Data movement: uneven blocks of `counts[q]` elements, one empty. */
  size_t counts[16], displs[16], total = 0;
  for (int q = 0; q < n; ++q) {
    counts[q] = q == 1 ? 0 : 100 + 37 * (size_t)q;
    displs[q] = total;
    total += counts[q];
  }
  unsigned char* mine = malloc(counts[rank] * es + 1);
  for (size_t i = 0; i < counts[rank] * es; ++i) mine[i] = pattern(rank, 0, i);
  unsigned char* gathered = calloc(total * es + 1, 1);
  unsigned char* at_root = calloc(total * es + 1, 1);
  unsigned char* root_blocks = malloc(total * es + 1);
  for (int q = 0; q < n; ++q) {
    for (size_t i = 0; i < counts[q] * es; ++i) root_blocks[displs[q] * es + i] = pattern(0, q, i);
  }
  unsigned char* scattered_out = calloc(counts[rank] * es + 1, 1);
  const size_t block = 50, cast_count = 777;
  unsigned char* a2a_out = malloc((size_t)n * block * es);
  unsigned char* a2a_in = calloc((size_t)n * block * es, 1);
  for (int q = 0; q < n; ++q) {
    for (size_t i = 0; i < block * es; ++i) a2a_out[q * block * es + i] = pattern(rank, q, i);
  }
  unsigned char* cast = calloc(cast_count * es, 1);
  if (rank == n - 1) {
    for (size_t i = 0; i < cast_count * es; ++i) cast[i] = pattern(n - 1, 5, i);
  }
  const size_t shift = 123;
  unsigned char* shift_out = malloc(shift * es);
  unsigned char* shift_in = calloc(shift * es, 1);
  for (size_t i = 0; i < shift * es; ++i) shift_out[i] = pattern(rank, 9, i);
  const int right = (rank + 1) % n, left = (rank + n - 1) % n;

  CALL(c, allgatherv, (comm, mine, counts[rank], gathered, counts, displs, d),
       (comm, mine, counts[rank], gathered, counts, displs, d, h_));
  CALL(c, gatherv, (comm, mine, counts[rank], at_root, counts, NULL, d, 0),
       (comm, mine, counts[rank], at_root, counts, NULL, d, 0, h_));
  CALL(c, scatterv, (comm, root_blocks, counts, displs, scattered_out, counts[rank], d, 0),
       (comm, root_blocks, counts, displs, scattered_out, counts[rank], d, 0, h_));
  CALL(c, alltoall, (comm, a2a_out, a2a_in, block, d), (comm, a2a_out, a2a_in, block, d, h_));
  CALL(c, broadcast, (comm, cast, cast_count, d, n - 1), (comm, cast, cast_count, d, n - 1, h_));
  kolo_group_start();
  CALL(c, recv, (comm, shift_in, shift, d, left), (comm, shift_in, shift, d, left, h_));
  CALL(c, send, (comm, shift_out, shift, d, right), (comm, shift_out, shift, d, right, h_));
  called(kolo_group_end(), "group end", rank);
  CALL(c, barrier, (comm), (comm, h_));
  wait_all(c, rank);

  for (int op = 0; op < NUM_OPS; ++op) {
    check_reduced("allreduce", how, d, op, all[op], 0, COUNT, n, rank);
    if (rank == n - 1) check_reduced("reduce", how, d, op, rooted[op], 0, COUNT, n, rank);
    check_reduced("reduce_scatter", how, d, op, scattered[op], (size_t)rank * SCATTER, SCATTER, n, rank);
    free(all[op]);
    free(rooted[op]);
    free(scattered[op]);
  }
  for (int q = 0; q < n; ++q) {
    check_bytes("allgatherv", how, d, gathered + displs[q] * es, q, 0, counts[q] * es, rank);
    if (rank == 0) check_bytes("gatherv", how, d, at_root + displs[q] * es, q, 0, counts[q] * es, rank);
    check_bytes("alltoall", how, d, a2a_in + q * block * es, q, rank, block * es, rank);
  }
  check_bytes("scatterv", how, d, scattered_out, 0, rank, counts[rank] * es, rank);
  check_bytes("broadcast", how, d, cast, n - 1, 5, cast_count * es, rank);
  check_bytes("send/recv", how, d, shift_in, left, 9, shift * es, rank);
  free(in);
  free(scattered_in);
  free(mine);
  free(gathered);
  free(at_root);
  free(root_blocks);
  free(scattered_out);
  free(a2a_out);
  free(a2a_in);
  free(cast);
  free(shift_out);
  free(shift_in);
}

/* Each half sums its world ranks and gathers its ranks' rows under names
 * the other half uses too, submitted in opposite orders by even and odd
 * ranks. */
static void named_operations(kolo_comm_t half, int world_rank, int rank, int n) {
  const char* names[2] = {"step.sum", "step.rows"};
  float mine = (float)world_rank, sum = -1;
  int64_t one = 1, shape[2] = {rank + 1, 2};
  int64_t rows[2 * 16];
  for (int i = 0; i < 2 * (rank + 1); ++i) rows[i] = world_rank;
  kolo_handle_t h[2] = {NULL, NULL};
  for (int k = 0; k < 2; ++k) {
    int which = (world_rank % 2) ? 1 - k : k;
    kolo_result_t r =
        which == 0 ? kolo_submit_allreduce(half, names[0], &mine, &sum, 1, &one, KOLO_FLOAT32, KOLO_SUM, 1.0, 1.0, &h[0])
                   : kolo_submit_allgather(half, names[1], rows, 2, shape, KOLO_INT64, &h[1]);
    if (r != KOLO_SUCCESS) {
      printf("rank %d: submitting %s failed: %s\n", world_rank, names[which], kolo_last_error());
      ++failures;
      return;
    }
  }
  for (int k = 0; k < 2; ++k) {
    if (kolo_handle_wait(h[k], -1) != KOLO_SUCCESS) {
      printf("rank %d: %s failed: %s\n", world_rank, names[k], kolo_last_error());
      ++failures;
    }
  }
  /* The half's world ranks are world_rank % 2, +2, +4...: n of them. */
  float expect = 0;
  int64_t expect_rows = 0;
  for (int q = 0; q < n; ++q) {
    expect += (float)(world_rank % 2 + 2 * q);
    expect_rows += q + 1;
  }
  const void* out = NULL;
  size_t bytes = 0;
  kolo_handle_output(h[1], &out, &bytes);
  if (sum != expect || bytes != (size_t)expect_rows * 2 * sizeof(int64_t)) {
    printf("rank %d: named operations on the split: sum %g (expected %g), %zu bytes gathered (expected %zu)\n",
           world_rank, sum, expect, bytes, (size_t)expect_rows * 2 * sizeof(int64_t));
    ++failures;
  }
  kolo_handle_release(h[0]);
  kolo_handle_release(h[1]);
}

int main(void) {
  kolo_comm_t world, half;
  kolo_result_t r = kolo_comm_init_from_env(&world);
  if (r != KOLO_SUCCESS) {
    printf("init failed: %s\n", kolo_last_error());
    return 1;
  }
  int world_rank = 0, rank = 0, n = 0;
  kolo_comm_rank(world, &world_rank);
  if ((r = kolo_comm_split(world, world_rank % 2, -world_rank, &half))) {
    printf("split failed: %s\n", kolo_last_error());
    return 1;
  }
  kolo_comm_rank(half, &rank);
  kolo_comm_size(half, &n);
  if (n > 16) return 1;
  for (int async = 0; async <= 1; ++async) {
    for (int d = 0; d < NUM_DTYPES; ++d) run_dtype(half, d, async, rank, n);
  }
  named_operations(half, world_rank, rank, n);
  kolo_comm_destroy(half);
  kolo_comm_destroy(world);
  if (failures) return 1;
  printf("rank %d ok\n", world_rank);
  return 0;
}
