// Allreduce benchmark for Gloo, the peer kolo is most often compared with.
//
// It measures the same way kolo's own benchmark does, so the two tables can be
// put side by side: one process per rank, float32 SUM, in place, a geometric
// sweep of sizes, per-iteration wall time, the median per rank and then the
// MAX of those medians over ranks (a collective is only as fast as its slowest
// rank). Bandwidths follow the nccl-tests definitions.
//
// Usage (one process per rank, all given the same fresh directory):
//   KOLO_RANK=r KOLO_WORLD_SIZE=n gloo_bench --store-dir DIR --algo ALGO
//       [--min-bytes B] [--max-bytes B] [--step-factor F]
//       [--iters I] [--warmup W]
// ALGO: ring | ring_chunked | halving_doubling | allreduce
//
// One algorithm per process: Debian's Gloo snapshot slows down 10-100x when
// different algorithms share a context, which would measure that defect rather
// than the algorithm. bench/peers/run_peers.sh starts fresh processes per run.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gloo/algorithm.h"
#include "gloo/allreduce.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"

namespace {

struct Options {
  std::string algo = "allreduce";
  std::string store_dir;
  std::string hostname = "127.0.0.1";  // where this rank listens
  std::size_t min_bytes = 4096;
  std::size_t max_bytes = 268435456;
  std::size_t step_factor = 4;
  int iters = 20;
  int warmup = 3;
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "gloo_bench: %s\n"
               "usage: KOLO_RANK=r KOLO_WORLD_SIZE=n gloo_bench --store-dir DIR"
               " [--algo ring|ring_chunked|halving_doubling|allreduce]"
               " [--min-bytes B] [--max-bytes B] [--step-factor F]"
               " [--iters I] [--warmup W]\n",
               why);
  std::exit(2);
}

long ParseInt(const char* flag, const char* text) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0) {
    std::fprintf(stderr, "gloo_bench: bad value '%s' for %s\n", text, flag);
    std::exit(2);
  }
  return v;
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) Usage(("missing value for " + flag).c_str());
    const char* value = argv[++i];
    if (flag == "--algo") {
      o.algo = value;
    } else if (flag == "--store-dir") {
      o.store_dir = value;
    } else if (flag == "--hostname") {
      o.hostname = value;  // the address to listen on (an emulated host's, say)
    } else if (flag == "--min-bytes") {
      o.min_bytes = ParseInt(flag.c_str(), value);
    } else if (flag == "--max-bytes") {
      o.max_bytes = ParseInt(flag.c_str(), value);
    } else if (flag == "--step-factor") {
      o.step_factor = ParseInt(flag.c_str(), value);
    } else if (flag == "--iters") {
      o.iters = ParseInt(flag.c_str(), value);
    } else if (flag == "--warmup") {
      o.warmup = ParseInt(flag.c_str(), value);
    } else {
      Usage(("unknown flag " + flag).c_str());
    }
  }
  if (o.store_dir.empty()) Usage("--store-dir is required");
  if (o.algo != "ring" && o.algo != "ring_chunked" &&
      o.algo != "halving_doubling" && o.algo != "allreduce") {
    Usage("unknown --algo");
  }
  if (o.step_factor < 2) Usage("--step-factor must be >= 2");
  if (o.iters < 1) Usage("--iters must be >= 1");
  if (o.min_bytes < sizeof(float)) Usage("--min-bytes must be >= 4");
  return o;
}

int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) {
    std::fprintf(stderr, "gloo_bench: %s is not set\n", name);
    std::exit(2);
  }
  return static_cast<int>(ParseInt(name, v));
}

// Big sizes take most of the wall time and their timings barely vary, so a
// handful of samples is enough there; the budget goes to the noisy small ones.
int ItersFor(std::size_t bytes, int iters) {
  constexpr std::size_t kBig = std::size_t{64} << 20;
  return bytes >= kBig ? std::max(5, iters / 4) : iters;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The legacy algorithms are objects bound to one buffer; gloo::allreduce takes
// an options struct instead. Hiding both behind "run once" keeps the timing
// loop identical for every algorithm.
std::function<void()> MakeRunner(const std::string& algo,
                                 const std::shared_ptr<gloo::Context>& ctx,
                                 float* data, int count,
                                 std::shared_ptr<void>* keep_alive) {
  std::vector<float*> ptrs{data};
  if (algo == "allreduce") {
    auto opts = std::make_shared<gloo::AllreduceOptions>(ctx);
    opts->setOutput(data, count);
    // The options take a type-erased reduction; pick the float instance of
    // gloo's own sum so the arithmetic is what the legacy algorithms use.
    void (*sum)(void*, const void*, const void*, std::size_t) =
        &gloo::sum<float>;
    opts->setReduceFunction(sum);
    opts->setTag(1);
    *keep_alive = opts;
    return [opts] { gloo::allreduce(*opts); };
  }
  std::shared_ptr<gloo::Algorithm> a;
  if (algo == "ring") {
    a = std::make_shared<gloo::AllreduceRing<float>>(ctx, ptrs, count);
  } else if (algo == "ring_chunked") {
    a = std::make_shared<gloo::AllreduceRingChunked<float>>(ctx, ptrs, count);
  } else {
    a = std::make_shared<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs,
                                                               count);
  }
  *keep_alive = a;
  return [a] { a->run(); };
}

