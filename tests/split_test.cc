// Sub-communicators (Communicator::split, kolo_comm_split): worlds of 1 to 8
// ranks as threads split by several colorings, keys reversed, one rank
// without a color; every collective on every sub-communicator against
// tests/reference.h, computed from the sub-communicator's own ranks; the
// parent goes on beside its splits, either may be destroyed first, splits
// nest, the engine's named operations run on a split, and a failure in one
// split leaves the others alone.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/engine.h"
#include "runtime/sibling_engine_link.h"
#include "tests/reference.h"
#include "tests/submissions.h"
#include "tests/thread_world.h"

namespace kolo {
namespace {

using Bytes = std::vector<unsigned char>;
using Comms = std::vector<std::unique_ptr<Communicator>>;

// Every rank of `parent` splits by color_of(rank), key -rank (so the new
// ranks run in reverse). Returns each rank's new communicator (null for
// kSplitNoColor) and checks its rank and size against the coloring.
Comms split(int n, const std::function<int(int)>& color_of, const std::function<Communicator&(int)>& parent,
            const std::function<void(const std::function<void(int)>&)>& run) {
  Comms subs(n);
  run([&](int r) {
    Status s = parent(r).split(color_of(r), -r, &subs[r]);
    ASSERT_TRUE(s.is_ok()) << "rank " << r << ": " << s.to_string();
  });
  for (int r = 0; r < n; ++r) {
    const int color = color_of(r);
    if (color == Communicator::kSplitNoColor) {
      EXPECT_EQ(subs[r], nullptr) << "rank " << r;
      continue;
    }
    int size = 0, above = 0;  // members of the color, and those with a higher rank (a lower key)
    for (int q = 0; q < n; ++q) {
      if (color_of(q) != color) continue;
      ++size;
      if (q > r) ++above;
    }
    EXPECT_EQ(subs[r]->size(), size) << "rank " << r;
    EXPECT_EQ(subs[r]->rank(), above) << "rank " << r;
  }
  return subs;
}

Comms split_world(ThreadWorld& w, const std::function<int(int)>& color_of) {
  return split(
      w.size(), color_of, [&](int r) -> Communicator& { return w.comm(r); },
      [&](const std::function<void(int)>& fn) { w.run(fn); });
}

void run_on(const Comms& subs, const std::function<void(int, Communicator&)>& fn) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < subs.size(); ++r) {
    if (subs[r]) threads.emplace_back(fn, static_cast<int>(r), std::ref(*subs[r]));
  }
  for (auto& t : threads) t.join();
}

// Every dtype x op over a few counts, in place and not; then allgather,
// broadcast from the last rank, reduce-scatter and a barrier.
void check_every_collective(const Comms& subs) {
  run_on(subs, [&](int r, Communicator& c) {
    const int n = c.size(), me = c.rank();
    const std::string where = "rank " + std::to_string(r) + " (" + std::to_string(me) + " of " + std::to_string(n) + ")";
    for (int di = 0; di < kNumDataTypes; ++di) {
      const auto d = static_cast<DataType>(di);
      for (int oi = 0; oi < kNumReduceOps; ++oi) {
        const auto op = static_cast<ReduceOp>(oi);
        for (size_t count : {size_t{0}, size_t{1}, size_t{97}, size_t{3000}}) {
          const Bytes want = ref::expected_buffer(d, op, n, count);
          Bytes in = ref::input_buffer(d, op, me, count), out(in.size(), 0xAB);
          const bool in_place = count == 97;
          Status s = c.allreduce(in.data(), in_place ? in.data() : out.data(), count, static_cast<DataType>(di), static_cast<ReduceOp>(oi));
          ASSERT_TRUE(s.is_ok()) << where << ": " << s.to_string();
          EXPECT_TRUE((in_place ? in : out) == want)
              << where << " allreduce " << dtype_name(d) << " " << op_name(op) << " count " << count;
        }
      }
    }
    // Allgather: block q is rank q's data.
    const size_t block = 1000;
    Bytes mine = ref::input_buffer(DataType::kInt32, ReduceOp::kSum, me, block), all(block * 4 * n);
    ASSERT_TRUE(c.allgather(mine.data(), all.data(), block, DataType::kInt32).is_ok()) << where;
    for (int q = 0; q < n; ++q) {
      EXPECT_TRUE(std::memcmp(all.data() + q * block * 4, ref::input_buffer(DataType::kInt32, ReduceOp::kSum, q, block).data(),
                              block * 4) == 0)
          << where << " allgather block " << q;
    }
    // Broadcast from the last rank.
    Bytes buf = ref::input_buffer(DataType::kFloat64, ReduceOp::kSum, me, 777);
    ASSERT_TRUE(c.broadcast(buf.data(), 777, DataType::kFloat64, n - 1).is_ok()) << where;
    EXPECT_TRUE(buf == ref::input_buffer(DataType::kFloat64, ReduceOp::kSum, n - 1, 777)) << where << " broadcast";
    // Reduce-scatter: this rank's block of the sum.
    Bytes rs_in = ref::input_buffer(DataType::kInt64, ReduceOp::kSum, me, 50 * n), rs_out(50 * 8);
    ASSERT_TRUE(c.reduce_scatter(rs_in.data(), rs_out.data(), 50, DataType::kInt64,
                                 ReduceOp::kSum)
                    .is_ok())
        << where;
    const Bytes rs_want = ref::expected_buffer(DataType::kInt64, ReduceOp::kSum, n, 50 * n);
    EXPECT_EQ(std::memcmp(rs_out.data(), rs_want.data() + me * 50 * 8, 50 * 8), 0) << where << " reduce_scatter";
    EXPECT_TRUE(c.barrier().is_ok()) << where;
  });
}

