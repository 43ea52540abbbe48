// Receives from any rank (Communicator::recv_any, kolo_recv_any), ranks as
// threads over shared memory (and again over TCP, and on two emulated
// hosts, in the _over_tcp and _over_hosts variants): every rank sends to
// one, which takes each sender's message exactly once, whichever ranks it
// was connected to before (the receiver as the lower and the higher rank of
// a pair); two messages of a pair keep their order, also mixed with
// receives from a named rank; the asynchronous form writes the source
// before its handle completes; a count that disagrees is MISMATCH naming
// the sender; no sender is TIMEOUT saying so; what closed peers sent
// before closing is still taken, and then no peer is left (PEER_LOST at
// once); a rank whose next message is a collective's is passed over; a
// world of one and bad arguments are refused without harm. With
// KOLO_TRANSPORT=ib only the refusal over RDMA runs.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/thread_world.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;
constexpr DataType kF32 = DataType::kFloat32;
constexpr DataType kI64 = DataType::kInt64;

// Sender `from`'s payload: count floats that name it.
std::vector<float> payload(int from, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(from * 100000 + static_cast<int>(i % 9973));
  return v;
}

bool over_rdma() {
  const char* t = std::getenv("KOLO_TRANSPORT");
  return t && std::string(t) == "ib";
}

// RDMA cannot show a message before its receive is posted: there the
// suite checks the refusal only (RecvAnyOverRdma).
class RecvAny : public ::testing::Test {
 protected:
  void SetUp() override {
    if (over_rdma()) GTEST_SKIP() << "KOLO_TRANSPORT=ib: receives from any rank are refused over RDMA";
  }
};

// Every rank but `to` sends one message of `count` floats to `to`, which
// takes them with recv_any and checks each sender's bytes and that each
// sender is reported once.
void everyone_sends_to(ThreadWorld& w, int to, size_t count) {
  const int n = w.size();
  w.run([&](int r) {
    Communicator& c = w.comm(r);
    if (r != to) {
      std::vector<float> out = payload(r, count);
      Status s = c.send(out.data(), count, kF32, to);
      EXPECT_TRUE(s.is_ok()) << "rank " << r << ": " << s.to_string();
      return;
    }
    std::vector<int> seen(n, 0);
    for (int k = 0; k < n - 1; ++k) {
      std::vector<float> in(count, -1.0f);
      int source = -7;
      Status s = c.recv_any(in.data(), count, kF32, &source);
      ASSERT_TRUE(s.is_ok()) << "receive " << k << ": " << s.to_string();
      ASSERT_TRUE(source >= 0 && source < n && source != to) << "source " << source;
      ++seen[source];
      EXPECT_TRUE(in == payload(source, count)) << "message " << k << " from rank " << source;
    }
    for (int q = 0; q < n; ++q) EXPECT_EQ(seen[q], q == to ? 0 : 1) << "rank " << q << " reported that often";
  });
}

TEST_F(RecvAny, EverySenderOnceWithItsPayload) {
  for (int n : {2, 3, 4}) {
    ThreadWorld w(n, test_config());
    everyone_sends_to(w, 0, 5000);  // several 4 KiB segments each
    everyone_sends_to(w, n - 1, 1);
    everyone_sends_to(w, 0, 0);
  }
}

// In a world of 6 only ring neighbours are connected at the start: the
// receiver connects the others as they send, as the dialing (lower) rank
// of a pair and as the accepting (higher) one.
TEST_F(RecvAny, ConnectsPeersAsTheyCome) {
  ThreadWorld w(6, test_config());
  everyone_sends_to(w, 3, 700);
  everyone_sends_to(w, 0, 700);
  everyone_sends_to(w, 3, 10);  // connected now
}

TEST_F(RecvAny, OnASplitCommunicator) {
  ThreadWorld w(3, test_config(), ThreadWorld::AsSplit{});
  everyone_sends_to(w, 0, 300);
  everyone_sends_to(w, 2, 300);
}

