#include "bench/simulate.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "bench/model.h"
#include "bench/models.h"
#include "bench/scaling.h"

namespace kolo::bench {
namespace {

// Simulations by (algorithm, bytes): a model's buckets repeat sizes.
class Cache {
 public:
  explicit Cache(const SimulatedNetwork& net) : net_(net) {}
  bool get(const std::string& algorithm, size_t bytes, SimulatedRun* out) {
    auto key = std::make_pair(algorithm, bytes);
    auto it = runs_.find(key);
    if (it == runs_.end()) {
      SimulatedRun r;
      Status s = simulate_allreduce(net_, algorithm, bytes, &r);
      if (!s.is_ok()) {
        std::fprintf(stderr, "kolo_bench: %s\n", s.to_string().c_str());
        return false;
      }
      it = runs_.emplace(key, r).first;
    }
    *out = it->second;
    return true;
  }

 private:
  SimulatedNetwork net_;
  std::map<std::pair<std::string, size_t>, SimulatedRun> runs_;
};

void print_network(const SimulatedNetwork& n) {
  std::printf("# simulated: %d hosts x %d ranks = %d ranks; within a host %.3g us, %.3g GB/s; between hosts %.3g us, "
              "%.3g GB/s (%.3g Gbit/s); reduction %.3g GB/s; segments %zu KiB; cache %zu KiB\n",
              n.hosts, n.ranks_per_host, n.ranks(), n.local.latency_s * 1e6, n.local.bytes_per_s / 1e9,
              n.remote.latency_s * 1e6, n.remote.bytes_per_s / 1e9, n.remote.bytes_per_s * 8 / 1e9,
              n.reduce_bytes_per_s / 1e9, n.segment_bytes >> 10, n.cache_bytes >> 10);
}

bool sweep(const SimulateOptions& o, Cache& cache) {
  std::printf("%12s", "size(B)");
  for (const auto& a : o.algorithms) std::printf(" %18s", (a + "(us)").c_str());
  std::printf("  %-18s %8s %8s %9s\n", "auto", "time(us)", "vs best", "model(us)");
  for (double b = double(o.min_bytes); b <= double(o.max_bytes) * 1.0001; b *= o.step_factor) {
    const size_t bytes = std::max<size_t>(4, size_t(b) / 4 * 4);
    std::printf("%12zu", bytes);
    double best = 0;
    for (const auto& a : o.algorithms) {
      SimulatedRun r;
      if (!cache.get(a, bytes, &r)) return false;
      if (r.algorithm != a) {  // does not apply here: the tables ran another
        std::printf(" %18s", "-");
        continue;
      }
      std::printf(" %18.1f", r.seconds * 1e6);
      if (best == 0 || r.seconds < best) best = r.seconds;
    }
    SimulatedRun chosen;
    if (!cache.get("auto", bytes, &chosen)) return false;
    std::printf("  %-18s %8.1f %7.0f%% %9.1f\n", chosen.algorithm.c_str(), chosen.seconds * 1e6,
                best > 0 ? 100 * (chosen.seconds / best - 1) : 0.0, chosen.estimated * 1e6);
  }
  return true;
}

bool scaling(const SimulateOptions& o, Cache& cache) {
  std::vector<std::string> schedules = {"auto"};
  for (const auto& a : o.algorithms) {
    if (a != "recursive_doubling") schedules.push_back(a);
  }
  std::printf("\n# scaling efficiency T(1)/T(N) of data-parallel training at %d ranks: buckets of %.0f MiB, "
              "compute x%.3g of one P100 at batch 64, communication overlapping the backward pass\n",
              o.network.ranks(), o.bucket_mb, o.compute_scale);
  std::printf("%-14s %7s %8s", "model", "buckets", "T(1)ms");
  for (const auto& s : schedules) std::printf(" %14s", s.c_str());
  if (!o.reported.empty()) std::printf(" %14s", "reported");
  std::printf("\n");
  for (const auto& name : o.models) {
    const ModelProfile* m = find_model(name);
    if (!m) {
      std::fprintf(stderr, "kolo_bench: unknown model '%s'\n", name.c_str());
      return false;
    }
    const double forward_s = m->forward_ms / 1e3 * o.compute_scale;
    const double backward_s = m->backward_ms / 1e3 * o.compute_scale;
    const auto buckets = make_buckets(*m, backward_s, o.bucket_mb * (1 << 20));
    std::printf("%-14s %7zu %8.1f", m->name.c_str(), buckets.size(), (forward_s + backward_s) * 1e3);
    for (const auto& s : schedules) {
      std::vector<double> ready, comm_s;
      std::string ran;
      for (const auto& b : buckets) {
        SimulatedRun r;
        if (!cache.get(s, b.elements * sizeof(float), &r)) return false;
        ready.push_back(b.ready_s);
        comm_s.push_back(r.seconds);
        if (ran.find(r.algorithm) == std::string::npos) ran += (ran.empty() ? "" : "+") + r.algorithm;
      }
      const double tn = overlapped_step_seconds(forward_s, backward_s, ready, comm_s);
      if (s != "auto" && ran != s) {
        std::printf(" %14s", "-");  // does not apply to this layout
        continue;
      }
      std::printf(" %13.1f%%", 100 * (forward_s + backward_s) / tn);
    }
    for (const auto& [model, percent] : o.reported) {
      if (model == m->name) std::printf(" %13.0f%%", percent);
    }
    std::printf("\n");
  }
  return true;
}

}  // namespace

bool run_simulate(const SimulateOptions& o) {
  Cache cache(o.network);
  print_network(o.network);
  if (!sweep(o, cache)) return false;
  return o.models.empty() || scaling(o, cache);
}

}  // namespace kolo::bench
