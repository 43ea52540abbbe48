// The engine alone, over an in-process fake link (fake_engine_link.h): no
// transport, no communicator. What only the engine decides is seen here
// directly: which collectives a round makes (fusion, the response cache),
// what a failure of the link does to pending and later operations, join,
// abort, and a link that never connects. Expected values are computed here
// from each rank's inputs.
#include <algorithm>
#include <cstring>
#include <atomic>
#include <functional>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/engine.h"
#include "runtime/fake_engine_link.h"
#include "tests/submissions.h"

namespace kolo {
namespace {

constexpr int kF32 = static_cast<int>(DataType::kFloat32);
constexpr int kI32 = static_cast<int>(DataType::kInt32);

Submission allgather(const std::string& name, const float* send, int64_t rows, int64_t row) {
  Submission s;
  s.request.name = name;
  s.request.kind = OpKind::kAllgather;
  s.request.dtype = kF32;
  s.request.shapes = {{rows, row}};
  s.sends = {send};
  return s;
}

Config fake_config() {
  Config c;
  c.timeout_s = 30;
  c.cycle_time_ms = 0;
  c.fusion_threshold_bytes = 64 << 20;
  return c;
}

// Ranks as threads, each with an engine over the fabric.
struct FakeWorld {
  explicit FakeWorld(int n, Config config = fake_config()) : fabric(n) {
    for (int r = 0; r < n; ++r) engines.push_back(std::make_unique<Engine>(config, r, n, fabric.connector(r)));
  }
  ~FakeWorld() { run([&](int r) { engines[r].reset(); }); }
  void run(const std::function<void(int)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < fabric.size(); ++r) threads.emplace_back(fn, r);
    for (auto& t : threads) t.join();
  }
  Engine& engine(int r) { return *engines[r]; }

