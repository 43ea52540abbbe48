// kolo_bench: bus bandwidth of kolo's collectives, one process per rank,
// launched with kolorun (or any launcher kolo understands).
//
//   kolorun -np 4 bazel-bin/bench/kolo_bench --min-bytes 4K --max-bytes 256M
//
// For each size it runs warm-up iterations, then times each iteration on
// its own; a rank's time is its median, and the reported time is the largest
// median over ranks (the collective is as slow as its slowest rank). The
// spread column is the slowest rank's (max - min) / median.
//   algbw = size / time
//   busbw = algbw * factor, with nccl-tests' factors: allreduce 2(N-1)/N,
//           allgather and reduce_scatter (N-1)/N, broadcast 1.
// Given --link-gbps (what the links move in total, e.g. measured by
// bench/peers/tcp_ceiling), it also prints the time the algorithm could not
// beat on those links (allreduce moves 2(N-1)*size bytes in all) as a
// percentage of the measured time.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bindings/c/kolo.h"

namespace {

struct Options {
  std::string collective = "allreduce";
  size_t min_bytes = 4096;
  size_t max_bytes = 256u << 20;
  double step_factor = 4;
  int iters = 20;
  int warmup = 3;
  kolo_dtype_t dtype = KOLO_FLOAT32;
  kolo_op_t op = KOLO_SUM;
  bool check = true;
  double link_gbps = 0;
};

size_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  std::string suf(end);
  if (suf == "K" || suf == "k") v *= 1024;
  else if (suf == "M" || suf == "m") v *= 1024 * 1024;
  else if (suf == "G" || suf == "g") v *= 1024.0 * 1024 * 1024;
  else if (!suf.empty()) {
    std::fprintf(stderr, "bad size '%s'\n", s);
    std::exit(2);
  }
  return static_cast<size_t>(v);
}

size_t dtype_bytes(kolo_dtype_t d) {
  switch (d) {
    case KOLO_INT8: case KOLO_UINT8: return 1;
    case KOLO_FLOAT16: case KOLO_BFLOAT16: return 2;
    case KOLO_INT32: case KOLO_UINT32: case KOLO_FLOAT32: return 4;
    default: return 8;
  }
}

const char* kDtypeNames[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                             "float16", "bfloat16", "float32", "float64"};
const char* kOpNames[] = {"sum", "prod", "min", "max", "avg"};

void usage() {
  std::printf(
      "usage: kolo_bench [flags]   (one process per rank; start with kolorun)\n"
      "  --collective C   allreduce (default), allgather, broadcast, reduce_scatter\n"
      "  --min-bytes N    smallest size (default 4K; K/M/G suffixes)\n"
      "  --max-bytes N    largest size (default 256M)\n"
      "  --step-factor F  size multiplier between rows (default 4)\n"
      "  --iters N        timed iterations per size (default 20; fewer above 64M)\n"
      "  --warmup N       untimed iterations per size (default 3)\n"
      "  --dtype T        int8 uint8 int32 uint32 int64 uint64 float16 bfloat16 float32 float64\n"
      "  --op O           sum prod min max avg (default sum)\n"
      "  --no-check       skip the correctness check of each size\n"
      "  --link-gbps G    total throughput the links can carry, for the %%ideal column\n"
      "size is the per-rank buffer: allreduce/broadcast buffer, allgather output,\n"
      "reduce_scatter input. busbw uses nccl-tests' factors (see the source).\n");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") { usage(); std::exit(0); }
    else if (a == "--collective") o.collective = next();
    else if (a == "--min-bytes") o.min_bytes = parse_size(next());
    else if (a == "--max-bytes") o.max_bytes = parse_size(next());
    else if (a == "--step-factor") o.step_factor = std::atof(next());
    else if (a == "--iters") o.iters = std::atoi(next());
    else if (a == "--warmup") o.warmup = std::atoi(next());
    else if (a == "--no-check") o.check = false;
    else if (a == "--check") o.check = true;
    else if (a == "--link-gbps") o.link_gbps = std::atof(next());
    else if (a == "--dtype") {
      std::string v = next();
      int found = -1;
      for (int k = 0; k < 10; ++k) if (v == kDtypeNames[k]) found = k;
      if (found < 0) { std::fprintf(stderr, "unknown dtype %s\n", v.c_str()); std::exit(2); }
      o.dtype = static_cast<kolo_dtype_t>(found);
    } else if (a == "--op") {
      std::string v = next();
      int found = -1;
      for (int k = 0; k < 5; ++k) if (v == kOpNames[k]) found = k;
      if (found < 0) { std::fprintf(stderr, "unknown op %s\n", v.c_str()); std::exit(2); }
      o.op = static_cast<kolo_op_t>(found);
    } else {
      std::fprintf(stderr, "unknown flag %s (see --help)\n", a.c_str());
      std::exit(2);
    }
  }
  if (o.collective != "allreduce" && o.collective != "allgather" && o.collective != "broadcast" &&
      o.collective != "reduce_scatter") {
    std::fprintf(stderr, "unknown collective %s\n", o.collective.c_str());
    std::exit(2);
  }
  if (o.step_factor <= 1 || o.min_bytes == 0 || o.max_bytes < o.min_bytes || o.iters < 1) {
    std::fprintf(stderr, "need --step-factor > 1, 0 < --min-bytes <= --max-bytes, --iters >= 1\n");
    std::exit(2);
  }
  return o;
}

[[noreturn]] void die(const char* what, kolo_result_t r) {
  std::fprintf(stderr, "kolo_bench: %s failed: %s: %s\n", what, kolo_result_string(r), kolo_last_error());
  std::exit(1);
}

