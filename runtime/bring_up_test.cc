// Bring-up alone (bring_up.h), with ranks as threads over an in-memory
// store and no communicator: what the ranks learn of each other at the
// meeting, and what wiring they get from it on one host, on emulated hosts
// (Config::host_name), alone, and with a rank that never comes.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/bring_up.h"
#include "transport/memory_store.h"

namespace kolo {
namespace {

struct Brought {
  Membership world;
  Wiring wiring;
  Status status;
};

// Ranks 0..n-1 (those `arriving` says) meet and come up; each keeps its
// wiring until every rank is done, as a job's ranks would.
std::vector<Brought> bring_up_ranks(int n, const std::function<Config(int)>& config_of,
                                    const std::function<bool(int)>& arriving = [](int) { return true; }) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<Brought> out(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    if (!arriving(r)) continue;
    threads.emplace_back([&, r] {
      const Config config = config_of(r);
      Membership& m = out[r].world;
      m.rank = r;
      m.size = n;
      m.store = store;
      m.job_name = "bring-up-test";
      m.bind_address = "127.0.0.1";
      m.transport = config.transport;
      std::vector<std::unique_ptr<DirectTransport>> opened;
      out[r].status = meet(config, -1, -1, &m, &opened);
      if (!out[r].status.is_ok()) return;
      BringUpPlan plan;
      plan.opened = std::move(opened);
      out[r].status = bring_up(config, thresholds_of(config), m, std::move(plan), &out[r].wiring);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

Config base_config() {
  Config c;
  c.timeout_s = 20;
  return c;
}

TEST(BringUp, RanksOfOneHostMeetAsLocalRanksAndShareAnArena) {
  const int n = 3;
  auto ranks = bring_up_ranks(n, [](int) { return base_config(); });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(ranks[r].status.is_ok()) << ranks[r].status.to_string();
    const Membership& m = ranks[r].world;
    const Wiring& w = ranks[r].wiring;
    EXPECT_EQ(m.facts.size(), 3u);
    EXPECT_EQ(m.local_rank, r);
    EXPECT_EQ(m.local_size, n);
    ASSERT_NE(w.transport, nullptr);
    EXPECT_STREQ(w.transport->name(), "shm");
    EXPECT_NE(w.arena, nullptr) << "one host, every peer over shared memory: the arena";
    EXPECT_EQ(w.host_arena, nullptr);
    EXPECT_EQ(w.hosts, nullptr);
    EXPECT_EQ(w.shape.host_count, 1);
    EXPECT_EQ(w.device_routes.size(), 3u);
    const Topology t = topology_of(w, m, thresholds_of(base_config()), nullptr);
    EXPECT_EQ(t.arena, w.arena.get());
  }
  // KOLO_ALGORITHM=ring: the arena is made all the same (every rank must
  // decide alike) but the tables never see it.
  Config ring = base_config();
  ring.algorithm = "ring";
  EXPECT_EQ(topology_of(ranks[0].wiring, ranks[0].world, thresholds_of(ring), nullptr).arena, nullptr);
}

TEST(BringUp, TwoEmulatedHostsOfTwoRanksGetTheHierarchicalLayoutAndAnArenaPerHost) {
  const int n = 4;
  auto ranks = bring_up_ranks(n, [](int r) {
    Config c = base_config();
    c.host_name = r < 2 ? "emulated-host-a" : "emulated-host-b";
    return c;
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(ranks[r].status.is_ok()) << ranks[r].status.to_string();
    const Membership& m = ranks[r].world;
    const Wiring& w = ranks[r].wiring;
    EXPECT_EQ(m.local_rank, r % 2);
    EXPECT_EQ(m.local_size, 2);
    // The host's name, then what tells machines apart (namespaces, boot).
    EXPECT_EQ(m.facts[r].host.rfind(r < 2 ? "emulated-host-a:" : "emulated-host-b:", 0), 0u) << m.facts[r].host;
    EXPECT_EQ(w.shape.host_count, 2);
    EXPECT_EQ(w.shape.ranks_per_host, 2);
    ASSERT_NE(w.hosts, nullptr);
    EXPECT_EQ(w.hosts->local.size(), 2u);
    EXPECT_EQ(w.hosts->cross.size(), 2u);
    EXPECT_EQ(w.arena, nullptr) << "the other host is not reached through memory";
    EXPECT_NE(w.host_arena, nullptr) << "this host's two ranks share one";
  }
}

TEST(BringUp, ARankAloneHasNoTransportAndNothingToMeet) {
  auto ranks = bring_up_ranks(1, [](int) { return base_config(); });
  ASSERT_TRUE(ranks[0].status.is_ok()) << ranks[0].status.to_string();
  EXPECT_EQ(ranks[0].wiring.transport, nullptr);
  EXPECT_TRUE(ranks[0].world.facts.empty());
  EXPECT_EQ(ranks[0].wiring.shape.host_count, 1);
}

TEST(BringUp, ARankThatNeverArrivesIsNamedByTheDeadline) {
  Config c = base_config();
  c.timeout_s = 1;
  const auto start = std::chrono::steady_clock::now();
  auto ranks = bring_up_ranks(3, [&](int) { return c; }, [](int r) { return r != 2; });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ranks[r].status.code(), Code::kTimeout) << ranks[r].status.to_string();
    EXPECT_NE(ranks[r].status.message().find("rank(s) 2 never arrived at the rendezvous"), std::string::npos)
        << ranks[r].status.message();
  }
}

}  // namespace
}  // namespace kolo
