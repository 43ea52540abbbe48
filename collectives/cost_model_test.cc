// The cost model: KOLO_LINK_COSTS's syntax, the estimates' limits (each
// formula against the bound its schedule must meet), and what the tables
// then choose on one host and across hosts.
#include "collectives/cost_model.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/algorithms.h"
#include "collectives/halving_doubling.h"
#include "collectives/hierarchical.h"
#include "collectives/tree_schedule.h"

namespace kolo {
namespace {

// A host's shared memory and a 10 Gbit/s network between hosts, as the shm
// and tcp kinds price them.
const LinkCost kShm = {2.5e-6, 12e9};
const LinkCost kTcp10G = {30e-6, 1.25e9};

TEST(LinkCosts, ParsesEitherClassOverTheDefaults) {
  CostModel m;
  m.remote = kTcp10G;
  ASSERT_TRUE(parse_link_costs("local=2/10", &m).is_ok());
  EXPECT_DOUBLE_EQ(m.local.latency_s, 2e-6);
  EXPECT_DOUBLE_EQ(m.local.bytes_per_s, 10e9);
  EXPECT_DOUBLE_EQ(m.remote.latency_s, kTcp10G.latency_s);
  ASSERT_TRUE(parse_link_costs("remote=50/0.125,local=1.5/8", &m).is_ok());
  EXPECT_DOUBLE_EQ(m.remote.bytes_per_s, 0.125e9);
  EXPECT_DOUBLE_EQ(m.local.latency_s, 1.5e-6);
  EXPECT_TRUE(parse_link_costs("", &m).is_ok());
}

TEST(LinkCosts, RefusesWhatItCannotRead) {
  for (const char* bad : {"remote", "remote=50", "far=1/1", "remote=x/1", "remote=1/0", "remote=-1/1", "remote=1/1,",
                          "remote=1/inf", "remote=1/1GB"}) {
    CostModel m;
    Status s = parse_link_costs(bad, &m);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("KOLO_LINK_COSTS"), std::string::npos) << s.message();
  }
}

struct Modelled {
  CostModel costs;
  Topology topology;
  Thresholds thresholds;
  HostLayout layout;
  std::vector<std::string> hosts;
  // n ranks on `hosts` hosts in blocks; local and remote links as given.
  Modelled(int n, int host_count, LinkCost local, LinkCost remote, size_t small = 64 << 10) {
    costs.local = local;
    costs.remote = remote;
    costs.tree_depth = double_tree_depth(n);
    topology.rank = 0;
    topology.size = n;
    topology.host_count = host_count;
    topology.ranks_per_host = (n + host_count - 1) / host_count;
    costs.tree_host_load = double_tree_host_load(n, topology.ranks_per_host);
    topology.costs = &costs;
    thresholds.small_bytes = small;
    for (int r = 0; r < n; ++r) hosts.push_back("h" + std::to_string(r * host_count / n));
    if (make_host_layout(hosts, 0, &layout)) topology.hosts = &layout;
  }
  std::string allreduce(size_t bytes) const { return allreduce_algorithm(topology, thresholds, bytes, true); }
};

TEST(CostModel, LargeRingsApproachTheirBandwidthBound) {
  Modelled m(8, 8, kShm, kTcp10G);
  const double b = 256e6;
  const double bound = 2.0 * 7 / 8 * b / kTcp10G.bytes_per_s;  // what each link must carry
  const double ring = ring_allreduce_seconds(m.costs, m.topology, size_t(b));
  EXPECT_GT(ring, bound);
  EXPECT_LT(ring, 1.1 * bound);
  // The tree moves about twice the ring's bytes per link, in exchange for
  // log2 N steps; never less than a link's share.
  EXPECT_GT(tree_allreduce_seconds(m.costs, m.topology, size_t(b)), bound);
}

TEST(CostModel, ChoosesByLatencyAtSmallSizesAndBandwidthAtLarge) {
  // 8 hosts of one rank over 10 Gbit/s TCP.
  Modelled flat(8, 8, kShm, kTcp10G);
  EXPECT_EQ(flat.allreduce(8), "recursive_doubling");
  EXPECT_EQ(flat.allreduce(size_t(256) << 20), "ring");
  // Past the small sizes, 2 log2 N exchanges that carry the ring's bytes
  // beat the ring's 2(N - 1) steps and the tree's log2 N steps of twice
  // the bytes.
  Modelled many(64, 64, kShm, kTcp10G);
  EXPECT_EQ(many.allreduce(size_t(256) << 10), "halving_doubling");
  EXPECT_EQ(many.allreduce(size_t(16) << 20), "halving_doubling");
  // 4 hosts of 2: the hierarchical schedule halves what crosses hosts.
  Modelled two_each(8, 4, kShm, kTcp10G);
  EXPECT_EQ(two_each.allreduce(size_t(64) << 20), "hierarchical");
}

TEST(CostModel, HalvingDoublingCarriesTheRingsBytesInFewerSteps) {
  // Its blocks (halving_doubling.h) each pay 2 log2 p latencies: far above
  // them both come to the bandwidth bound.
  Modelled m(64, 64, kShm, kTcp10G);
  const double b = 256e6;
  const double bound = 2.0 * 63 / 64 * b / kTcp10G.bytes_per_s;
  const double ring = ring_allreduce_seconds(m.costs, m.topology, size_t(b));
  const double hd = halving_doubling_seconds(m.costs, m.topology, size_t(b));
  EXPECT_GT(hd, bound);
  EXPECT_LT(hd, 1.1 * bound);
  EXPECT_NEAR(hd / ring, 1.0, 0.05);
  // Past a power of two, the folded ranks' whole buffers in and out.
  Modelled six(6, 6, kShm, kTcp10G), four(4, 4, kShm, kTcp10G);
  EXPECT_GT(halving_doubling_seconds(six.costs, six.topology, 1 << 20),
            halving_doubling_seconds(four.costs, four.topology, 1 << 20) + 2 * kTcp10G.seconds(1 << 20));
}

TEST(CostModel, OneHostOverTcpHalvesAndDoublesAboveTheSmallSizes) {
  // Four ranks of one host over loopback TCP (no arena), as measured
  // (docs/performance-log.md): recursive doubling for small buffers, the
  // halving and doubling above. The estimates price the ring ahead there
  // (the same bytes, and each of halving and doubling's cache-sized blocks
  // pays its few latencies), and it runs slower: the rule chooses, not
  // the estimates (halving_doubling.h).
  const LinkCost loopback = {20e-6, 3e9};
  Modelled m(4, 1, loopback, kTcp10G);
  EXPECT_EQ(m.allreduce(8), "recursive_doubling");
  for (size_t b : {size_t{1} << 20, size_t{4} << 20, size_t{16} << 20, size_t{64} << 20, size_t{256} << 20}) {
    EXPECT_EQ(m.allreduce(b), "halving_doubling") << b;
  }
  for (size_t b : {size_t{16} << 20, size_t{64} << 20, size_t{256} << 20}) {
    EXPECT_LT(ring_allreduce_seconds(m.costs, m.topology, b), halving_doubling_seconds(m.costs, m.topology, b)) << b;
  }
  // Eight ranks as well; KOLO_ALGORITHM=ring still runs the ring.
  Modelled eight(8, 1, loopback, kTcp10G);
  EXPECT_EQ(eight.allreduce(size_t{64} << 20), "halving_doubling");
  m.thresholds.forced = "ring";
  EXPECT_EQ(m.allreduce(size_t{64} << 20), "ring");
  // Not a power of two (the folded ranks send their whole buffers twice
  // more), or two ranks (the ring's exchange overlaps its two phases): the
  // estimates choose, and the ring wins at the largest sizes.
  Modelled three(3, 1, loopback, kTcp10G);
  EXPECT_EQ(three.allreduce(size_t{64} << 20), "ring");
  Modelled two(2, 1, loopback, kTcp10G);
  EXPECT_EQ(two.allreduce(1 << 20), "ring");
  // Across hosts the links set the pace, and the estimates choose: the
  // ring for the largest buffers on 4 hosts of one rank each.
  Modelled hosts(4, 4, loopback, kTcp10G);
  EXPECT_EQ(hosts.allreduce(size_t{256} << 20), "ring");
  // An arena: never.
  int arena_stand_in = 0;
  m.thresholds.forced = nullptr;
  m.topology.arena = reinterpret_cast<SharedArena*>(&arena_stand_in);
  EXPECT_EQ(m.allreduce(1 << 20), "shared_memory");
}

TEST(CostModel, OneHostsHalvingDoublingBlocksStayInOneCoresCache) {
  // On one host, at most what stays in one core's cache; across hosts, p
  // segments (each block pays 2 log2(p) of the links' latencies there).
  Modelled one(8, 1, kShm, kTcp10G);
  EXPECT_EQ(halving_doubling_block_bytes(one.topology, 2 << 20, 1 << 20), size_t{1} << 20);
  EXPECT_EQ(halving_doubling_block_bytes(one.topology, 64 << 10, 1 << 20), size_t{512} << 10);  // p segments, smaller
  Modelled six(6, 1, kShm, kTcp10G);
  EXPECT_EQ(halving_doubling_block_bytes(six.topology, 64 << 10, 1 << 20), size_t{256} << 10);  // p = 4
  Modelled hosts(8, 2, kShm, kTcp10G);
  EXPECT_EQ(halving_doubling_block_bytes(hosts.topology, 2 << 20, 1 << 20), size_t{16} << 20);
  // The estimate prices the blocks that run: smaller ones, more latencies.
  one.costs.cache_bytes = 4 << 20;
  const double larger = halving_doubling_seconds(one.costs, one.topology, 64 << 20);
  one.costs.cache_bytes = 1 << 20;
  EXPECT_GT(halving_doubling_seconds(one.costs, one.topology, 64 << 20), larger);
}

TEST(CostModel, OneHostTakesTheArenaAtEverySize) {
  // As measured (docs/performance.md): the arena's one-shot for small
  // buffers, its barriers above; recursive doubling and the ring over
  // shared memory never.
  int arena_stand_in = 0;  // the tables only test for its presence
  for (bool reads_peers : {false, true}) {
    for (int n : {2, 4, 8}) {
      Modelled m(n, 1, kShm, kTcp10G);
      m.topology.arena = reinterpret_cast<SharedArena*>(&arena_stand_in);
      m.topology.arena_reads_peers = reads_peers;
      EXPECT_EQ(m.allreduce(8), "shared_memory") << n;
      EXPECT_EQ(m.allreduce(64), "shared_memory") << n;
      EXPECT_EQ(m.allreduce(1 << 20), "shared_memory") << n;
      EXPECT_EQ(m.allreduce(size_t(256) << 20), "shared_memory") << n;
    }
  }
}

TEST(CostModel, TheSingleCopyIsPricedBelowTheSlotsAtEverySize) {
  // The same hop and barriers, each crossing byte copied once instead of
  // twice: wherever the single copy applies, it is the arena entry chosen
  // (and its calls choose between it and the slots by their times).
  for (int n : {2, 4, 8}) {
    Modelled m(n, 1, kShm, kTcp10G);
    for (size_t b : {size_t{16} << 10, size_t{1} << 20, size_t{256} << 20}) {
      EXPECT_LT(single_copy_allreduce_seconds(m.costs, m.topology, b), arena_allreduce_seconds(m.costs, m.topology, b))
          << n << " ranks, " << b << " bytes";
    }
  }
}

TEST(CostModel, TheOneShotIsOneHopAndNReadsOfTheBuffer) {
  // On two ranks, one exchange of recursive doubling: a hop, a copy each
  // way and a reduction (the table's order breaks the tie).
  Modelled two(2, 1, kShm, kTcp10G);
  for (size_t b : {size_t{8}, size_t{4096}}) {
    EXPECT_DOUBLE_EQ(one_shot_allreduce_seconds(two.costs, two.topology, b),
                     recursive_doubling_seconds(two.costs, two.topology, b))
        << b;
  }
  // On eight, one hop against recursive doubling's three, and against the
  // barriers' five; the N reads of the buffer outgrow the barriers' within
  // a mailbox.
  Modelled eight(8, 1, kShm, kTcp10G);
  const Topology& t = eight.topology;
  EXPECT_LT(one_shot_allreduce_seconds(eight.costs, t, 8), recursive_doubling_seconds(eight.costs, t, 8));
  EXPECT_LT(one_shot_allreduce_seconds(eight.costs, t, 1024), arena_allreduce_seconds(eight.costs, t, 1024));
  EXPECT_GT(one_shot_allreduce_seconds(eight.costs, t, 16000), arena_allreduce_seconds(eight.costs, t, 16000));
}

TEST(CostModel, ForcedNamesWinWhereTheyApply) {
  Modelled m(8, 8, kShm, kTcp10G);
  m.thresholds.forced = "tree";
  EXPECT_EQ(m.allreduce(8), "tree");
  m.thresholds.forced = "recursive_doubling";
  EXPECT_EQ(m.allreduce(size_t(64) << 20), "recursive_doubling");
  m.thresholds.forced = "hierarchical";  // one rank per host: does not apply
  EXPECT_NE(m.allreduce(size_t(64) << 20), "hierarchical");
  m.thresholds.forced = "ring";
  EXPECT_EQ(m.allreduce(8), "ring");
}

TEST(CostModel, TheChoiceSaysWhereItChanges) {
  Modelled m(8, 8, kShm, kTcp10G);
  const std::string text = allreduce_choices(m.topology, m.thresholds);
  EXPECT_EQ(text.rfind("recursive_doubling up to ", 0), 0u) << text;
  EXPECT_NE(text.find("ring above"), std::string::npos) << text;
  m.thresholds.forced = "ring";
  EXPECT_EQ(allreduce_choices(m.topology, m.thresholds), "ring at every size");
}

TEST(CostModel, EstimatesNameTheirAlgorithm) {
  Modelled m(8, 4, kShm, kTcp10G);
  Estimate e;
  ASSERT_TRUE(estimate("allgather", m.topology, m.thresholds, size_t(8) << 20, true, &e).is_ok());
  EXPECT_STREQ(e.algorithm, "hierarchical");
  EXPECT_DOUBLE_EQ(e.seconds, hierarchical_allgather_seconds(m.costs, m.topology, size_t(8) << 20));
  Estimate small;
  ASSERT_TRUE(estimate("allreduce", m.topology, m.thresholds, 64, true, &small).is_ok());
  EXPECT_STREQ(small.algorithm, "recursive_doubling");
  EXPECT_GT(small.seconds, 0);
  Estimate chain;
  ASSERT_TRUE(estimate("gather", m.topology, m.thresholds, size_t(8) << 20, true, &chain).is_ok());
  EXPECT_STREQ(chain.algorithm, "chain");
  Estimate pairwise;
  ASSERT_TRUE(estimate("alltoall", m.topology, m.thresholds, size_t(8) << 20, true, &pairwise).is_ok());
  EXPECT_STREQ(pairwise.algorithm, "pairwise");
  Status unknown = estimate("allscatter", m.topology, m.thresholds, 64, true, &small);
  EXPECT_EQ(unknown.code(), Code::kInvalidArgument);
  EXPECT_NE(unknown.message().find("allreduce, allgather, reduce_scatter, broadcast, reduce, gather, scatter, alltoall"),
            std::string::npos)
      << unknown.message();
}

TEST(CostModel, HostArenasPriceTheHierarchicalPhasesWithinAHost) {
  // 2 hosts of 4 ranks over shared memory within and 10 Gbit/s between:
  // with the hosts' arenas, the phases within a host cost the arena's
  // collectives (less than the rings' 2(L - 1) steps), and the phase across
  // hosts the same as before.
  Modelled rings(8, 2, kShm, kTcp10G);
  Modelled arenas(8, 2, kShm, kTcp10G);
  arenas.costs.host_arenas = true;
  const size_t b = size_t(64) << 20;
  const Topology& t = arenas.topology;
  const double cross_allreduce =
      hierarchical_allreduce_seconds(rings.costs, t, b) - 3 * (2 * rings.costs.local.seconds(b / 4.0) + b / 4.0 / 8e9);
  EXPECT_NEAR(hierarchical_allreduce_seconds(arenas.costs, t, b),
              cross_allreduce + arena_reduce_scatter_seconds(arenas.costs, t, b) +
                  arena_allgather_seconds(arenas.costs, t, b),
              1e-9);
  EXPECT_LT(hierarchical_allreduce_seconds(arenas.costs, t, b), hierarchical_allreduce_seconds(rings.costs, t, b));
  EXPECT_LT(hierarchical_allgather_seconds(arenas.costs, t, b), hierarchical_allgather_seconds(rings.costs, t, b));
  EXPECT_LT(hierarchical_reduce_scatter_seconds(arenas.costs, t, b),
            hierarchical_reduce_scatter_seconds(rings.costs, t, b));
}

}  // namespace
}  // namespace kolo