#define CHECK_KOLO(call)                 \
  do {                                   \
    kolo_result_t r_ = (call);           \
    if (r_ != KOLO_SUCCESS) die(#call, r_); \
  } while (0)

// Fills with small integers (exact in every dtype for sums) from a pattern
// the check can recompute. Only float32 and int32 data are checked exactly.
float pattern(int rank, size_t i) { return static_cast<float>((rank + static_cast<int>(i % 7)) % 5); }

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  kolo_comm_t comm;
  CHECK_KOLO(kolo_comm_init_from_env(&comm));
  int rank = 0, n = 1;
  CHECK_KOLO(kolo_comm_rank(comm, &rank));
  CHECK_KOLO(kolo_comm_size(comm, &n));
  const size_t es = dtype_bytes(o.dtype);
  const bool checkable = o.check && o.dtype == KOLO_FLOAT32 && o.op == KOLO_SUM;

  double factor = 1;
  if (o.collective == "allreduce") factor = 2.0 * (n - 1) / n;
  else if (o.collective == "allgather" || o.collective == "reduce_scatter") factor = 1.0 * (n - 1) / n;

  if (rank == 0) {
    std::printf("# kolo_bench %s %s %s, %d ranks, time = max over ranks of the median of %d iterations\n",
                o.collective.c_str(), kDtypeNames[o.dtype], kOpNames[o.op], n, o.iters);
    std::printf("%12s %12s %11s %8s %10s %10s %s%s\n", "size(B)", "count", "time(us)", "spread", "algbw(GB/s)",
                "busbw(GB/s)", o.link_gbps > 0 ? "  ideal% " : "", checkable ? " check" : "");
  }
  int failures = 0;
  for (double sz = o.min_bytes; sz <= o.max_bytes * 1.0000001; sz *= o.step_factor) {
    const size_t bytes = static_cast<size_t>(sz) / (es * n) * (es * n);  // divisible by every layout
    if (bytes == 0) continue;
    const size_t total_count = bytes / es;
    std::vector<unsigned char> send(bytes), recv(bytes);
    // Per-collective count argument and buffers.
    auto run_once = [&]() -> kolo_result_t {
      if (o.collective == "allreduce") return kolo_allreduce(comm, send.data(), recv.data(), total_count, o.dtype, o.op);
      if (o.collective == "allgather") return kolo_allgather(comm, send.data(), recv.data(), total_count / n, o.dtype);
      if (o.collective == "broadcast") return kolo_broadcast(comm, recv.data(), total_count, o.dtype, 0);
      return kolo_reduce_scatter(comm, send.data(), recv.data(), total_count / n, o.dtype, o.op);
    };
    bool ok = true;
    if (checkable) {
      float* s = reinterpret_cast<float*>(send.data());
      for (size_t i = 0; i < total_count; ++i) s[i] = pattern(rank, i);
      if (o.collective == "broadcast") std::memcpy(recv.data(), send.data(), bytes);
      CHECK_KOLO(run_once());
      const float* r = reinterpret_cast<const float*>(recv.data());
      size_t check_count = o.collective == "reduce_scatter" ? total_count / n : total_count;
      for (size_t i = 0; i < check_count && ok; ++i) {
        float want = 0;
        if (o.collective == "allreduce") {
          for (int k = 0; k < n; ++k) want += pattern(k, i);
        } else if (o.collective == "reduce_scatter") {
          for (int k = 0; k < n; ++k) want += pattern(k, rank * check_count + i);
        } else if (o.collective == "allgather") {
          size_t block = total_count / n;
          want = pattern(static_cast<int>(i / block), i % block);
        } else {
          want = pattern(0, i);
        }
        if (r[i] != want) ok = false;
      }
    }
    const int iters = std::max(3, std::min(o.iters, static_cast<int>((size_t{1} << 30) / bytes)));
    for (int i = 0; i < o.warmup; ++i) CHECK_KOLO(run_once());
    std::vector<double> t(iters);
    for (int i = 0; i < iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      CHECK_KOLO(run_once());
      t[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    std::sort(t.begin(), t.end());
    double stats[3] = {t[iters / 2], (t.back() - t.front()) / t[iters / 2], ok ? 0.0 : 1.0};
    double worst[3];
    CHECK_KOLO(kolo_allreduce(comm, stats, worst, 3, KOLO_FLOAT64, KOLO_MAX));
    if (worst[2] != 0) ++failures;
    if (rank == 0) {
      const double time = worst[0];
      const double algbw = bytes / time / 1e9;
      std::printf("%12zu %12zu %11.1f %7.0f%% %10.3f %10.3f", bytes, total_count, time * 1e6, worst[1] * 100, algbw,
                  algbw * factor);
      if (o.link_gbps > 0) {
        // Bytes that must cross links in total, over what the links carry.
        double moved = o.collective == "allreduce" ? 2.0 * (n - 1) * bytes
                                                   : (o.collective == "broadcast" ? (n - 1.0) * bytes
                                                                                  : (n - 1.0) * bytes);
        double ideal = moved / (o.link_gbps * 1e9);
        std::printf(" %7.1f%%", 100 * ideal / time);
      }
      if (checkable) std::printf("  %s", worst[2] == 0 ? "OK" : "FAIL");
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  CHECK_KOLO(kolo_comm_destroy(comm));
  if (failures) {
    if (rank == 0) std::fprintf(stderr, "kolo_bench: %d size(s) gave wrong results\n", failures);
    return 1;
  }
  return 0;
}
