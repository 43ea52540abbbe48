// Faults with ranks as threads: every kind of mismatch gives MISMATCH on
// every rank, promptly; an abort from another thread ends a running
// collective on every rank; failures are sticky.
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/thread_world.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;
constexpr DataType kF32 = DataType::kFloat32;
constexpr DataType kI32 = DataType::kInt32;
constexpr ReduceOp kSum = ReduceOp::kSum;
constexpr ReduceOp kMax = ReduceOp::kMax;

Config fault_config() {
  Config c = test_config(64 << 10, 16 << 10);  // both allreduce algorithms in play
  c.timeout_s = 30;                             // failures must come long before this
  return c;
}

// Runs `call` on every rank of a fresh world of n; expects each rank to fail
// with `want` within 10 s (the deadline is 30 s) and returns the messages.
std::vector<std::string> expect_all_fail(int n, Code want, const std::function<Status(Communicator&, int)>& call) {
  ThreadWorld w(n, fault_config());
  std::vector<Status> got(n);
  auto start = Clock::now();
  w.run([&](int r) { got[r] = call(w.comm(r), r); });
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(took, 10.0) << "failures must spread quickly, not wait for the deadline";
  std::vector<std::string> messages;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(got[r].code(), want) << "rank " << r << ": " << got[r].to_string();
    messages.push_back(got[r].message());
    // Sticky: the next call fails at once with the same code.
    std::vector<float> x(4);
    Status again = w.comm(r).allreduce(x.data(), x.data(), 4, kF32, kSum);
    EXPECT_EQ(again.code(), want) << "rank " << r;
    EXPECT_EQ(w.comm(r).async_error().code(), want) << "rank " << r;
  }
  return messages;
}

class Mismatch : public ::testing::TestWithParam<int> {};

TEST_P(Mismatch, DifferentCollectives) {
  const int n = GetParam();
  std::vector<float> buf(100000 * n);
  expect_all_fail(n, Code::kMismatch, [&](Communicator& c, int r) {
    std::vector<float> mine(buf.size()), out(buf.size());
    if (r == n - 1) return c.broadcast(mine.data(), 100000, kF32, 0);
    return c.allreduce(mine.data(), out.data(), 100000, kF32, kSum);
  });
}

TEST_P(Mismatch, DifferentCountsSmallAndLarge) {
  const int n = GetParam();
  for (size_t base : {size_t{100}, size_t{200000}}) {
    expect_all_fail(n, Code::kMismatch, [&](Communicator& c, int r) {
      size_t count = r == 1 ? base + 1 : base;
      std::vector<float> in(count), out(count);
      return c.allreduce(in.data(), out.data(), count, kF32, kSum);
    });
  }
}

TEST_P(Mismatch, ASmallAllreduceAgainstAnotherCollective) {
  // On one host a small allreduce is the arena's one-shot, which sends no
  // message: its ranks learn of a rank in another collective from that
  // rank's first message (allgather, reduce), and a rank of another
  // collective that waits for theirs (barrier, scatter) learns from its
  // transport that they wait in the one-shot.
  const int n = GetParam();
  for (const char* other : {"allgather", "reduce", "barrier", "scatter"}) {
    SCOPED_TRACE(other);
    expect_all_fail(n, Code::kMismatch, [&](Communicator& c, int r) {
      std::vector<float> in(100 * n, 1.0f), out(100 * n);
      const std::string what = other;
      if (r == n - 1 && what == "allgather") return c.allgather(in.data(), out.data(), 100, kF32);
      if (r == n - 1 && what == "reduce") return c.reduce(in.data(), out.data(), 100, kF32, kSum, 0);
      if (r == n - 1 && what == "barrier") return c.barrier();
      if (r == n - 1 && what == "scatter") return c.scatterv(in.data(), std::vector<size_t>(n, 100), {}, out.data(), 100, kF32, 0);
      return c.allreduce(in.data(), out.data(), 100, kF32, kSum);
    });
  }
}

TEST_P(Mismatch, ZeroCountAgainstNonZero) {
  const int n = GetParam();
  expect_all_fail(n, Code::kMismatch, [&](Communicator& c, int r) {
    std::vector<float> in(1000), out(1000);
    return c.allreduce(in.data(), out.data(), r == 0 ? 0 : 1000, kF32, kSum);
  });
}

TEST_P(Mismatch, DifferentDtype) {
  const int n = GetParam();
  expect_all_fail(n, Code::kMismatch, [&](Communicator& c, int r) {
    std::vector<int32_t> in(50000), out(50000);
    return c.allreduce(in.data(), out.data(), 50000, r == n - 1 ? kI32 : kF32, kSum);
  });
}

TEST_P(Mismatch, DifferentOp) {
  const int n = GetParam();
  expect_all_fail(n, Code::kMismatch, [&](Communicator& c, int r) {
    std::vector<float> in(50000), out(50000);
    return c.allreduce(in.data(), out.data(), 50000, kF32, r == 0 ? kMax : kSum);
  });
}

