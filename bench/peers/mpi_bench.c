/*
 * MPI_Allreduce benchmark, measured exactly like kolo's own benchmark and
 * bench/peers/gloo_bench.cc so the tables compare directly: float32 SUM, in
 * place, a geometric sweep of sizes, per-iteration wall time, the median per
 * rank, then the MAX of those medians over ranks. Bandwidths follow the
 * nccl-tests definitions (GB = 1e9 bytes, busbw = algbw * 2(N-1)/N).
 *
 * Build:  mpicc -O2 -o mpi_bench bench/peers/mpi_bench.c
 * Run:    mpirun --allow-run-as-root --oversubscribe -np N \
 *             --mca pml ob1 --mca btl tcp,self ./mpi_bench [flags]
 * Flags:  --min-bytes B --max-bytes B --step-factor F --iters I --warmup W
 *
 * The TCP-only transport selection matters: left to itself Open MPI would use
 * shared memory between processes on one host, and the comparison with kolo
 * (which speaks TCP over loopback) would then be about the medium, not the
 * algorithm. Forcing pml ob1 keeps UCX, which ignores the btl list, out.
 */

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct options {
  size_t min_bytes, max_bytes, step_factor;
  int iters, warmup;
};

static void usage(const char* why) {
  fprintf(stderr,
          "mpi_bench: %s\nusage: mpi_bench [--min-bytes B] [--max-bytes B]"
          " [--step-factor F] [--iters I] [--warmup W]\n",
          why);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

static long parse_long(const char* flag, const char* text) {
  char* end = NULL;
  long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0) {
    fprintf(stderr, "mpi_bench: bad value '%s' for %s\n", text, flag);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return v;
}

static struct options parse_args(int argc, char** argv) {
  struct options o = {4096, 268435456, 4, 20, 3};
  for (int i = 1; i < argc; i += 2) {
    const char* flag = argv[i];
    if (i + 1 >= argc) usage("missing value for a flag");
    long v = parse_long(flag, argv[i + 1]);
    if (!strcmp(flag, "--min-bytes")) o.min_bytes = (size_t)v;
    else if (!strcmp(flag, "--max-bytes")) o.max_bytes = (size_t)v;
    else if (!strcmp(flag, "--step-factor")) o.step_factor = (size_t)v;
    else if (!strcmp(flag, "--iters")) o.iters = (int)v;
    else if (!strcmp(flag, "--warmup")) o.warmup = (int)v;
    else usage("unknown flag");
  }
  if (o.step_factor < 2) usage("--step-factor must be >= 2");
  if (o.iters < 1) usage("--iters must be >= 1");
  if (o.min_bytes < sizeof(float)) usage("--min-bytes must be >= 4");
  return o;
}

/* Same policy as gloo_bench: big sizes dominate wall time and vary little, so
 * they get a handful of samples. */
static int iters_for(size_t bytes, int iters) {
  const size_t big = (size_t)64 << 20;
  int few = iters / 4 > 5 ? iters / 4 : 5;
  return bytes >= big ? few : iters;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  struct options opt = parse_args(argc, argv);

  if (rank == 0) {
    printf("# MPI_Allreduce N=%d float32 sum in-place; time = max over ranks "
           "of per-rank median; busbw = algbw*2(N-1)/N\n",
           size);
    printf("%12s %10s %12s %11s %11s %6s\n", "size_bytes", "count", "time_us",
           "algbw_GBps", "busbw_GBps", "check");
    fflush(stdout);
  }

  /* Every rank holds rank+1, so each element of the sum is N(N+1)/2, an
   * integer small enough to be exact in float32: equality is the right test. */
  const float expected = (float)size * (float)(size + 1) / 2.0f;
  int any_failed = 0;
  double* secs = malloc(sizeof(double) * (size_t)(opt.iters > 5 ? opt.iters : 5));

  for (size_t bytes = opt.min_bytes; bytes <= opt.max_bytes;
       bytes *= opt.step_factor) {
    const int count = (int)(bytes / sizeof(float));
    float* data = malloc((size_t)count * sizeof(float));
    if (data == NULL || secs == NULL) {
      fprintf(stderr, "mpi_bench: out of memory at %zu bytes\n", bytes);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < count; ++i) data[i] = (float)(rank + 1);

    /* In place, like gloo_bench and kolo_bench --in-place (as the duels run
     * it): an out-of-place call would add a copy the others do not make.
     * The correctness run comes first, on known input;
     * later runs keep summing the result into itself, which only grows the
     * values and never approaches float overflow in a few dozen rounds. */
    MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    int ok = 1;
    for (int i = 0; i < count; ++i) {
      if (data[i] != expected) { ok = 0; break; }
    }

    for (int i = 0; i < opt.warmup; ++i)
      MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);

    const int iters = iters_for(bytes, opt.iters);
    for (int i = 0; i < iters; ++i) {
      double t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      secs[i] = MPI_Wtime() - t0;
    }

    /* One MAX carries both the slowest rank's median and "any rank failed". */
    double stats[2] = {median(secs, iters), ok ? 0.0 : 1.0};
    MPI_Allreduce(MPI_IN_PLACE, stats, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const int size_ok = stats[1] == 0.0;
    if (!size_ok) any_failed = 1;

    if (rank == 0) {
      const double algbw = (double)bytes / stats[0] / 1e9;
      const double busbw = algbw * 2.0 * (size - 1) / size;
      printf("%12zu %10d %12.2f %11.3f %11.3f %6s\n", bytes, count,
             stats[0] * 1e6, algbw, busbw, size_ok ? "OK" : "FAIL");
      fflush(stdout);
    }
    free(data);
  }

  free(secs);
  MPI_Finalize();
  return any_failed;
}