// Two messages from each sender arrive in that sender's order, whoever
// else's come between; named receives and receives from any rank share one
// order per pair.
TEST_F(RecvAny, MessagesOfAPairKeepTheirOrder) {
  const int n = 4, per_sender = 3;
  ThreadWorld w(n, test_config());
  w.run([&](int r) {
    Communicator& c = w.comm(r);
    if (r != 0) {
      for (int64_t k = 0; k < per_sender; ++k) {
        int64_t x = r * 1000 + k;
        ASSERT_TRUE(c.send(&x, 1, kI64, 0).is_ok());
      }
      return;
    }
    std::vector<int64_t> next(n, 0);
    for (int k = 0; k < (n - 1) * per_sender; ++k) {
      int64_t x = -1;
      int source = -1;
      ASSERT_TRUE(c.recv_any(&x, 1, kI64, &source).is_ok());
      EXPECT_EQ(x, source * 1000 + next[source]) << "message " << k;
      ++next[source];
    }
  });
  w.run([&](int r) {
    Communicator& c = w.comm(r);
    if (r == 1) {
      for (int64_t k = 0; k < 4; ++k) ASSERT_TRUE(c.send(&k, 1, kI64, 0).is_ok());
    } else if (r == 0) {
      int64_t x = -1;
      int source = -1;
      ASSERT_TRUE(c.recv(&x, 1, kI64, 1).is_ok());
      EXPECT_EQ(x, 0);
      ASSERT_TRUE(c.recv_any(&x, 1, kI64, &source).is_ok());
      EXPECT_EQ(source, 1);
      EXPECT_EQ(x, 1);
      ASSERT_TRUE(c.recv(&x, 1, kI64, 1).is_ok());
      EXPECT_EQ(x, 2);
      ASSERT_TRUE(c.recv_any(&x, 1, kI64, &source).is_ok());
      EXPECT_EQ(x, 3);
    }
  });
}

// A rank running a collective is not waited for by a receive from any
// rank: another's send is taken meanwhile, and the collective then meets
// its own.
TEST_F(RecvAny, SkipsARankWhoseNextMessageIsACollectives) {
  ThreadWorld w(3, test_config());
  w.run([&](int r) {
    Communicator& c = w.comm(r);
    float one = 1.0f, sum = 0.0f;
    // Rank 2 starts the ring's allreduce at once, whose first message goes
    // to rank 0 (its right); rank 1 sends to rank 0 once that is there.
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::vector<float> out = payload(1, 10);
      ASSERT_TRUE(c.send(out.data(), 10, kF32, 0).is_ok());
    }
    if (r == 0) {
      std::vector<float> in(10);
      int source = -1;
      Status s = c.recv_any(in.data(), 10, kF32, &source);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      EXPECT_EQ(source, 1);
      EXPECT_TRUE(in == payload(1, 10));
    }
    Status s = c.allreduce(&one, &sum, 1, kF32, ReduceOp::kSum);
    ASSERT_TRUE(s.is_ok()) << "rank " << r << ": " << s.to_string();
    EXPECT_EQ(sum, 3.0f);
  });
}

TEST_F(RecvAny, AsynchronousWritesTheSourceBeforeItsHandleCompletes) {
  const int n = 3;
  ThreadWorld w(n, test_config());
  w.run([&](int r) {
    Communicator& c = w.comm(r);
    if (r != 0) {
      std::vector<float> out = payload(r, 2000);
      ASSERT_TRUE(c.send(out.data(), 2000, kF32, 0).is_ok());
      return;
    }
    std::vector<std::vector<float>> in(n - 1, std::vector<float>(2000));
    std::vector<int> source(n - 1, -7);
    std::vector<std::shared_ptr<OpHandle>> handles;
    for (int k = 0; k < n - 1; ++k) {
      Launch launch;
      launch.done.push_back(std::make_shared<OpHandle>());
      handles.push_back(launch.done[0]);
      ASSERT_TRUE(c.recv_any(in[k].data(), 2000, kF32, &source[k], std::move(launch)).is_ok());
    }
    std::vector<int> seen;
    for (int k = 0; k < n - 1; ++k) {
      Status s = handles[k]->wait(Deadline::after_seconds(30));
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      ASSERT_GE(source[k], 1);
      EXPECT_TRUE(in[k] == payload(source[k], 2000)) << "from rank " << source[k];
      seen.push_back(source[k]);
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, (std::vector<int>{1, 2}));
  });
}

TEST_F(RecvAny, ACountThatDisagreesIsAMismatchNamingTheSender) {
  ThreadWorld w(3, test_config());
  std::vector<Status> status(3);
  w.run([&](int r) {
    Communicator& c = w.comm(r);
    std::vector<float> buf(100);
    if (r == 2) {
      status[r] = c.send(buf.data(), 50, kF32, 0);
      // The sender learns at its next call at the latest.
      if (status[r].is_ok()) status[r] = c.barrier();
    } else if (r == 1) {
      status[r] = c.barrier();  // fails as the failure spreads
    } else {
      int source = -1;
      status[r] = c.recv_any(buf.data(), 100, kF32, &source);
    }
  });
  EXPECT_EQ(status[0].code(), Code::kMismatch) << status[0].to_string();
  EXPECT_NE(status[0].message().find("rank 2"), std::string::npos) << status[0].to_string();
  EXPECT_EQ(status[2].code(), Code::kMismatch) << status[2].to_string();
}