TEST_P(Mismatch, DifferentBroadcastRoot) {
  const int n = GetParam();
  expect_all_fail(n, Code::kMismatch, [&](Communicator& c, int r) {
    std::vector<float> buf(70000, static_cast<float>(r));
    return c.broadcast(buf.data(), buf.size(), kF32, r == 0 ? 0 : 1);
  });
}

TEST_P(Mismatch, ReduceScatterAgainstAllgather) {
  const int n = GetParam();
  expect_all_fail(n, Code::kMismatch, [&](Communicator& c, int r) {
    std::vector<float> big(3000 * n), small(3000);
    if (r == 0) return c.allgather(small.data(), big.data(), 3000, kF32);
    return c.reduce_scatter(big.data(), small.data(), 3000, kF32, kSum);
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, Mismatch, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& i) { return "N" + std::to_string(i.param); });

TEST(Abort, FromAnotherThreadEndsTheCollectiveOnEveryRank) {
  const int n = 4;
  ThreadWorld w(n, fault_config());
  std::atomic<bool> started{false};
  std::vector<Status> got(n);
  std::vector<double> took(n);
  std::thread aborter([&] {
    while (!started.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    w.comm(2).abort();  // while rank 2's thread is inside a collective
  });
  auto start = Clock::now();
  w.run([&](int r) {
    const size_t count = 4 << 20;
    std::vector<float> in(count, 1.0f), out(count);
    started = true;
    // Keep allreducing until something fails (about 10 s at most).
    for (int i = 0; i < 1000; ++i) {
      got[r] = w.comm(r).allreduce(in.data(), out.data(), count, kF32, kSum);
      if (!got[r].is_ok()) break;
    }
    took[r] = std::chrono::duration<double>(Clock::now() - start).count();
  });
  aborter.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(got[r].code(), Code::kAborted) << "rank " << r << ": " << got[r].to_string();
    EXPECT_NE(got[r].message().find("rank 2 aborted"), std::string::npos) << got[r].message();
    EXPECT_LT(took[r], 5.0) << "rank " << r;
  }
}

TEST(Abort, BeforeAnyCallAndTwice) {
  ThreadWorld w(2, fault_config());
  w.comm(0).abort();
  w.comm(0).abort();
  std::vector<float> x(10);
  EXPECT_EQ(w.comm(0).allreduce(x.data(), x.data(), 10, kF32, kSum).code(), Code::kAborted);
  // Rank 1 learns of it from the closed connection (and the store).
  Status s = w.comm(1).allreduce(x.data(), x.data(), 10, kF32, kSum);
  EXPECT_EQ(s.code(), Code::kAborted) << s.to_string();
  EXPECT_EQ(w.comm(1).async_error().code(), Code::kAborted);
}

TEST(Recovery, SurvivorsFormASmallerCommunicatorAndGoOn) {
  auto world = std::make_unique<ThreadWorld>(3, fault_config());
  // Rank 2 dies: its communicator goes away, its connections close.
  world->release(2);
  std::vector<Status> got(2);
  std::vector<std::thread> survivors;
  for (int r = 0; r < 2; ++r) {
    survivors.emplace_back([&, r] {
      std::vector<float> x(1000, 1.0f);
      got[r] = world->comm(r).allreduce(x.data(), x.data(), x.size(), kF32, kSum);
    });
  }
  for (auto& t : survivors) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(got[r].code(), Code::kPeerLost) << got[r].to_string();
    EXPECT_NE(got[r].message().find("rank 2"), std::string::npos) << got[r].message();
  }
  // A new rendezvous among the survivors, and the job goes on.
  ThreadWorld smaller(2, fault_config());
  smaller.run([&](int r) {
    std::vector<float> x(100000, static_cast<float>(r + 1));
    ASSERT_TRUE(smaller.comm(r).allreduce(x.data(), x.data(), x.size(), kF32, kSum).is_ok());
    EXPECT_EQ(x[777], 3.0f);
  });
}

TEST(Sticky, BadArgumentsDoNotPoisonTheCommunicator) {
  ThreadWorld w(2, fault_config());
  w.run([&](int r) {
    std::vector<float> x(10, 1.0f);
    EXPECT_EQ(w.comm(r).allreduce(x.data(), x.data(), 10, static_cast<DataType>(99), kSum).code(), Code::kInvalidArgument);
    EXPECT_EQ(w.comm(r).broadcast(x.data(), 10, kF32, 5).code(), Code::kInvalidArgument);
    EXPECT_TRUE(w.comm(r).async_error().is_ok());
    ASSERT_TRUE(w.comm(r).allreduce(x.data(), x.data(), 10, kF32, kSum).is_ok());
    EXPECT_EQ(x[0], 2.0f);
  });
}

}  // namespace
}  // namespace kolo
