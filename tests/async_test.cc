// Ordered asynchronous calls (Launch::done, kolo.h's kolo_*_async) for
// worlds of 1 to 8 ranks as threads: every collective and a point-to-point
// batch queued before any is waited for, checked against the reference
// (tests/reference.h) or the inputs; calls relayed between several threads
// of a rank run in call order (their callbacks, on kolo's thread, see it);
// a blocking call runs after what is queued; callbacks may queue more; a
// failure fails every queued call and refuses later ones; an abort ends a
// queue that waits on absent peers promptly.
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/reference.h"
#include "tests/thread_world.h"

namespace kolo {
namespace {

using Bytes = std::vector<unsigned char>;
using Counts = std::vector<size_t>;
using Handles = std::vector<std::shared_ptr<OpHandle>>;

// An asynchronous launch whose handle is appended to *handles.
Launch async(Handles* handles) {
  Launch launch;
  launch.done.push_back(std::make_shared<OpHandle>());
  handles->push_back(launch.done.back());
  return launch;
}

Deadline soon() { return Deadline::after_seconds(60); }

// Bytes that name their owner and position: rank `from`'s block for rank `to`.
Bytes pattern(int from, int to, size_t bytes) {
  Bytes b(bytes);
  for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<unsigned char>(from * 37 + to * 11 + i * 7 + 1);
  return b;
}

Bytes slice(const Bytes& b, size_t from, size_t bytes) {
  return Bytes(b.begin() + static_cast<std::ptrdiff_t>(from), b.begin() + static_cast<std::ptrdiff_t>(from + bytes));
}

class Async : public ::testing::TestWithParam<WorldParam> {};

// Every call of the public API queued at once on each rank, then waited
// for: the results equal what the blocking calls are specified to give.
TEST_P(Async, EveryCallQueuedBeforeAnyIsWaitedFor) {
  const int n = std::get<0>(GetParam());
  ThreadWorld w = make_world(GetParam());
  const size_t count = 1500;  // several 4 KiB segments in the wider dtypes
  w.run([&](int r) {
    Communicator& c = w.comm(r);
    Handles handles;
    struct Reduction {
      DataType d;
      ReduceOp op;
      Bytes in, all, rooted, scattered;
    };
    std::vector<Reduction> reductions;
    for (int di = 0; di < kNumDataTypes; ++di) {
      for (int oi = 0; oi < kNumReduceOps; ++oi) {
        const auto d = static_cast<DataType>(di);
        const auto op = static_cast<ReduceOp>(oi);
        reductions.push_back({d, op, ref::input_buffer(d, op, r, count * n), {}, {}, {}});
      }
    }
    // Allocated before anything is queued: queued calls hold pointers.
    for (auto& x : reductions) {
      x.all.assign(x.in.size(), 0);
      x.rooted.assign(x.in.size(), 0);
      x.scattered.assign(x.in.size() / n, 0);
    }
    for (auto& x : reductions) {
      const DataType d = x.d;
      const ReduceOp op = x.op;
      ASSERT_TRUE(c.allreduce(x.in.data(), x.all.data(), count * n, d, op, async(&handles)).is_ok());
      ASSERT_TRUE(c.reduce(x.in.data(), x.rooted.data(), count * n, d, op, n - 1, async(&handles)).is_ok());
      ASSERT_TRUE(c.reduce_scatter(x.in.data(), x.scattered.data(), count, d, op, async(&handles)).is_ok());
    }
    // Data movement, in uint8 with uneven blocks (zeros included).
    const DataType u8 = DataType::kUint8;
    Counts counts(n);
    for (int q = 0; q < n; ++q) counts[q] = q % 3 == 1 ? 0 : 5000 + 37 * q;
    size_t total = 0;
    Counts displs(n);
    for (int q = 0; q < n; ++q) {
      displs[q] = total;
      total += counts[q];
    }
    const Bytes mine = pattern(r, 0, counts[r]);
    Bytes gathered(total, 0), to_root(total, 0), scattered_in(counts[r], 0), cast(7000, 0);
    Bytes root_blocks(total);
    for (int q = 0; q < n; ++q) {
      const Bytes b = pattern(0, q, counts[q]);
      std::copy(b.begin(), b.end(), root_blocks.begin() + static_cast<std::ptrdiff_t>(displs[q]));
    }
    if (r == 0) cast = pattern(99, 0, cast.size());
    const size_t block = 3001;
    Bytes a2a_out(block * n), a2a_in(block * n, 0), shift_in(4000, 0);
    for (int q = 0; q < n; ++q) {
      const Bytes b = pattern(r, q, block);
      std::copy(b.begin(), b.end(), a2a_out.begin() + static_cast<std::ptrdiff_t>(q * block));
    }
    const Bytes shift_out = pattern(r, 1000, shift_in.size());
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    ASSERT_TRUE(c.allgatherv(mine.data(), counts[r], gathered.data(), counts, {}, u8, async(&handles)).is_ok());
    ASSERT_TRUE(c.gatherv(mine.data(), counts[r], to_root.data(), counts, {}, u8, 0, async(&handles)).is_ok());
    ASSERT_TRUE(
        c.scatterv(root_blocks.data(), counts, {}, scattered_in.data(), counts[r], u8, 0, async(&handles)).is_ok());
    ASSERT_TRUE(c.broadcast(cast.data(), cast.size(), u8, 0, async(&handles)).is_ok());
    ASSERT_TRUE(c.barrier(async(&handles)).is_ok());
    const Counts equal(n, block);
    ASSERT_TRUE(c.alltoallv(a2a_out.data(), equal, {}, a2a_in.data(), equal, {}, u8, async(&handles)).is_ok());
    ASSERT_TRUE(c.point_to_point({{PointToPoint::kRecv, left, shift_in.data(), shift_in.size(), DataType::kUint8},
                                  {PointToPoint::kSend, right, const_cast<unsigned char*>(shift_out.data()),
                                   shift_out.size(), DataType::kUint8}},
                                 async(&handles))
                    .is_ok());

    for (size_t i = 0; i < handles.size(); ++i) {
      Status s = handles[i]->wait(soon());
      ASSERT_TRUE(s.is_ok()) << "rank " << r << " call " << i << ": " << s.to_string();
    }
    for (const auto& x : reductions) {
      const std::string label = std::string(dtype_name(x.d)) + " op " + std::to_string(static_cast<int>(x.op));
      const Bytes expect = ref::expected_buffer(x.d, x.op, n, count * n);
      EXPECT_TRUE(x.all == expect) << "allreduce " << label;
      if (r == n - 1) {
        EXPECT_TRUE(x.rooted == expect) << "reduce " << label;
      }
      EXPECT_TRUE(x.scattered == slice(expect, r * x.scattered.size(), x.scattered.size()))
          << "reduce_scatter " << label;
    }
    for (int q = 0; q < n; ++q) {
      EXPECT_TRUE(slice(gathered, displs[q], counts[q]) == pattern(q, 0, counts[q])) << "allgatherv from " << q;
      if (r == 0) {
        EXPECT_TRUE(slice(to_root, displs[q], counts[q]) == pattern(q, 0, counts[q])) << "gatherv from " << q;
      }
      EXPECT_TRUE(slice(a2a_in, q * block, block) == pattern(q, r, block)) << "alltoall from " << q;
    }
    EXPECT_TRUE(scattered_in == pattern(0, r, counts[r])) << "scatterv";
    EXPECT_TRUE(cast == pattern(99, 0, cast.size())) << "broadcast";
    EXPECT_TRUE(shift_in == pattern(left, 1000, shift_in.size())) << "ring shift";
  });
}

// Three threads per rank take turns queuing allreduces of different sizes;
// on kolo's thread the callbacks see them in the order they were queued
// (a different order on one rank would also be a MISMATCH with the others).
TEST_P(Async, CallsFromSeveralThreadsRunInCallOrder) {
  const int n = std::get<0>(GetParam());
  ThreadWorld w = make_world(GetParam());
  const int threads = 3, calls = 30;
  w.run([&](int r) {
    Communicator& c = w.comm(r);
    std::mutex mu, ran_mu;
    std::condition_variable turn_cv;
    int turn = 0;           // the next call to queue, under mu
    std::vector<int> ran;   // call numbers, as callbacks saw them, under ran_mu
    std::vector<std::vector<int64_t>> bufs(calls);
    for (int k = 0; k < calls; ++k) bufs[k].assign(1 + 37 * k, r + k);
    Handles handles(calls);
    std::vector<std::thread> callers;
    for (int t = 0; t < threads; ++t) {
      callers.emplace_back([&, t] {
        for (int k = t; k < calls; k += threads) {
          std::unique_lock<std::mutex> lock(mu);
          turn_cv.wait(lock, [&] { return turn == k; });
          // The callback is set before the call, so it runs on kolo's thread.
          Launch launch;
          handles[k] = std::make_shared<OpHandle>();
          handles[k]->set_callback([&ran, &ran_mu, k](const Status&) {
            std::lock_guard<std::mutex> l(ran_mu);
            ran.push_back(k);
          });
          launch.done.push_back(handles[k]);
          Status s = c.allreduce(bufs[k].data(), bufs[k].data(), bufs[k].size(), DataType::kInt64,
                                 ReduceOp::kSum, launch);
          EXPECT_TRUE(s.is_ok()) << s.to_string();
          ++turn;
          turn_cv.notify_all();
        }
      });
    }
    for (auto& t : callers) t.join();
    for (int k = 0; k < calls; ++k) {
      Status s = handles[k]->wait(soon());
      ASSERT_TRUE(s.is_ok()) << "rank " << r << " call " << k << ": " << s.to_string();
      const int64_t expect = n * (n - 1) / 2 + static_cast<int64_t>(n) * k;
      for (int64_t x : bufs[k]) ASSERT_EQ(x, expect) << "rank " << r << " call " << k;
    }
    std::lock_guard<std::mutex> lock(ran_mu);
    std::vector<int> in_order(calls);
    for (int k = 0; k < calls; ++k) in_order[k] = k;
    EXPECT_EQ(ran, in_order) << "rank " << r;
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, Async, worlds_up_to(8), world_name);

TEST(AsyncOrder, ABlockingCallRunsAfterWhatIsQueued) {
  ThreadWorld w(3, test_config());
  w.run([&](int r) {
    Communicator& c = w.comm(r);
    const DataType i32 = DataType::kInt32;
    const ReduceOp sum = ReduceOp::kSum;
    std::vector<int32_t> queued(20000, r + 1), blocking(10, 1);
    Handles h;
    ASSERT_TRUE(c.allreduce(queued.data(), queued.data(), queued.size(), i32, sum, async(&h)).is_ok());
    ASSERT_TRUE(c.allreduce(blocking.data(), blocking.data(), blocking.size(), i32, sum).is_ok());
    // The queued one has run by now (its handle may complete a moment later).
    for (int32_t x : queued) ASSERT_EQ(x, 6);
    EXPECT_EQ(blocking[0], 3);
    EXPECT_TRUE(h[0]->wait(soon()).is_ok());
  });
}

TEST(AsyncOrder, ACallbackMayQueueTheNextCall) {
  ThreadWorld w(2, test_config());
  w.run([&](int r) {
    Communicator& c = w.comm(r);
    const DataType i64 = DataType::kInt64;
    const ReduceOp sum = ReduceOp::kSum;
    int64_t first = r + 1, second = 10 * (r + 1);
    std::promise<std::shared_ptr<OpHandle>> next;
    Launch launch;
    launch.done.push_back(std::make_shared<OpHandle>());
    // Set before the call: the callback runs on kolo's thread.
    launch.done[0]->set_callback([&](const Status& s) {
      EXPECT_TRUE(s.is_ok()) << s.to_string();
      Handles more;
      EXPECT_TRUE(c.allreduce(&second, &second, 1, i64, sum, async(&more)).is_ok());
      next.set_value(more.empty() ? nullptr : more[0]);
    });
    ASSERT_TRUE(c.allreduce(&first, &first, 1, i64, sum, launch).is_ok());
    auto queued_by_callback = next.get_future().get();
    ASSERT_NE(queued_by_callback, nullptr);
    ASSERT_TRUE(queued_by_callback->wait(soon()).is_ok());
    EXPECT_EQ(first, 3);
    EXPECT_EQ(second, 30);
  });
}

// Rank 2's second call disagrees on the count: that call fails on every
// rank, every call queued after it fails too, and a later call is refused
// at once with the same (sticky) error.
TEST(AsyncFailure, AMismatchFailsEveryQueuedCallAndLaterCallsAreRefused) {
  ThreadWorld w(3, test_config());
  w.run([&](int r) {
    Communicator& c = w.comm(r);
    const DataType f32 = DataType::kFloat32;
    const ReduceOp sum = ReduceOp::kSum;
    std::vector<float> a(100, 1), b(r == 2 ? 50 : 60, 1), d(100, 1);
    Handles h;
    ASSERT_TRUE(c.allreduce(a.data(), a.data(), a.size(), f32, sum, async(&h)).is_ok());
    ASSERT_TRUE(c.allreduce(b.data(), b.data(), b.size(), f32, sum, async(&h)).is_ok());
    for (int k = 0; k < 3; ++k) ASSERT_TRUE(c.allreduce(d.data(), d.data(), d.size(), f32, sum, async(&h)).is_ok());
    EXPECT_TRUE(h[0]->wait(soon()).is_ok()) << h[0]->status().to_string();
    for (size_t i = 1; i < h.size(); ++i) {
      Status s = h[i]->wait(soon());
      EXPECT_EQ(s.code(), Code::kMismatch) << "rank " << r << " call " << i << ": " << s.to_string();
    }
    Handles later;
    Status s = c.allreduce(d.data(), d.data(), d.size(), f32, sum, async(&later));
    EXPECT_EQ(s.code(), Code::kMismatch) << s.to_string();
    EXPECT_FALSE(later[0]->done()) << "a refused call completes no handle";
  });
}

TEST(AsyncFailure, AbortEndsAQueueWaitingOnAbsentPeersPromptly) {
  Config config = test_config();
  config.timeout_s = 120;
  ThreadWorld w(2, config);
  // Rank 1 never calls; rank 0 queues three calls, then aborts.
  Communicator& c = w.comm(0);
  std::vector<double> x(1000, 1);
  Handles h;
  for (int k = 0; k < 3; ++k) {
    ASSERT_TRUE(c.allreduce(x.data(), x.data(), x.size(), DataType::kFloat64,
                            ReduceOp::kSum, async(&h))
                    .is_ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(h[0]->done());
  const auto start = std::chrono::steady_clock::now();
  c.abort();
  for (const auto& handle : h) EXPECT_EQ(handle->wait(soon()).code(), Code::kAborted);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace kolo
