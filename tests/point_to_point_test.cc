// Point-to-point (Communicator::send/recv/point_to_point): worlds of 1 to 8
// ranks as threads. A ring shift and an all-to-all posted as one batch (a
// group), a pipeline of stages with blocking calls, message order between a
// pair, self-sends, every dtype, counts from 0 to many segments, on the
// world and on split communicators; a count or dtype that disagrees is
// MISMATCH on both sides; a bad peer is refused.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/reference.h"
#include "runtime/point_to_point_group.h"
#include "tests/thread_world.h"

namespace kolo {
namespace {

using Bytes = std::vector<unsigned char>;

// Rank `rank`'s data: the reference inputs.
Bytes data_of(DataType d, int rank, size_t count) { return ref::input_buffer(d, ReduceOp::kSum, rank, count); }

PointToPoint send_op(int peer, Bytes* b, size_t count, DataType d) {
  return {PointToPoint::kSend, peer, b->data(), count, d};
}
PointToPoint recv_op(int peer, Bytes* b, size_t count, DataType d) {
  return {PointToPoint::kRecv, peer, b->data(), count, d};
}

class P2P : public ::testing::TestWithParam<WorldParam> {};

TEST_P(P2P, RingShiftInOneBatchEveryDtypeAndCount) {
  const int n = std::get<0>(GetParam());
  ThreadWorld w = make_world(GetParam());
  w.run([&](int r) {
    Communicator& c = w.comm(r);
    for (int di = 0; di < kNumDataTypes; ++di) {
      const auto d = static_cast<DataType>(di);
      for (size_t count : {size_t{0}, size_t{1}, size_t{97}, size_t{5000}}) {
        const int right = (r + 1) % n, left = (r + n - 1) % n;
        Bytes out = data_of(d, r, count), in(out.size(), 0xAB);
        // The receive first: the batch posts everything before waiting.
        Status s = c.point_to_point({recv_op(left, &in, count, d), send_op(right, &out, count, d)});
        ASSERT_TRUE(s.is_ok()) << "rank " << r << " " << dtype_name(d) << " count " << count << ": " << s.to_string();
        EXPECT_TRUE(in == data_of(d, left, count)) << "rank " << r << " " << dtype_name(d) << " count " << count;
      }
    }
  });
}

TEST_P(P2P, AllToAllAsOneBatchWithSelf) {
  const int n = std::get<0>(GetParam());
  ThreadWorld w = make_world(GetParam());
  const size_t block = 3001;  // float32: a few 4 KiB segments each
  w.run([&](int r) {
    std::vector<Bytes> out(n), in(n);
    std::vector<PointToPoint> ops;
    for (int q = 0; q < n; ++q) {
      out[q] = data_of(DataType::kFloat32, r * 100 + q, block);
      in[q].assign(out[q].size(), 0);
      ops.push_back(send_op(q, &out[q], block, DataType::kFloat32));
      ops.push_back(recv_op(q, &in[q], block, DataType::kFloat32));
    }
    Status s = w.comm(r).point_to_point(ops);
    ASSERT_TRUE(s.is_ok()) << "rank " << r << ": " << s.to_string();
    for (int q = 0; q < n; ++q) {
      EXPECT_TRUE(in[q] == data_of(DataType::kFloat32, q * 100 + r, block)) << "rank " << r << " from " << q;
    }
  });
}

TEST_P(P2P, PipelineOfStagesWithBlockingCallsInOrder) {
  const int n = std::get<0>(GetParam());
  ThreadWorld w = make_world(GetParam());
  const int micro_batches = 5;
  const size_t count = 2000;
  w.run([&](int r) {
    Communicator& c = w.comm(r);
    const DataType i32 = DataType::kInt32;
    for (int m = 0; m < micro_batches; ++m) {
      std::vector<int32_t> act(count);
      if (r == 0) {
        for (size_t i = 0; i < count; ++i) act[i] = static_cast<int32_t>(m * 1000 + i);
      } else {
        ASSERT_TRUE(c.recv(act.data(), count, i32, r - 1).is_ok()) << "rank " << r;
      }
      for (auto& x : act) x += 1;  // this stage's work
      if (r + 1 < n) {
        ASSERT_TRUE(c.send(act.data(), count, i32, r + 1).is_ok()) << "rank " << r;
      } else {
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(act[i], static_cast<int32_t>(m * 1000 + i + n)) << "micro-batch " << m << " element " << i;
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, P2P, worlds_up_to(8), world_name);

TEST(P2P, MessagesBetweenAPairKeepTheirOrder) {
  ThreadWorld w(2, test_config());
  w.run([&](int r) {
    const DataType i64 = DataType::kInt64;
    for (int64_t k = 0; k < 20; ++k) {
      int64_t x = r == 0 ? k : -1;
      Status s = r == 0 ? w.comm(r).send(&x, 1, i64, 1) : w.comm(r).recv(&x, 1, i64, 0);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      EXPECT_EQ(x, k);
    }
  });
}

TEST(P2P, AGroupPerThreadPostsEachCommunicatorsCallsAtItsOutermostEnd) {
  // What kolo_group_start/end wrap, from C++: a ring shift queued call by
  // call (the receive first, which alone would wait forever), nested
  // groups, an asynchronous call's handle completed by the end, and a bad
  // peer refused when queued, without spoiling the group.
  const int n = 3;
  ThreadWorld w(n, test_config());
  w.run([&](int r) {
    Communicator* c = &w.comm(r);
    const DataType d = DataType::kFloat32;
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    Bytes out = data_of(d, r, 1000), in(out.size(), 0xAB);
    PointToPointGroup& group = PointToPointGroup::of_this_thread();
    EXPECT_EQ(group.end().code(), Code::kInvalidUsage);
    group.start();
    group.start();
    auto received = std::make_shared<OpHandle>();
    ASSERT_TRUE(group.add(c, recv_op(left, &in, 1000, d), received).is_ok());
    EXPECT_EQ(group.add(c, send_op(n, &out, 1000, d), nullptr).code(), Code::kInvalidArgument);
    ASSERT_TRUE(group.end().is_ok());  // the inner one: nothing posted yet
    EXPECT_TRUE(group.open());
    ASSERT_TRUE(group.add(c, send_op(right, &out, 1000, d), nullptr).is_ok());
    ASSERT_TRUE(group.end().is_ok());
    EXPECT_FALSE(group.open());
    EXPECT_TRUE(received->wait(Deadline::after_seconds(10)).is_ok());
    EXPECT_TRUE(in == data_of(d, left, 1000)) << "rank " << r;
  });
}

TEST(P2P, RingShiftOnSplitCommunicators) {
  const int n = 6;
  ThreadWorld w(n, test_config());
  std::vector<std::unique_ptr<Communicator>> subs(n);
  w.run([&](int r) { ASSERT_TRUE(w.comm(r).split(r % 2, -r, &subs[r]).is_ok()); });
  w.run([&](int r) {
    Communicator& c = *subs[r];
    const int m = c.size(), me = c.rank();
    Bytes out = data_of(DataType::kFloat64, me, 700), in(out.size());
    ASSERT_TRUE(c.point_to_point({send_op((me + 1) % m, &out, 700, DataType::kFloat64),
                                  recv_op((me + m - 1) % m, &in, 700, DataType::kFloat64)})
                    .is_ok());
    EXPECT_TRUE(in == data_of(DataType::kFloat64, (me + m - 1) % m, 700)) << "rank " << r;
  });
}

TEST(P2P, DisagreeingCountOrDtypeIsAMismatchOnBothSidesAndABadPeerIsRefused) {
  for (bool dtype_differs : {false, true}) {
    ThreadWorld w(2, test_config());
    std::vector<Status> status(2);
    w.run([&](int r) {
      std::vector<int32_t> buf(100);
      const DataType dtype = r == 1 && dtype_differs ? DataType::kFloat32 : DataType::kInt32;
      const size_t count = r == 1 && !dtype_differs ? 50 : 100;
      status[r] = r == 0 ? w.comm(r).send(buf.data(), count, dtype, 1) : w.comm(r).recv(buf.data(), count, dtype, 0);
      // The receiver fails at once; a send may have completed by then (its
      // bytes left), and the sender learns at its next call, with the
      // receiver's failure as the cause.
      if (r == 0 && status[r].is_ok()) status[r] = w.comm(r).barrier();
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(status[r].code(), Code::kMismatch) << "rank " << r << ": " << status[r].to_string();
    }
  }
  ThreadWorld w(2, test_config());
  int32_t x = 0;
  EXPECT_EQ(w.comm(0).send(&x, 1, DataType::kInt32, 2).code(), Code::kInvalidArgument);
  EXPECT_EQ(w.comm(0).recv(nullptr, 1, DataType::kInt32, 1).code(), Code::kInvalidArgument);
  // A send to itself with no receive to meet it.
  EXPECT_EQ(w.comm(0).send(&x, 1, DataType::kInt32, 0).code(), Code::kMismatch);
}

}  // namespace
}  // namespace kolo