  FakeFabric fabric;
  std::vector<std::unique_ptr<Engine>> engines;
};

Status wait(const std::shared_ptr<OpHandle>& h) { return h->wait(Deadline::after_seconds(30)); }

float value(int r, int t, size_t i) { return static_cast<float>((r * 5 + t * 3 + static_cast<int>(i % 11)) % 13); }

TEST(EngineOverFakeLink, SubmissionsInDifferentOrdersGiveTheReferenceSums) {
  for (int n : {1, 2, 3, 5}) {
    FakeWorld w(n);
    const int tensors = 16;
    w.run([&](int r) {
      std::vector<std::vector<float>> in(tensors), out(tensors);
      std::vector<int> order(tensors);
      for (int t = 0; t < tensors; ++t) {
        order[t] = t;
        in[t].resize(1 + t * 37);
        out[t].assign(in[t].size(), -1);
        for (size_t i = 0; i < in[t].size(); ++i) in[t][i] = value(r, t, i);
      }
      std::shuffle(order.begin(), order.end(), std::mt19937(7 + r));
      std::vector<std::shared_ptr<OpHandle>> handles(tensors);
      for (int t : order) {
        ASSERT_TRUE(w.engine(r)
                        .submit(allreduce_submission("g" + std::to_string(t), in[t].data(), out[t].data(),
                                          static_cast<int64_t>(in[t].size())),
                                &handles[t])
                        .is_ok());
      }
      for (int t = 0; t < tensors; ++t) {
        Status s = wait(handles[t]);
        ASSERT_TRUE(s.is_ok()) << s.to_string();
        for (size_t i = 0; i < in[t].size(); ++i) {
          float expected = 0;
          for (int q = 0; q < n; ++q) expected += value(q, t, i);
          ASSERT_EQ(out[t][i], expected) << "n=" << n << " rank " << r << " tensor " << t;
        }
      }
    });
  }
}

// Submits 20 small allreduces per rank while the round is held, then lets
// it go: they go out in one round, as one fused allreduce.
void one_batch(FakeWorld& w, int iteration, std::vector<std::vector<std::vector<int32_t>>>* outs) {
  const int tensors = 20;
  w.fabric.hold_rounds(true);
  std::atomic<int> submitted{0};
  std::vector<std::vector<std::vector<int32_t>>> in(w.fabric.size());
  std::vector<std::vector<std::shared_ptr<OpHandle>>> handles(w.fabric.size(), std::vector<std::shared_ptr<OpHandle>>(tensors));
  outs->assign(w.fabric.size(), std::vector<std::vector<int32_t>>(tensors));
  std::thread release([&] {
    while (submitted.load() < w.fabric.size()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    w.fabric.hold_rounds(false);
  });
  w.run([&](int r) {
    in[r].resize(tensors);
    for (int t = 0; t < tensors; ++t) {
      in[r][t].assign(3 + t, r * 100 + t + iteration);
      (*outs)[r][t].assign(in[r][t].size(), -1);
      ASSERT_TRUE(w.engine(r)
                      .submit(allreduce_submission("small." + std::to_string(t), in[r][t].data(), (*outs)[r][t].data(),
                                        static_cast<int64_t>(in[r][t].size()), kI32),
                              &handles[r][t])
                      .is_ok());
    }
    ++submitted;
    for (auto& h : handles[r]) ASSERT_TRUE(wait(h).is_ok());
  });
  release.join();
}

TEST(EngineOverFakeLink, ATensorsBatchIsOneFusedCollectiveAndTheCacheSkipsTheMessages) {
  const int n = 3;
  FakeWorld w(n);
  std::vector<std::vector<std::vector<int32_t>>> outs;
  one_batch(w, 0, &outs);
  for (int r = 0; r < n; ++r) {
    for (int t = 0; t < 20; ++t) {
      for (int32_t got : outs[r][t]) ASSERT_EQ(got, (0 + 100 + 200) + 3 * t);
    }
    EXPECT_EQ(w.fabric.calls(r, "allreduce_spans"), 1) << "rank " << r;
    EXPECT_EQ(w.engine(r).stats().fused_batches, 1u);
  }
  // The first round sent every request in full (an allgather of their
  // lengths, then of the messages); the same batch again is all cache hits.
  const int allgathers = w.fabric.calls(0, "allgather");
  EXPECT_GE(allgathers, 2);
  one_batch(w, 1, &outs);
  for (int r = 0; r < n; ++r) {
    for (int t = 0; t < 20; ++t) {
      for (int32_t got : outs[r][t]) ASSERT_EQ(got, 300 + 3 * t + 3);
    }
    EXPECT_EQ(w.fabric.calls(r, "allreduce_spans"), 2);
    EXPECT_EQ(w.fabric.calls(r, "allgather"), allgathers) << "rank " << r << ": the cached requests went out again";
    EXPECT_GE(w.engine(r).stats().cache_hits, 20u);
  }
}

TEST(EngineOverFakeLink, ShapesThatDisagreeFailEveryRankAndTheEngineGoesOn) {
  FakeWorld w(2);
  w.run([&](int r) {
    std::vector<float> in(10 + r, 1), out(10 + r);
    std::shared_ptr<OpHandle> h;
    ASSERT_TRUE(w.engine(r).submit(allreduce_submission("x", in.data(), out.data(), 10 + r), &h).is_ok());
    Status s = wait(h);
    EXPECT_EQ(s.code(), Code::kMismatch) << s.to_string();
    EXPECT_NE(s.message().find("'x'"), std::string::npos) << s.message();
    // The next operation works.
    float one = 1, two = 0;
    ASSERT_TRUE(w.engine(r).submit(allreduce_submission("y", &one, &two, 1), &h).is_ok());
    ASSERT_TRUE(wait(h).is_ok());
    EXPECT_EQ(two, 2.0f);
    EXPECT_TRUE(w.engine(r).error().is_ok());
  });
}

TEST(EngineOverFakeLink, RowsThatDifferPerRankAreGatheredInRankOrder) {
  const int n = 3;
  FakeWorld w(n);
  w.run([&](int r) {
    const int64_t rows = r + 1, row = 2;
    std::vector<float> in(rows * row);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(r * 10 + i);
    std::shared_ptr<OpHandle> h;
    ASSERT_TRUE(w.engine(r).submit(allgather("rows", in.data(), rows, row), &h).is_ok());
    ASSERT_TRUE(wait(h).is_ok());
    EXPECT_EQ(h->output_rows, (std::vector<int64_t>{1, 2, 3}));
    std::vector<float> expected;
    for (int q = 0; q < n; ++q) {
      for (int64_t i = 0; i < (q + 1) * row; ++i) expected.push_back(static_cast<float>(q * 10 + i));
    }
    ASSERT_EQ(h->output.size(), expected.size() * sizeof(float));
    EXPECT_EQ(0, std::memcmp(h->output.data(), expected.data(), h->output.size()));
  });
}

TEST(EngineOverFakeLink, AJoinedRankContributesTheIdentityUntilEveryoneJoins) {
  FakeWorld w(2);
  w.run([&](int r) {
    std::shared_ptr<OpHandle> join;
    if (r == 1) {
      ASSERT_TRUE(w.engine(r).join(&join).is_ok());
    } else {
      for (int t = 0; t < 3; ++t) {
        std::vector<float> in(5, 2.0f + t), out(5, -1);
        std::shared_ptr<OpHandle> h;
        ASSERT_TRUE(w.engine(r).submit(allreduce_submission("late." + std::to_string(t), in.data(), out.data(), 5), &h).is_ok());
        ASSERT_TRUE(wait(h).is_ok());
        for (float x : out) EXPECT_EQ(x, 2.0f + t);  // rank 1 added zeros
      }
      ASSERT_TRUE(w.engine(r).join(&join).is_ok());
    }
    ASSERT_TRUE(wait(join).is_ok());
    EXPECT_EQ(join->join_last_rank, 0);
  });
}

TEST(EngineOverFakeLink, ALinkThatBreaksFailsWhatIsPendingAndWhatComesLater) {
  FakeWorld w(2);
  w.run([&](int r) {
    float x = 1, y = 0;
    std::shared_ptr<OpHandle> h;
    ASSERT_TRUE(w.engine(r).submit(allreduce_submission("warm-up", &x, &y, 1), &h).is_ok());
    ASSERT_TRUE(wait(h).is_ok());
  });
  // Only rank 0 submits: its operation waits for rank 1, then the link breaks.
  float x = 1, y = 0;
  std::shared_ptr<OpHandle> pending;
  ASSERT_TRUE(w.engine(0).submit(allreduce_submission("never", &x, &y, 1), &pending).is_ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(pending->done());
  w.fabric.break_all(peer_lost("rank 1's process ended"));
  Status s = wait(pending);
  EXPECT_EQ(s.code(), Code::kPeerLost) << s.to_string();
  EXPECT_NE(s.message().find("rank 1's process ended"), std::string::npos) << s.message();
  for (int r = 0; r < 2; ++r) {
    // Rank 1 notices while idle, waiting for a round.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (w.engine(r).error().is_ok() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(w.engine(r).error().code(), Code::kPeerLost) << "rank " << r;
    std::shared_ptr<OpHandle> later;
    Status refused = w.engine(r).submit(allreduce_submission("later", &x, &y, 1), &later);
    EXPECT_EQ(refused.code(), Code::kPeerLost) << refused.to_string();
  }
}

TEST(EngineOverFakeLink, AbortFromAnotherThreadEndsAWaitingOperation) {
  FakeWorld w(2);
  float x = 1, y = 0;
  std::shared_ptr<OpHandle> pending;
  ASSERT_TRUE(w.engine(0).submit(allreduce_submission("alone", &x, &y, 1), &pending).is_ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  w.engine(0).abort();
  Status s = wait(pending);
  EXPECT_EQ(s.code(), Code::kAborted) << s.to_string();
}

TEST(EngineOverFakeLink, ALinkThatCannotConnectFailsTheSubmissionsSayingSo) {
  FakeWorld w(2);
  w.fabric.refuse_connections(transport_error("no route to the others"));
  w.run([&](int r) {
    float x = 1, y = 0;
    std::shared_ptr<OpHandle> h;
    ASSERT_TRUE(w.engine(r).submit(allreduce_submission("first", &x, &y, 1), &h).is_ok());
    Status s = wait(h);
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("could not connect"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("no route to the others"), std::string::npos) << s.message();
  });
}

TEST(EngineOverFakeLink, DestroyedWhileConnectingItCancelsTheConnectAndReturns) {
  auto w = std::make_unique<FakeWorld>(2);
  float x = 1, y = 0;
  std::shared_ptr<OpHandle> h;
  ASSERT_TRUE(w->engine(0).submit(allreduce_submission("first", &x, &y, 1), &h).is_ok());  // rank 1 never comes
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto start = std::chrono::steady_clock::now();
  w->engines[0].reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(h->done());
  EXPECT_FALSE(h->status().is_ok());
}

}  // namespace
}  // namespace kolo