std::shared_ptr<gloo::Context> Connect(int rank, int size,
                                       gloo::rendezvous::Store& store,
                                       std::shared_ptr<gloo::transport::Device>& dev) {
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  // A 256 MiB step on an oversubscribed 2-core box can take seconds; the
  // default 30 s would turn a slow run into a spurious failure.
  ctx->setTimeout(std::chrono::minutes(10));
  ctx->connectFullMesh(store, dev);
  return ctx;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = ParseArgs(argc, argv);
  const int rank = EnvInt("KOLO_RANK");
  const int size = EnvInt("KOLO_WORLD_SIZE");
  if (size < 1 || rank >= size) Usage("need 0 <= KOLO_RANK < KOLO_WORLD_SIZE");

  // Loopback only: this measures the implementations, not a network.
  gloo::transport::tcp::attr attr;
  attr.hostname = opt.hostname;
  auto dev = gloo::transport::tcp::CreateDevice(attr);

  // Two contexts over one directory: the measured algorithm gets a context to
  // itself, and the tiny result exchange (max of medians, any failure) runs on
  // the other, so it cannot perturb the measured one (see the header note).
  gloo::rendezvous::FileStore files(opt.store_dir);
  gloo::rendezvous::PrefixStore bench_store("bench", files);
  gloo::rendezvous::PrefixStore stats_store("stats", files);
  auto bench_ctx = Connect(rank, size, bench_store, dev);
  auto stats_ctx = Connect(rank, size, stats_store, dev);

  // Two doubles travel per size: the rank's median time and a failure flag.
  // MAX gives the slowest rank's median and "any rank failed" in one call.
  double stats[2];
  gloo::AllreduceOptions stats_opts(stats_ctx);
  stats_opts.setOutput(stats, 2);
  void (*max)(void*, const void*, const void*, std::size_t) =
      &gloo::max<double>;
  stats_opts.setReduceFunction(max);
  stats_opts.setTag(2);

  if (rank == 0) {
    std::printf("# gloo algo=%s N=%d float32 sum in-place; time = max over "
                "ranks of per-rank median; busbw = algbw*2(N-1)/N\n",
                opt.algo.c_str(), size);
    std::printf("%12s %10s %12s %11s %11s %6s\n", "size_bytes", "count",
                "time_us", "algbw_GBps", "busbw_GBps", "check");
    std::fflush(stdout);
  }

  // Every rank holds rank+1, so every element of the sum is 1+2+..+N; small
  // integers are exact in float32, so the check can demand equality.
  const float expected = static_cast<float>(size) * (size + 1) / 2.0f;
  bool any_failed = false;

  for (std::size_t bytes = opt.min_bytes; bytes <= opt.max_bytes;
       bytes *= opt.step_factor) {
    const int count = static_cast<int>(bytes / sizeof(float));
    std::vector<float> data(count, static_cast<float>(rank + 1));
    std::shared_ptr<void> keep_alive;
    auto run = MakeRunner(opt.algo, bench_ctx, data.data(), count, &keep_alive);

    // Correctness first, on a known input; later iterations keep reducing the
    // result into itself, which only grows the values (no denormals, and
    // 20-odd rounds of xN stay far from float overflow), so it costs nothing
    // to leave them unrefilled and keeps fills out of the cache picture.
    run();
    bool ok = std::all_of(data.begin(), data.end(),
                          [&](float v) { return v == expected; });

    for (int i = 0; i < opt.warmup; ++i) run();

    const int iters = ItersFor(bytes, opt.iters);
    std::vector<double> secs;
    secs.reserve(iters);
    for (int i = 0; i < iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      run();
      auto t1 = std::chrono::steady_clock::now();
      secs.push_back(std::chrono::duration<double>(t1 - t0).count());
    }

    stats[0] = Median(secs);
    stats[1] = ok ? 0.0 : 1.0;
    gloo::allreduce(stats_opts);
    const double t = stats[0];
    const bool size_ok = stats[1] == 0.0;
    any_failed |= !size_ok;

    if (rank == 0) {
      const double algbw = bytes / t / 1e9;
      const double busbw = algbw * 2.0 * (size - 1) / size;
      std::printf("%12zu %10d %12.2f %11.4f %11.4f %6s\n", bytes, count,
                  t * 1e6, algbw, busbw, size_ok ? "OK" : "FAIL");
      std::fflush(stdout);
    }
  }
  return any_failed ? 1 : 0;
}
