// The negotiator as the engine drives it, with every rank's Negotiator in
// one process and the round's exchange done here: min-reduce the control
// vectors, gather the messages when any rank has one.
#include "runtime/negotiator.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/dtype.h"

namespace kolo {
namespace {

OpRequest allreduce(const std::string& name, std::vector<int64_t> shape, DataType dtype = DataType::kFloat32) {
  OpRequest r;
  r.name = name;
  r.kind = OpKind::kAllreduce;
  r.dtype = static_cast<int32_t>(dtype);
  r.op = static_cast<int32_t>(ReduceOp::kSum);
  r.shapes = {std::move(shape)};
  return r;
}

struct World {
  std::vector<Negotiator> ranks;
  bool last_round_had_messages = false;
  World(int n, size_t cache_capacity) {
    for (int r = 0; r < n; ++r) ranks.emplace_back(r, n, cache_capacity);
  }
  void submit(int rank, const OpRequest& request) {
    ASSERT_TRUE(ranks[rank].add_local(request, SteadyClock::now()).is_ok()) << request.name;
  }
  // One round on every rank; each rank's outcome.
  std::vector<RoundOutcome> round() {
    std::vector<RoundContribution> c;
    for (auto& n : ranks) c.push_back(n.begin_round());
    std::vector<uint8_t> reduced = c[0].control;
    for (const auto& x : c) {
      EXPECT_EQ(x.control.size(), reduced.size());  // the slots are the same on every rank
      for (size_t i = 0; i < reduced.size() && i < x.control.size(); ++i) reduced[i] = std::min(reduced[i], x.control[i]);
    }
    std::vector<std::string> messages;
    last_round_had_messages = reduced[0] == 0;
    if (last_round_had_messages) {
      for (const auto& x : c) messages.push_back(x.message);
    }
    std::vector<RoundOutcome> out(ranks.size());
    for (size_t r = 0; r < ranks.size(); ++r) {
      EXPECT_TRUE(ranks[r].finish_round(reduced, messages, SteadyClock::now(), &out[r]).is_ok());
    }
    return out;
  }
};

std::vector<std::string> names(const RoundOutcome& o) {
  std::vector<std::string> n;
  for (const auto& r : o.ready) n.push_back(r.spec.name);
  return n;
}

TEST(Negotiator, NamesSubmittedInAnyOrderRunInOneOrderEverywhere) {
  World w(3, 16);
  w.submit(0, allreduce("a", {4}));
  w.submit(0, allreduce("b", {8}));
  w.submit(1, allreduce("b", {8}));
  w.submit(1, allreduce("a", {4}));
  w.submit(2, allreduce("b", {8}));
  auto first = w.round();
  for (const auto& o : first) EXPECT_EQ(names(o), std::vector<std::string>{"b"}) << "only b is on every rank";
  w.submit(2, allreduce("a", {4}));
  auto second = w.round();
  for (const auto& o : second) EXPECT_EQ(names(o), std::vector<std::string>{"a"});
}

TEST(Negotiator, SteadyStateIsTheCacheAndNoMessage) {
  World w(2, 16);
  for (int step = 0; step < 3; ++step) {
    for (int r = 0; r < 2; ++r) {
      w.submit(r, allreduce("w1", {256, 4}));
      w.submit(r, allreduce("w2", {10}));
    }
    auto out = w.round();
    for (const auto& o : out) {
      EXPECT_EQ(o.ready.size(), 2u);
      EXPECT_EQ(o.cache_hits, step == 0 ? 0 : 2) << "step " << step;
      for (const auto& r : o.ready) EXPECT_TRUE(r.error.is_ok());
    }
    EXPECT_EQ(w.last_round_had_messages, step == 0) << "step " << step;
  }
  // A new shape for a cached name is announced in full, and agreed again.
  for (int r = 0; r < 2; ++r) w.submit(r, allreduce("w2", {12}));
  auto out = w.round();
  EXPECT_TRUE(w.last_round_had_messages);
  for (const auto& o : out) {
    ASSERT_EQ(o.ready.size(), 1u);
    EXPECT_EQ(o.ready[0].spec.shapes[0], (std::vector<int64_t>{12}));
  }
}

TEST(Negotiator, DisagreementFailsTheNameOnEveryRankNamingWhoHoldsWhat) {
  World w(3, 16);
  w.submit(0, allreduce("t", {4}, DataType::kFloat32));
  w.submit(1, allreduce("t", {4}, DataType::kFloat32));
  w.submit(2, allreduce("t", {4}, DataType::kFloat64));
  auto out = w.round();
  for (const auto& o : out) {
    ASSERT_EQ(o.ready.size(), 1u);
    const Status& e = o.ready[0].error;
    EXPECT_EQ(e.code(), Code::kMismatch);
    EXPECT_NE(e.message().find("'t': ranks disagree on the dtype: float32 on ranks 0, 1; float64 on rank 2"),
              std::string::npos)
        << e.message();
  }
}

TEST(Negotiator, APendingNameCannotBeSubmittedTwice) {
  Negotiator n(0, 2, 16);
  ASSERT_TRUE(n.add_local(allreduce("x", {1}), SteadyClock::now()).is_ok());
  EXPECT_FALSE(n.add_local(allreduce("x", {1}), SteadyClock::now()).is_ok());
}

TEST(Negotiator, AJoinedRankTakesPartWithoutData) {
  World w(2, 16);
  ASSERT_TRUE(w.ranks[1].join().is_ok());
  w.round();  // the join is announced
  w.submit(0, allreduce("late", {3}));
  auto out = w.round();
  for (const auto& o : out) {
    ASSERT_EQ(names(o), std::vector<std::string>{"late"});
    EXPECT_EQ(o.ready[0].joined, std::vector<int>{1});
  }
  ASSERT_TRUE(w.ranks[0].join().is_ok());
  bool done = false;
  for (int i = 0; i < 3 && !done; ++i) {
    auto o = w.round();
    done = o[0].join_done && o[1].join_done;
    if (done) {
      EXPECT_EQ(o[0].last_joined, 0);
    }
  }
  EXPECT_TRUE(done);
}

}  // namespace
}  // namespace kolo
