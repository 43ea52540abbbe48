#include "bench/model.h"

#include <cmath>

#include <gtest/gtest.h>

namespace kolo::bench {
namespace {

TEST(BusBandwidth, NcclTestsFactors) {
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllreduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllreduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllreduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllgather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kReduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAlltoall, 2), 0.5);
  EXPECT_DOUBLE_EQ(algbw_gbps(2e9, 1.0), 2.0);
  // A 64 MiB allreduce at N=4 moves 6 x 64 MiB over the links in all.
  EXPECT_DOUBLE_EQ(bytes_on_links(Collective::kAllreduce, 4, 64.0 * (1 << 20)), 6.0 * 64 * (1 << 20));
}

TEST(BusBandwidth, MedianAndParsing) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
  Collective c;
  EXPECT_TRUE(parse_collective("reduce_scatter", &c));
  EXPECT_EQ(c, Collective::kReduceScatter);
  EXPECT_TRUE(parse_collective("alltoallv", &c));
  EXPECT_EQ(c, Collective::kAlltoallv);
  EXPECT_STREQ(collective_name(Collective::kReduceScatterv), "reduce_scatterv");
  EXPECT_FALSE(parse_collective("alltoallw", &c));
}

TEST(RingModel, FitRecoversTheParameters) {
  RingModel truth;
  truth.hop_latency_s = 20e-6;
  truth.link_bytes_per_s = 3e9;
  const double small = 4096, large = 64e6;
  RingModel m = RingModel::fit(4, small, truth.allreduce_seconds(small, 4), large, truth.allreduce_seconds(large, 4));
  EXPECT_NEAR(m.hop_latency_s, 20e-6, 1e-9);
  EXPECT_NEAR(m.link_bytes_per_s, 3e9, 1e3);
  // Toward large N the bandwidth term tends to 2 x bytes / beta.
  EXPECT_NEAR(truth.allreduce_seconds(1e9, 1000000), 2.0 * 1e9 / 3e9 + 2.0 * 999999 * 20e-6, 1e-3);
  EXPECT_EQ(truth.allreduce_seconds(1e9, 1), 0);
}

TEST(OverlappedStep, HidesCommunicationBehindBackward) {
  // Three buckets ready at 10, 20, 30 ms of a 30 ms backward pass.
  const std::vector<double> ready = {0.010, 0.020, 0.030};
  // Communication that fits in the gaps is hidden except the last bucket's.
  EXPECT_NEAR(overlapped_step_seconds(0.010, 0.030, ready, {0.005, 0.005, 0.005}), 0.010 + 0.035, 1e-12);
  // Communication longer than the gaps queues up.
  EXPECT_NEAR(overlapped_step_seconds(0.010, 0.030, ready, {0.020, 0.020, 0.020}), 0.010 + 0.070, 1e-12);
  // No communication: the step is the compute.
  EXPECT_NEAR(overlapped_step_seconds(0.010, 0.030, ready, {0, 0, 0}), 0.040, 1e-12);
}

}  // namespace
}  // namespace kolo::bench
