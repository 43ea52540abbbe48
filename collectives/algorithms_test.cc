// The algorithm tables: which entry each kind of call gets, and which
// peers a communicator connects up front. Pure: nothing runs.
#include "collectives/algorithms.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/hierarchical.h"

namespace kolo {
namespace {

struct World {
  Topology topology;
  Thresholds thresholds;
  HostLayout layout;
  explicit World(int rank, int size, size_t small = 64 << 10) {
    topology.rank = rank;
    topology.size = size;
    thresholds.small_bytes = small;
  }
  // Ranks on `hosts` hosts, size / hosts on each, in blocks.
  void spread_over(int hosts) {
    std::vector<std::string> host_of_rank;
    for (int r = 0; r < topology.size; ++r) host_of_rank.push_back("h" + std::to_string(r / (topology.size / hosts)));
    ASSERT_TRUE(make_host_layout(host_of_rank, topology.rank, &layout));
    topology.hosts = &layout;
  }
  std::string allreduce(size_t bytes, bool host_memory = true) const {
    return allreduce_algorithm(topology, thresholds, bytes, host_memory);
  }
};

template <typename Args>
std::string first_applying(const std::vector<const Algorithm<Args>*>& table, const World& w, const Call& c) {
  for (const auto* a : table) {
    if (a->applies(w.topology, w.thresholds, c)) return a->name;
  }
  return "none";
}

TEST(AlgorithmTables, FlatAllreduceBySize) {
  World w(0, 4);
  EXPECT_EQ(w.allreduce(0), "ring");  // nothing to move: the ring's empty frame says so to mismatched peers
  EXPECT_EQ(w.allreduce(4), "recursive_doubling");
  EXPECT_EQ(w.allreduce(64 << 10), "recursive_doubling");
  EXPECT_EQ(w.allreduce((64 << 10) + 1), "ring");
  EXPECT_EQ(World(0, 1).allreduce(4), "ring");
}

TEST(AlgorithmTables, OneHostWithAnArenaTakesItForHostBuffers) {
  World w(1, 4);
  int arena_stand_in = 0;  // the tables only test for its presence
  w.topology.arena = reinterpret_cast<SharedArena*>(&arena_stand_in);
  EXPECT_EQ(w.allreduce(4), "shared_memory");
  EXPECT_EQ(w.allreduce(4, /*host_memory=*/false), "recursive_doubling");  // a GPU's buffers
  EXPECT_EQ(w.allreduce(1 << 20), "shared_memory");
  EXPECT_EQ(w.allreduce(1 << 20, /*host_memory=*/false), "ring");  // a GPU's buffers
}

TEST(AlgorithmTables, HierarchicalAcrossHosts) {
  World w(2, 8);
  w.spread_over(2);
  EXPECT_EQ(w.allreduce(4), "recursive_doubling");
  EXPECT_EQ(w.allreduce(1 << 20), "hierarchical");
  Call equal;
  equal.bytes = 1 << 20;
  EXPECT_EQ(first_applying(allgather_algorithms(), w, equal), "hierarchical");
  EXPECT_EQ(first_applying(reduce_scatter_algorithms(), w, equal), "hierarchical");
  Call uneven = equal;
  uneven.equal_blocks = false;  // allgatherv, reduce_scatterv with uneven counts
  EXPECT_EQ(first_applying(allgather_algorithms(), w, uneven), "ring");
  EXPECT_EQ(first_applying(reduce_scatter_algorithms(), w, uneven), "ring");
  w.thresholds.forced = "hierarchical";  // KOLO_ALGORITHM=hierarchical
  EXPECT_EQ(w.allreduce(4), "hierarchical");
}

TEST(AlgorithmTables, EveryTableEndsWithAnAlgorithmThatAlwaysApplies) {
  World w(0, 3);
  Call c;
  c.bytes = 12345;
  c.equal_blocks = false;
  c.host_memory = false;
  EXPECT_TRUE(allreduce_algorithms().back()->applies(w.topology, w.thresholds, c));
  EXPECT_TRUE(allgather_algorithms().back()->applies(w.topology, w.thresholds, c));
  EXPECT_TRUE(reduce_scatter_algorithms().back()->applies(w.topology, w.thresholds, c));
}

std::vector<int> sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(AlgorithmTables, PeersAreTheRingsNeighboursAndTheLatencyPartners) {
  // Rank 0 of 8: ring neighbours 1 and 7; recursive doubling 1, 2, 4.
  EXPECT_EQ(sorted(algorithm_peers(World(0, 8).topology, World(0, 8).thresholds)), (std::vector<int>{1, 2, 4, 7}));
  // KOLO_SMALL_ALLREDUCE_BYTES=0: halving and doubling's are the same.
  World no_small(0, 8, 0);
  EXPECT_EQ(sorted(algorithm_peers(no_small.topology, no_small.thresholds)), (std::vector<int>{1, 2, 4, 7}));
  World three(0, 3, 0);  // the ring's two, which are also the fold partner and the group's
  EXPECT_EQ(sorted(algorithm_peers(three.topology, three.thresholds)), (std::vector<int>{1, 2}));
  EXPECT_EQ(algorithm_peers(World(0, 1).topology, World(0, 1).thresholds), std::vector<int>{});
  // Rank 5 of 8 on 2 hosts of 4 (0-3, 4-7): its host's ring (4, 6) and the
  // ring across hosts (1), besides the flat ones (the ring's 4, 6; halving
  // and doubling's 4, 7, 1).
  World h(5, 8, 0);
  h.spread_over(2);
  EXPECT_EQ(sorted(algorithm_peers(h.topology, h.thresholds)), (std::vector<int>{1, 4, 6, 7}));
}

}  // namespace
}  // namespace kolo
