// The wire formats' kernels alone, on one core: how many float32 elements
// per second each step of a compressed allreduce handles (encode this
// rank's data; a hop: decode, add, encode; the last hop, which also
// decodes into the result; a decode), and the relative error of one
// encoding of normally distributed data, against float32's exact values.
// Each format runs once per kernel level the CPU has (scalar, AVX2,
// AVX-512: wire_format.h's WireKernels), all giving the same bits.
//
//   bazel run -c opt //bench:wire_format_bench [-- ELEMENTS]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "collectives/wire_format.h"
#include "collectives/wire_kernels.h"

namespace {

using kolo::WireFormat;
using kolo::WireHop;

template <typename Fn>
double best_seconds(Fn&& fn) {
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t{16} << 20;
  std::vector<float> local(n), result(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0, 1);
  for (float& x : local) x = g(rng);
  std::printf("%zu float32 elements (%.0f MiB), one core; G elements/s (higher is better)\n", n, n * 4.0 / (1 << 20));
  std::printf("%-9s %-7s %8s %8s %8s %8s %12s %12s\n", "format", "kernels", "encode", "hop", "last hop", "decode",
              "mean rel err", "max err/amax");
  std::vector<kolo::WireKernels> levels;
  for (kolo::WireKernels k : {kolo::WireKernels::kScalar, kolo::WireKernels::kAvx2, kolo::WireKernels::kAvx512}) {
    if (k <= kolo::wire_kernels_supported()) levels.push_back(k);
  }
  for (WireFormat f : {WireFormat::kBf16, WireFormat::kFp16, WireFormat::kFp8E4M3, WireFormat::kFp8E5M2,
                       WireFormat::kInt8}) {
    for (kolo::WireKernels level : levels) {
      kolo::set_wire_kernels(level);
      std::vector<unsigned char> a(kolo::wire_bytes(f, n)), b(kolo::wire_bytes(f, n));
      WireHop encode;
      encode.local = local.data();
      encode.encoded = a.data();
      encode.count = n;
      const double t_encode = best_seconds([&] { kolo::wire_hop(f, encode); });
      WireHop hop = encode;
      hop.received = a.data();
      hop.encoded = b.data();
      const double t_hop = best_seconds([&] { kolo::wire_hop(f, hop); });
      WireHop last = hop;
      last.decoded = result.data();
      const double t_last = best_seconds([&] { kolo::wire_hop(f, last); });
      const double t_decode =
          best_seconds([&] { kolo::wire_decode(f, a.data(), n, kolo::DataType::kFloat32, result.data()); });
      double rel = 0, worst = 0, amax = 0;
      for (size_t i = 0; i < n; ++i) amax = std::max(amax, static_cast<double>(std::fabs(local[i])));
      for (size_t i = 0; i < n; ++i) {
        const double e = std::fabs(static_cast<double>(result[i]) - local[i]);
        rel += e / std::max(1e-30, static_cast<double>(std::fabs(local[i])));
        worst = std::max(worst, e);
      }
      std::printf("%-9s %-7s %8.2f %8.2f %8.2f %8.2f %12.2e %12.2e\n", kolo::wire_format_name(f),
                  kolo::wire_kernels_name(level), n / t_encode / 1e9, n / t_hop / 1e9, n / t_last / 1e9,
                  n / t_decode / 1e9, rel / n, worst / amax);
    }
  }
  kolo::set_wire_kernels(kolo::wire_kernels_supported());
  return 0;
}
