// The simulator against what each schedule must take on an idealized
// network (the bounds a schedule cannot beat and should nearly reach), and
// its own consistency: every algorithm finishes at every size, the same
// run gives the same time, and "auto" runs what the cost model chose.
#include "bench/simulator.h"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

namespace kolo::bench {
namespace {

SimulatedNetwork flat(int hosts, double gbytes_per_s, double latency_us) {
  SimulatedNetwork net;
  net.hosts = hosts;
  net.ranks_per_host = 1;
  net.remote = {latency_us * 1e-6, gbytes_per_s * 1e9};
  net.reduce_bytes_per_s = 1e15;  // reductions free: the links alone
  net.copy_bytes_per_s = 1e15;
  return net;
}

SimulatedRun run(const SimulatedNetwork& net, const std::string& algorithm, size_t bytes) {
  SimulatedRun r;
  Status s = simulate_allreduce(net, algorithm, bytes, &r);
  EXPECT_TRUE(s.is_ok()) << algorithm << " " << bytes << ": " << s.to_string();
  return r;
}

TEST(Simulator, TheRingMeetsItsBandwidthBound) {
  // 2(N - 1)/N of the buffer through each host's link, in 2(N - 1) steps.
  for (int n : {2, 4, 8}) {
    const SimulatedNetwork net = flat(n, 1.25, 30);
    const size_t bytes = size_t(64) << 20;
    const SimulatedRun r = run(net, "ring", bytes);
    EXPECT_EQ(r.algorithm, "ring");
    const double bound = 2.0 * (n - 1) / n * double(bytes) / 1.25e9;
    EXPECT_GT(r.seconds, bound) << n;
    EXPECT_LT(r.seconds, 1.05 * bound + 2 * (n - 1) * 30e-6 * 32) << n;
  }
}

TEST(Simulator, RecursiveDoublingTakesLog2NLatencies) {
  const SimulatedNetwork net = flat(8, 1.25, 30);
  const SimulatedRun r = run(net, "recursive_doubling", 8);
  EXPECT_NEAR(r.seconds, 3 * 30e-6, 1e-6);
  // The ring's 2(N - 1) latencies at the same size.
  EXPECT_NEAR(run(net, "ring", 32).seconds, 14 * 30e-6, 1e-6);
}

TEST(Simulator, TheTreeTakesLogNLevelsUpAndDown) {
  // 64 hosts: a small message climbs and descends the trees' 6 levels
  // (each rank takes its two trees' steps in turn, so the second tree's
  // can wait up to the first's climb) where the ring takes 126 steps.
  const SimulatedNetwork net = flat(64, 1.25, 30);
  const SimulatedRun tree = run(net, "tree", 1024);
  const SimulatedRun ring = run(net, "ring", 1024);
  EXPECT_GE(tree.seconds, 12 * 30e-6);
  EXPECT_LT(tree.seconds, 4 * 6 * 30e-6);
  EXPECT_GT(ring.seconds, 126 * 30e-6);
}

TEST(Simulator, HierarchicalSendsAHostsShareAcrossHosts) {
  // 4 hosts x 4 ranks, fast links within hosts: what crosses a host's link
  // is 2(H - 1)/H of the buffer (the flat ring's crossing link carries
  // 2(N - 1)/N, the same here, but in 2(H - 1) steps instead of 2(N - 1)).
  SimulatedNetwork net = flat(4, 1.25, 30);
  net.ranks_per_host = 4;
  net.local = {1e-6, 100e9};
  const size_t bytes = size_t(64) << 20;
  const SimulatedRun h = run(net, "hierarchical", bytes);
  const double bound = 2.0 * 3 / 4 * double(bytes) / 1.25e9;
  EXPECT_GT(h.seconds, bound);
  EXPECT_LT(h.seconds, 1.15 * bound);
}

TEST(Simulator, EveryAlgorithmFinishesAtEverySizeAndScale) {
  for (int hosts : {1, 2, 3, 5, 8}) {
    for (int per_host : {1, 2, 3}) {
      SimulatedNetwork net;
      net.hosts = hosts;
      net.ranks_per_host = per_host;
      net.segment_bytes = 64 << 10;
      for (const char* a : {"auto", "ring", "recursive_doubling", "halving_doubling", "tree", "hierarchical"}) {
        for (size_t bytes : {size_t(4), size_t(4096), size_t(1) << 20}) {
          const SimulatedRun r = run(net, a, bytes);
          if (net.ranks() > 1) {
            EXPECT_GT(r.seconds, 0) << a << " " << hosts << "x" << per_host;
          }
        }
      }
    }
  }
}

TEST(Simulator, RunsAreDeterministicAndAutoRunsTheModelsChoice) {
  SimulatedNetwork net;
  net.hosts = 16;
  net.ranks_per_host = 2;
  for (size_t bytes : {size_t(64), size_t(256) << 10, size_t(16) << 20}) {
    const SimulatedRun a = run(net, "auto", bytes);
    const SimulatedRun b = run(net, "auto", bytes);
    EXPECT_EQ(a.seconds, b.seconds);
    EXPECT_EQ(a.messages, b.messages);
    const SimulatedRun forced = run(net, a.algorithm, bytes);
    EXPECT_EQ(forced.seconds, a.seconds) << a.algorithm;
  }
}

TEST(Simulator, ReachesAThousandRanks) {
  SimulatedNetwork net;
  net.hosts = 256;
  net.ranks_per_host = 4;
  const SimulatedRun r = run(net, "tree", size_t(4) << 20);
  EXPECT_GT(r.seconds, 0);
  EXPECT_GT(r.messages, 1000u);
}

}  // namespace
}  // namespace kolo::bench