class Split : public ::testing::TestWithParam<int> {};

TEST_P(Split, TwoColorsKeysReversedAndARankWithoutColor) {
  const int n = GetParam();
  ThreadWorld w(n, test_config());
  // Even and odd ranks; the last rank of a world of 3 or more takes part
  // without a color.
  Comms subs = split_world(w, [n](int r) { return n >= 3 && r == n - 1 ? Communicator::kSplitNoColor : r % 2; });
  check_every_collective(subs);
  // The parent goes on beside its splits.
  w.run([&](int r) {
    int64_t x = r, sum = 0;
    ASSERT_TRUE(w.comm(r).allreduce(&x, &sum, 1, DataType::kInt64, ReduceOp::kSum)
                    .is_ok());
    EXPECT_EQ(sum, int64_t{n} * (n - 1) / 2);
  });
}

TEST_P(Split, ThreeColorsWhileThePeerSplitRuns) {
  const int n = GetParam();
  ThreadWorld w(n, test_config());
  Comms subs = split_world(w, [](int r) { return r % 3; });
  check_every_collective(subs);  // the colors' collectives run at the same time
}

INSTANTIATE_TEST_SUITE_P(Worlds, Split, ::testing::Range(1, 9),
                         [](const ::testing::TestParamInfo<int>& i) { return "N" + std::to_string(i.param); });

TEST(Split, NestedSplitsAndTheParentDestroyedFirst) {
  const int n = 6;
  auto w = std::make_unique<ThreadWorld>(n, test_config());
  Comms halves = split_world(*w, [](int r) { return r / 3; });  // {0,1,2} and {3,4,5}, each reversed
  // Within each half, all but its rank 0 (world ranks 2 and 5) split again.
  Comms pairs(n);
  w->run([&](int r) {
    const int color = halves[r]->rank() == 0 ? Communicator::kSplitNoColor : 0;
    ASSERT_TRUE(halves[r]->split(color, r, &pairs[r]).is_ok()) << "rank " << r;
  });
  for (int r = 0; r < n; ++r) {
    if (r == 2 || r == 5) {
      EXPECT_EQ(pairs[r], nullptr);
      continue;
    }
    ASSERT_NE(pairs[r], nullptr);
    EXPECT_EQ(pairs[r]->size(), 2);
    EXPECT_EQ(pairs[r]->rank(), r % 3);  // keys are world ranks: {0,1} and {3,4}
  }
  w.reset();       // every world communicator goes first
  halves.clear();  // then the middle generation
  check_every_collective(pairs);
}

TEST(Split, EngineNamedOperationsOnASplit) {
  const int n = 4;
  ThreadWorld w(n, test_config(64 << 10, 4096));
  Comms subs = split_world(w, [](int r) { return r % 2; });
  std::vector<std::unique_ptr<Engine>> engines(n);
  for (int r = 0; r < n; ++r) engines[r] = make_sibling_engine(subs[r].get());
  run_on(subs, [&](int r, Communicator& c) {
    std::vector<float> in(4096, static_cast<float>(c.rank() + 1)), out(4096, 0);
    std::shared_ptr<OpHandle> h;
    // The same name in both splits: names are per communicator.
    ASSERT_TRUE(engines[r]->submit(allreduce_submission("grad", in.data(), out.data(), 4096), &h).is_ok());
    ASSERT_TRUE(h->wait(Deadline::after_seconds(30)).is_ok()) << "rank " << r;
    EXPECT_EQ(out[0], 3.0f) << "rank " << r;  // 1 + 2 in each split of two
    EXPECT_EQ(out[4095], 3.0f) << "rank " << r;
  });
  engines.clear();
}

TEST(Split, AFailureInOneSplitLeavesTheOtherAlone) {
  const int n = 4;
  ThreadWorld w(n, test_config());
  Comms subs = split_world(w, [](int r) { return r % 2; });
  subs[0]->abort();  // rank 0's even split: ranks 0 and 2
  run_on(subs, [&](int r, Communicator& c) {
    int32_t x = 1, y = 0;
    Status s = c.allreduce(&x, &y, 1, DataType::kInt32, ReduceOp::kSum);
    if (r % 2 == 0) {
      EXPECT_EQ(s.code(), Code::kAborted) << "rank " << r << ": " << s.to_string();
    } else {
      ASSERT_TRUE(s.is_ok()) << "rank " << r << ": " << s.to_string();
      EXPECT_EQ(y, 2);
    }
  });
  w.run([&](int r) {  // and the world
    int32_t x = 1, y = 0;
    ASSERT_TRUE(w.comm(r).allreduce(&x, &y, 1, DataType::kInt32, ReduceOp::kSum)
                    .is_ok());
    EXPECT_EQ(y, n);
  });
}

TEST(Split, ASplitAgainstAnotherCollectiveIsAMismatchAndABadColorIsRefused) {
  ThreadWorld w(2, test_config());
  std::unique_ptr<Communicator> sub;
  EXPECT_EQ(w.comm(0).split(-2, 0, &sub).code(), Code::kInvalidArgument);
  std::vector<Status> status(2);
  w.run([&](int r) {
    if (r == 0) {
      status[r] = w.comm(r).split(0, 0, &sub);
    } else {
      int64_t x[2] = {0, 0}, y[4];
      status[r] = w.comm(r).allgather(x, y, 1, DataType::kInt64);
    }
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(status[r].code(), Code::kMismatch) << "rank " << r << ": " << status[r].to_string();
}

}  // namespace
}  // namespace kolo
