// Tuning on made-up machines (tuning.h): the hosts' shape and the links'
// costs from the ranks' facts, each link priced by the kind that carries it,
// KOLO_TRANSPORT, KOLO_ALGORITHM and KOLO_LINK_COSTS where set, and the
// polling by whether the ranks outnumber the cores.
#include "runtime/tuning.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kolo {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

// `hosts` hosts of `per_host` ranks each, every rank offering shared
// memory and TCP, and RDMA where `rdma`.
std::vector<RankFacts> machine(int hosts, int per_host, bool rdma = false) {
  std::vector<RankFacts> facts;
  for (int h = 0; h < hosts; ++h) {
    for (int r = 0; r < per_host; ++r) {
      RankFacts f;
      f.host = "host" + std::to_string(h) + "/boot";
      f.offers["shm"] = std::to_string(kGiB);
      f.offers["tcp"] = "";
      if (rdma) f.offers["ib"] = "1";
      facts.push_back(f);
    }
  }
  return facts;
}

// The pipeline's units the cost model takes.
Pacing units(size_t segment_bytes, size_t cache_bytes) {
  Pacing p;
  p.segment_bytes = segment_bytes;
  p.cache_bytes = cache_bytes;
  return p;
}

void expect_cost(const LinkCost& got, const LinkCost& want) {
  EXPECT_DOUBLE_EQ(got.latency_s, want.latency_s);
  EXPECT_DOUBLE_EQ(got.bytes_per_s, want.bytes_per_s);
}

TEST(Tuning, TwoHostsOfFourShareMemoryWithinAndTcpBetween) {
  const Config config;
  const CostShape shape = choose_costs(config, machine(2, 4), "auto", units(1 << 20, 512 << 10));
  EXPECT_EQ(shape.host_count, 2);
  EXPECT_EQ(shape.ranks_per_host, 4);
  EXPECT_EQ(shape.costs.local_class, "shm");
  EXPECT_EQ(shape.costs.remote_class, "tcp");
  expect_cost(shape.costs.local, find_transport_kind("shm")->link_cost(true));
  expect_cost(shape.costs.remote, find_transport_kind("tcp")->link_cost(false));
  EXPECT_TRUE(shape.costs.host_arenas);
  EXPECT_EQ(shape.costs.segment_bytes, size_t{1} << 20);
  EXPECT_EQ(shape.costs.cache_bytes, size_t{512} << 10);
  // Every rank finds its place among the hosts.
  for (int rank : {0, 5}) {
    bool refused = true;
    std::unique_ptr<HostLayout> layout = choose_host_layout(config, machine(2, 4), rank, &refused);
    ASSERT_NE(layout, nullptr);
    EXPECT_FALSE(refused);
    EXPECT_EQ(layout->local.size(), 4u);
    EXPECT_EQ(layout->cross.size(), 2u);
    EXPECT_EQ(layout->host_index, rank / 4);
    EXPECT_EQ(layout->local_index, rank % 4);
  }
}

TEST(Tuning, EachLinkIsPricedByTheKindThatCarriesIt) {
  // RDMA between the hosts.
  CostShape shape = choose_costs(Config{}, machine(2, 2, /*rdma=*/true), "auto", units(1 << 20, 512 << 10));
  EXPECT_EQ(shape.costs.remote_class, "ib");
  expect_cost(shape.costs.remote, find_transport_kind("ib")->link_cost(false));
  // TCP forced: the loopback within a host, no arenas for the hosts.
  shape = choose_costs(Config{}, machine(2, 4), "tcp", units(1 << 20, 512 << 10));
  EXPECT_EQ(shape.costs.local_class, "tcp");
  expect_cost(shape.costs.local, find_transport_kind("tcp")->link_cost(true));
  EXPECT_FALSE(shape.costs.host_arenas);
  EXPECT_LT(find_transport_kind("shm")->link_cost(true).seconds(1 << 20),
            find_transport_kind("tcp")->link_cost(true).seconds(1 << 20));
  EXPECT_LT(find_transport_kind("tcp")->link_cost(true).seconds(1 << 20),
            find_transport_kind("tcp")->link_cost(false).seconds(1 << 20));
}

TEST(Tuning, OneHostHasNoHierarchyAndSaysSoWhenAskedForOne) {
  Config config;
  const CostShape shape = choose_costs(config, machine(1, 4), "auto", units(1 << 20, 512 << 10));
  EXPECT_EQ(shape.host_count, 1);
  EXPECT_FALSE(shape.costs.host_arenas);
  // The remote link no rank takes is still priced, as TCP between hosts.
  expect_cost(shape.costs.remote, find_transport_kind("tcp")->link_cost(false));
  bool refused = true;
  EXPECT_EQ(choose_host_layout(config, machine(1, 4), 0, &refused), nullptr);
  EXPECT_FALSE(refused);
  config.algorithm = "hierarchical";
  EXPECT_EQ(choose_host_layout(config, machine(1, 4), 0, &refused), nullptr);
  EXPECT_TRUE(refused);
  // Hosts of unequal sizes: no layout either.
  std::vector<RankFacts> uneven = machine(2, 2);
  uneven.push_back(uneven.back());
  EXPECT_EQ(choose_host_layout(Config{}, uneven, 0, &refused), nullptr);
}

TEST(Tuning, TheRingAndConfiguredCostsOverrideTheFacts) {
  Config config;
  config.algorithm = "ring";
  bool refused = true;
  EXPECT_EQ(choose_host_layout(config, machine(2, 4), 0, &refused), nullptr);
  EXPECT_FALSE(refused);
  config.link_costs = "remote=50/0.125";
  const CostShape shape = choose_costs(config, machine(2, 4), "auto", units(1 << 20, 512 << 10));
  EXPECT_EQ(shape.costs.remote_class, "configured");
  expect_cost(shape.costs.remote, LinkCost{50e-6, 0.125e9});
  expect_cost(shape.costs.local, find_transport_kind("shm")->link_cost(true));
}

TEST(Tuning, RanksThatOutnumberTheCoresYieldThemAndSpinLess) {
  Config config;
  const Pacing crowded = choose_pacing(config, /*machine_ranks=*/4, /*cores=*/2, 1 << 20);
  EXPECT_EQ(crowded.spin_us, 50);
  EXPECT_TRUE(crowded.yield);
  EXPECT_EQ(crowded.segment_bytes, 2u << 20);
  EXPECT_EQ(crowded.cache_bytes, 512u << 10);  // half the L2, shared or not
  const Pacing roomy = choose_pacing(config, 2, 16, 1 << 20);
  EXPECT_EQ(roomy.spin_us, 2000);
  EXPECT_FALSE(roomy.yield);
  config.spin_us = 7;
  config.spin_yield = 0;
  config.segment_bytes = 4096;
  const Pacing set = choose_pacing(config, 4, 2, 1 << 20);
  EXPECT_EQ(set.spin_us, 7);
  EXPECT_FALSE(set.yield);
  EXPECT_EQ(set.segment_bytes, 4096u);
  EXPECT_EQ(set.cache_bytes, 512u << 10);
}

}  // namespace
}  // namespace kolo