TEST_F(RecvAny, NoSenderIsATimeoutSayingSo) {
  Config config = test_config();
  config.timeout_s = 1;
  ThreadWorld w(3, config);
  float x = 0;
  int source = -7;
  const auto start = Clock::now();
  Status s = w.comm(0).recv_any(&x, 1, kF32, &source);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(s.code(), Code::kTimeout) << s.to_string();
  EXPECT_NE(s.message().find("no peer sent anything to rank 0 within 1 s"), std::string::npos) << s.to_string();
  EXPECT_EQ(source, -1);
  EXPECT_GE(took, 0.9);
  EXPECT_LT(took, 5.0);
}

// What a rank sent before its communicator closed is still taken; once
// every other rank has closed, nothing is waited for.
TEST_F(RecvAny, TakesWhatClosedPeersSentThenFindsNoPeerLeft) {
  ThreadWorld w(3, test_config());
  w.run([&](int r) {
    if (r == 0) return;
    std::vector<float> out = payload(r, 3000);
    ASSERT_TRUE(w.comm(r).send(out.data(), 3000, kF32, 0).is_ok());
    w.release(r);
  });
  Communicator& c = w.comm(0);
  std::vector<int> seen;
  for (int k = 0; k < 2; ++k) {
    std::vector<float> in(3000);
    int source = -1;
    Status s = c.recv_any(in.data(), 3000, kF32, &source);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_TRUE(in == payload(source, 3000));
    seen.push_back(source);
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));
  const auto start = Clock::now();
  float x;
  int source = -1;
  Status s = c.recv_any(&x, 1, kF32, &source);
  EXPECT_EQ(s.code(), Code::kPeerLost) << s.to_string();
  EXPECT_NE(s.message().find("no peer can send"), std::string::npos) << s.to_string();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
}

TEST_F(RecvAny, RefusesAWorldOfOneAndBadArguments) {
  ThreadWorld one(1, test_config());
  float x = 0;
  int source = 5;
  Status s = one.comm(0).recv_any(&x, 1, kF32, &source);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.to_string();
  EXPECT_EQ(source, -1);
  ThreadWorld w(2, test_config());
  EXPECT_EQ(w.comm(0).recv_any(&x, 1, kF32, nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(w.comm(0).recv_any(nullptr, 1, kF32, &source).code(), Code::kInvalidArgument);
  EXPECT_EQ(w.comm(0).recv_any(&x, 1, static_cast<DataType>(99), &source).code(), Code::kInvalidArgument);
  // None of it harmed the communicator.
  w.run([&](int r) {
    float v = static_cast<float>(r), got = -1;
    int from = -1;
    ASSERT_TRUE(r == 1 ? w.comm(r).send(&v, 1, kF32, 0).is_ok() : w.comm(r).recv_any(&got, 1, kF32, &from).is_ok());
    if (r == 0) {
      EXPECT_EQ(got, 1.0f);
    }
  });
}

// Over RDMA (KOLO_TRANSPORT=ib, in the soft-RoCE VM of tools/rdma_vm.sh):
// refused at once, naming the ranks, and the communicator goes on.
TEST(RecvAnyOverRdma, IsRefusedAtOnceWithoutHarm) {
  if (!over_rdma()) GTEST_SKIP() << "needs KOLO_TRANSPORT=ib";
  ThreadWorld w(3, test_config());
  float x = 0;
  int source = 5;
  Status s = w.comm(0).recv_any(&x, 1, kF32, &source);
  EXPECT_EQ(s.code(), Code::kUnsupported) << s.to_string();
  EXPECT_NE(s.message().find("rank(s) 1, 2"), std::string::npos) << s.to_string();
  EXPECT_EQ(source, -1);
  EXPECT_TRUE(w.comm(0).async_error().is_ok());
  w.run([&](int r) {
    float one = 1.0f, sum = 0.0f;
    ASSERT_TRUE(w.comm(r).allreduce(&one, &sum, 1, kF32, ReduceOp::kSum).is_ok());
    EXPECT_EQ(sum, 3.0f);
  });
}

}  // namespace
}  // namespace kolo
