// The per-peer choice of transport, from what ranks publish (RankFacts)
// and the kinds the transports' folders register: both ends of every pair
// choose alike, the first transport that reaches a peer wins,
// KOLO_TRANSPORT forces one, and the summary says why.
#include "transport/routes.h"

#include <gtest/gtest.h>

namespace kolo {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

// What the shm, ib and tcp kinds offer on such a rank.
RankFacts on(const std::string& host, bool rdma = false, uint64_t shm_free = kGiB) {
  RankFacts f;
  f.host = host + "/boot";
  if (rdma) f.offers["ib"] = "1";
  f.offers["shm"] = std::to_string(shm_free);
  f.offers["tcp"] = "";
  return f;
}

std::string name_of(const TransportKind* kind) { return kind ? kind->name() : "none"; }

TEST(TransportKinds, EveryFolderRegistersItsKindInOrderOfPreference) {
  std::vector<std::string> names;
  for (const TransportKind* kind : transport_kinds()) names.push_back(kind->name());
  EXPECT_EQ(names, (std::vector<std::string>{"shm", "ib", "tcp"}));
  EXPECT_EQ(find_transport_kind("tcp"), transport_kinds().back());
  EXPECT_EQ(find_transport_kind("carrier pigeon"), nullptr);
}

TEST(Routes, EveryPairChoosesAlike) {
  // Two machines of two ranks, RDMA on one rank of each and on a third
  // machine's rank: every combination of the rules.
  const std::vector<RankFacts> facts = {on("a", true), on("a"), on("b", true), on("b"), on("c", true)};
  const int n = static_cast<int>(facts.size());
  std::vector<Routes> routes(n);
  for (int r = 0; r < n; ++r) ASSERT_TRUE(choose_routes(facts, r, "auto", &routes[r]).is_ok());
  for (int a = 0; a < n; ++a) {
    EXPECT_EQ(routes[a].kind[a], nullptr);
    for (int b = 0; b < n; ++b) {
      if (a != b) {
        EXPECT_EQ(routes[a].kind[b], routes[b].kind[a]) << a << " and " << b;
      }
    }
  }
  EXPECT_EQ(name_of(routes[0].kind[1]), "shm");
  EXPECT_EQ(name_of(routes[0].kind[2]), "ib");
  EXPECT_EQ(name_of(routes[0].kind[3]), "tcp");
  EXPECT_EQ(name_of(routes[0].kind[4]), "ib");
  EXPECT_EQ(name_of(routes[1].kind[3]), "tcp");
  EXPECT_EQ(routes[0].summary, "shm to rank 1 (same machine); ib to ranks 2, 4 (another machine); "
                               "tcp to rank 3 (another machine; RDMA on one end only)");
  // Other machines over RDMA or TCP are no cause for a warning.
  for (int r = 0; r < n; ++r) EXPECT_EQ(routes[r].same_machine_warning, "") << r;
}

TEST(Routes, ForcedTransportGoesToEveryPeer) {
  const std::vector<RankFacts> facts = {on("a", true), on("a", true), on("b", true)};
  Routes routes;
  ASSERT_TRUE(choose_routes(facts, 0, "tcp", &routes).is_ok());
  EXPECT_EQ(name_of(routes.kind[1]), "tcp");
  EXPECT_EQ(name_of(routes.kind[2]), "tcp");
  EXPECT_EQ(routes.summary, "tcp to ranks 1-2 (KOLO_TRANSPORT=tcp)");
  ASSERT_TRUE(choose_routes(facts, 0, "ib", &routes).is_ok());
  EXPECT_EQ(name_of(routes.kind[1]), "ib");
}

TEST(Routes, ForcedTransportThatCannotReachAPeerNamesIt) {
  const std::vector<RankFacts> facts = {on("a"), on("a"), on("b")};
  Routes routes;
  Status s = choose_routes(facts, 0, "shm", &routes);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_EQ(s.message(), "KOLO_TRANSPORT=shm cannot reach rank 2: another machine");
  s = choose_routes(facts, 1, "ib", &routes);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_EQ(s.message(), "KOLO_TRANSPORT=ib cannot reach rank 0: no RDMA device");
}

TEST(Routes, ADevShmTooSmallForTheSmallestRingsFallsBackToTcpAndSaysHowToFixIt) {
  // Four ranks need 4 * 3 rings and two arenas: with every slot at its
  // smallest (transport/shm/shm_fit.h) just under 1 MiB, more than 512 KiB
  // holds (the smaller of the two ends counts, so both decide alike).
  const std::vector<RankFacts> facts = {on("a", false, 512 << 10), on("a"), on("a"), on("a")};
  Routes r0, r1;
  ASSERT_TRUE(choose_routes(facts, 0, "auto", &r0).is_ok());
  ASSERT_TRUE(choose_routes(facts, 1, "auto", &r1).is_ok());
  EXPECT_EQ(name_of(r0.kind[1]), "tcp");
  EXPECT_EQ(name_of(r1.kind[0]), "tcp");
  EXPECT_EQ(name_of(r1.kind[2]), "shm");
  EXPECT_NE(r0.summary.find("tcp to ranks 1-3 (/dev/shm has 0 MiB free and 4 ranks here need 1 MiB even with the "
                            "smallest rings"),
            std::string::npos)
      << r0.summary;
  EXPECT_NE(r0.summary.find("--shm-size"), std::string::npos) << r0.summary;
  // The machine's first rank warns, once for the machine; the others do not.
  EXPECT_EQ(r0.same_machine_warning.rfind(
                "ranks 1-3 of this machine reach rank 0 over tcp, not shared memory, several times slower: /dev/shm "
                "has 0 MiB free",
                0),
            0u)
      << r0.same_machine_warning;
  EXPECT_NE(r0.same_machine_warning.find("--shm-size"), std::string::npos) << r0.same_machine_warning;
  EXPECT_EQ(r1.same_machine_warning, "");
}

TEST(Routes, ASmallDevShmStillCarriesTheMachinesRanksWithSmallerRings) {
  // 8 MiB, where the default shapes of 4 ranks (21 MiB) do not fit: the
  // slots shrink to fit, and the ranks stay on shared memory.
  const std::vector<RankFacts> facts(4, on("a", false, 8 << 20));
  Routes routes;
  ASSERT_TRUE(choose_routes(facts, 0, "auto", &routes).is_ok());
  EXPECT_EQ(name_of(routes.kind[3]), "shm") << routes.summary;
  EXPECT_EQ(routes.same_machine_warning, "");
}

TEST(Routes, SixtyFourRanksOfAMachineShareMemoryInLinearSpace) {
  // 64 ranks: rings shrink as they multiply (transport/shm/ring.h), so
  // 1.5 GiB of /dev/shm is room enough (rings of 1 MiB each would need 4).
  const std::vector<RankFacts> facts(64, on("a", false, uint64_t{3} << 29));
  Routes routes;
  ASSERT_TRUE(choose_routes(facts, 0, "auto", &routes).is_ok());
  EXPECT_EQ(name_of(routes.kind[63]), "shm") << routes.summary;
  EXPECT_EQ(routes.same_machine_warning, "");
}

TEST(Routes, ARankWithoutWritableShmIsReachedOtherwise) {
  std::vector<RankFacts> facts = {on("a"), on("a")};
  facts[1].offers.erase("shm");
  Routes routes;
  ASSERT_TRUE(choose_routes(facts, 0, "auto", &routes).is_ok());
  EXPECT_EQ(name_of(routes.kind[1]), "tcp");
  EXPECT_EQ(routes.summary, "tcp to rank 1 (no writable /dev/shm; no RDMA device)");
  EXPECT_EQ(routes.same_machine_warning,
            "rank 1 of this machine reaches rank 0 over tcp, not shared memory, several times slower: no writable "
            "/dev/shm; no RDMA device");
  // Forced by KOLO_TRANSPORT: what the user asked for, no warning.
  ASSERT_TRUE(choose_routes(facts, 0, "tcp", &routes).is_ok());
  EXPECT_EQ(routes.same_machine_warning, "");
}

}  // namespace
}  // namespace kolo
