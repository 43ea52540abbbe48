// The pair table every connected transport keeps: lookups name what is
// missing, an add can be refused under the lock (an abort racing with a
// connection), walks go in rank order and stop at the first error, and a
// walk from another thread sees every pair added before or during it.
#include "transport/pair_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace kolo {
namespace {

struct Pair {
  int peer;
  bool shut = false;
};

TEST(PairTable, LookupsNameWhatIsMissing) {
  PairTable<Pair> pairs("TCP");
  EXPECT_FALSE(pairs.contains(3));
  EXPECT_EQ(pairs.find(3), nullptr);
  Pair* p = nullptr;
  Status s = pairs.lookup(3, 1, &p);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_EQ(s.message(), "rank 3 is not connected to rank 1 over TCP");
  s = pairs.lookup_from_collective(3, 1, &p);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_EQ(s.message(), "rank 3 is not connected to rank 1 over TCP");
  ASSERT_TRUE(pairs.add(3, std::make_unique<Pair>(Pair{3})).is_ok());
  ASSERT_TRUE(pairs.lookup(3, 1, &p).is_ok());
  EXPECT_EQ(p->peer, 3);
  p = nullptr;
  ASSERT_TRUE(pairs.lookup_from_collective(3, 1, &p).is_ok());
  EXPECT_EQ(p->peer, 3);
  EXPECT_TRUE(pairs.contains(3));
}

TEST(PairTable, AnAddCanBeRefusedAndWalksStopAtTheFirstError) {
  PairTable<Pair> pairs("RDMA");
  for (int peer : {5, 2, 7}) ASSERT_TRUE(pairs.add(peer, std::make_unique<Pair>(Pair{peer})).is_ok());
  const Status refused = pairs.add(9, std::make_unique<Pair>(Pair{9}), [](Pair& p) {
    p.shut = true;
    return aborted("aborted while connecting");
  });
  EXPECT_EQ(refused.code(), Code::kAborted);
  EXPECT_FALSE(pairs.contains(9));
  std::vector<int> seen;
  const Status walked = pairs.for_each([&](int peer, Pair&) {
    seen.push_back(peer);
    return peer == 5 ? transport_error("pair to 5 failed") : Status::ok();
  });
  EXPECT_EQ(walked.code(), Code::kTransport);
  EXPECT_EQ(seen, (std::vector<int>{2, 5}));  // rank order, stopped at 5
  EXPECT_TRUE(pairs.any([](Pair& p) { return p.peer == 7; }));
  EXPECT_FALSE(pairs.any([](Pair& p) { return p.peer == 9; }));
  pairs.clear();
  EXPECT_FALSE(pairs.contains(2));
}

TEST(PairTable, AnAbortEitherShutsAPairOrRefusesIt) {
  // The transports' rule: abort sets its flag, then shuts every pair; an
  // add refuses once the flag is set. However the two interleave, no pair
  // is left open.
  for (int round = 0; round < 200; ++round) {
    PairTable<Pair> pairs("TCP");
    std::atomic<bool> aborted_flag{false};
    std::thread adder([&] {
      for (int peer = 0; peer < 20; ++peer) {
        (void)pairs.add(peer, std::make_unique<Pair>(Pair{peer}), [&](Pair&) {
          return aborted_flag.load() ? aborted("aborted") : Status::ok();
        });
      }
    });
    aborted_flag.store(true);
    (void)pairs.for_each([](int, Pair& p) {
      p.shut = true;
      return Status::ok();
    });
    adder.join();
    (void)pairs.for_each([&](int peer, Pair& p) {
      EXPECT_TRUE(p.shut) << "round " << round << ": the pair to " << peer << " was left open";
      return Status::ok();
    });
  }
}

}  // namespace
}  // namespace kolo
