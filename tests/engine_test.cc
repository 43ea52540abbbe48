// The runtime engine with ranks as threads over real TCP loopback: named
// operations submitted in different orders, fusion, every mismatch kind,
// duplicates, join, stalls, the timeline, abort, and a multi-threaded stress.
// Expected values are computed here from each rank's inputs.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "collectives/ring_schedule.h"
#include "runtime/engine.h"
#include "runtime/sibling_engine_link.h"
#include "tests/submissions.h"
#include "tests/thread_world.h"

namespace kolo {
namespace {

constexpr int kF32 = static_cast<int>(DataType::kFloat32);
constexpr int kI32 = static_cast<int>(DataType::kInt32);
constexpr int kSum = static_cast<int>(ReduceOp::kSum);

// A world whose ranks each have an engine.
struct EngineWorld {
  EngineWorld(int n, Config config) : world(n, config) {
    for (int r = 0; r < n; ++r) engines.push_back(make_sibling_engine(&world.comm(r)));
  }
  ~EngineWorld() {
    // Shut down concurrently, as separate processes would.
    world.run([&](int r) { engines[r].reset(); });
  }
  int size() const { return world.size(); }
  Engine& engine(int r) { return *engines[r]; }
  void run(const std::function<void(int)>& fn) { world.run(fn); }

  ThreadWorld world;
  std::vector<std::unique_ptr<Engine>> engines;
};

Config engine_config() {
  Config c = test_config(64 << 10, 4096);
  c.timeout_s = 30;
  c.cycle_time_ms = 0.5;
  return c;
}

// Rank r's value at element i of tensor t: small integers, exact in float.
float value(int r, int t, size_t i) { return static_cast<float>((r * 7 + t * 3 + static_cast<int>(i % 13)) % 17); }

float expected_sum(int n, int t, size_t i) {
  float s = 0;
  for (int r = 0; r < n; ++r) s += value(r, t, i);
  return s;
}

Status wait(const std::shared_ptr<OpHandle>& h) { return h->wait(Deadline::after_seconds(30)); }

// One operation on every rank: each engine connects on its first submission.
void warm_up(Engine& e) {
  float x = 1, y = 0;
  std::shared_ptr<OpHandle> h;
  ASSERT_TRUE(e.submit(allreduce_submission("warm-up", &x, &y, 1), &h).is_ok());
  ASSERT_TRUE(wait(h).is_ok());
}

TEST(Engine, DifferentOrdersOnDifferentRanksGiveTheReferenceResults) {
  for (int n : {1, 2, 3, 4}) {
    EngineWorld w(n, engine_config());
    const int tensors = 24;
    w.run([&](int r) {
      std::vector<std::vector<float>> in(tensors), out(tensors);
      std::vector<int> order(tensors);
      for (int t = 0; t < tensors; ++t) {
        order[t] = t;
        const size_t count = 1 + static_cast<size_t>(t) * 997 % 20000;
        in[t].resize(count);
        out[t].assign(count, -1);
        for (size_t i = 0; i < count; ++i) in[t][i] = value(r, t, i);
      }
      std::shuffle(order.begin(), order.end(), std::mt19937(100 + r));
      std::vector<std::shared_ptr<OpHandle>> handles(tensors);
      for (int t : order) {
        ASSERT_TRUE(w.engine(r)
                        .submit(allreduce_submission("grad." + std::to_string(t), in[t].data(), out[t].data(),
                                          static_cast<int64_t>(in[t].size())),
                                &handles[t])
                        .is_ok());
        if (t % 5 == r % 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      for (int t = 0; t < tensors; ++t) {
        Status s = wait(handles[t]);
        ASSERT_TRUE(s.is_ok()) << s.to_string();
        for (size_t i = 0; i < out[t].size(); ++i) {
          ASSERT_EQ(out[t][i], expected_sum(n, t, i)) << "n=" << n << " rank " << r << " tensor " << t << " i " << i;
        }
      }
    });
  }
}

// Runs the same 60 small int32 allreduces (same sizes and inputs) with the
// given threshold and returns each rank's outputs.
std::vector<std::vector<std::vector<int32_t>>> run_small_tensors(int64_t threshold, EngineStats* stats0) {
  Config c = engine_config();
  c.fusion_threshold_bytes = threshold;
  c.cycle_time_ms = 20;  // let batches form
  const int n = 3, tensors = 60;
  EngineWorld w(n, c);
  std::vector<std::vector<std::vector<int32_t>>> results(n);
  w.run([&](int r) {
    std::vector<std::vector<int32_t>> in(tensors), out(tensors);
    std::vector<std::shared_ptr<OpHandle>> h(tensors);
    for (int t = 0; t < tensors; ++t) {
      const size_t count = 1 + (t * 37) % 300;
      in[t].resize(count);
      out[t].assign(count, 0);
      for (size_t i = 0; i < count; ++i) in[t][i] = static_cast<int32_t>(value(r, t, i)) - 8;
      Submission s = allreduce_submission("small." + std::to_string(t), in[t].data(), out[t].data(),
                               static_cast<int64_t>(count), kI32);
      if (t % 3 == 0) s.request.postscale = 2;  // scaled members share the buffer too
      ASSERT_TRUE(w.engine(r).submit(std::move(s), &h[t]).is_ok());
    }
    for (int t = 0; t < tensors; ++t) ASSERT_TRUE(wait(h[t]).is_ok());
    results[r] = out;
  });
  *stats0 = w.engine(0).stats();
  return results;
}

TEST(Engine, FusedSmallTensorsMatchSeparateOnes) {
  EngineStats fused_stats, separate_stats;
  auto fused = run_small_tensors(64 << 20, &fused_stats);
  auto separate = run_small_tensors(0, &separate_stats);
  EXPECT_EQ(fused, separate);
  EXPECT_GT(fused_stats.fused_batches, 0u);
  EXPECT_EQ(separate_stats.fused_batches, 0u);
  // And both equal the reference.
  for (int r = 0; r < 3; ++r) {
    for (int t = 0; t < 60; ++t) {
      for (size_t i = 0; i < fused[r][t].size(); ++i) {
        int32_t sum = 0;
        for (int q = 0; q < 3; ++q) sum += static_cast<int32_t>(value(q, t, i)) - 8;
        ASSERT_EQ(fused[r][t][i], t % 3 == 0 ? 2 * sum : sum);
      }
    }
  }
}

// Every rank submits `name`; rank 1 changes one field. Returns each rank's status.
std::vector<Status> run_mismatch(const std::function<void(int, Submission*)>& change) {
  const int n = 3;
  EngineWorld w(n, engine_config());
  std::vector<Status> out(n);
  w.run([&](int r) {
    std::vector<float> in(64, 1.f), res(64 * n, 0.f);
    Submission s = allreduce_submission("weights", in.data(), res.data(), 64);
    change(r, &s);
    std::shared_ptr<OpHandle> h;
    Status sub = w.engine(r).submit(std::move(s), &h);
    ASSERT_TRUE(sub.is_ok()) << sub.to_string();
    out[r] = wait(h);
    // The engine goes on after a mismatch.
    std::vector<float> a(10, 1.f), b(10, 0.f);
    std::shared_ptr<OpHandle> next;
    ASSERT_TRUE(w.engine(r).submit(allreduce_submission("after", a.data(), b.data(), 10), &next).is_ok());
    Status after = wait(next);
    ASSERT_TRUE(after.is_ok()) << after.to_string();
    EXPECT_EQ(b[0], static_cast<float>(n));
  });
  return out;
}

void expect_mismatch_everywhere(const std::vector<Status>& st, const std::string& field) {
  for (size_t r = 0; r < st.size(); ++r) {
    EXPECT_EQ(st[r].code(), Code::kMismatch) << "rank " << r << ": " << st[r].to_string();
    EXPECT_NE(st[r].message().find("'weights'"), std::string::npos) << st[r].message();
    EXPECT_NE(st[r].message().find(field), std::string::npos) << st[r].message();
    EXPECT_NE(st[r].message().find("on rank 1"), std::string::npos) << st[r].message();
    EXPECT_NE(st[r].message().find("on ranks 0, 2"), std::string::npos) << st[r].message();
  }
}

TEST(Engine, EveryMismatchKindFailsOnEveryRankNamingTensorFieldAndRanks) {
  expect_mismatch_everywhere(run_mismatch([](int r, Submission* s) {
                               if (r == 1) s->request.dtype = kI32;
                             }),
                             "dtype: float32 on ranks 0, 2; int32 on rank 1");
  expect_mismatch_everywhere(run_mismatch([](int r, Submission* s) {
                               if (r == 1) s->request.op = static_cast<int>(ReduceOp::kMax);
                             }),
                             "the op");
  expect_mismatch_everywhere(run_mismatch([](int r, Submission* s) {
                               if (r == 1) s->request.shapes = {{8, 8}};
                             }),
                             "shape: [64] on ranks 0, 2; [8, 8] on rank 1");
  expect_mismatch_everywhere(run_mismatch([](int r, Submission* s) {
                               if (r == 1) s->request.prescale = 0.5;
                             }),
                             "prescale factor");
  expect_mismatch_everywhere(run_mismatch([](int r, Submission* s) {
                               if (r == 1) s->request.postscale = 3;
                             }),
                             "postscale factor");
  expect_mismatch_everywhere(run_mismatch([](int r, Submission* s) {
                               s->request.kind = OpKind::kBroadcast;
                               s->sends.clear();
                               s->request.root = r == 1 ? 2 : 0;
                             }),
                             "root: 0 on ranks 0, 2; 2 on rank 1");
  expect_mismatch_everywhere(run_mismatch([](int r, Submission* s) {
                               if (r != 1) return;
                               s->request.kind = OpKind::kAllgather;
                               s->recvs.clear();
                             }),
                             "operation: allreduce on ranks 0, 2; allgather on rank 1");
  expect_mismatch_everywhere(run_mismatch([](int r, Submission* s) {
                               if (r != 1) return;
                               s->request.shapes.push_back({2});
                               s->sends.push_back(s->sends[0]);
                               s->recvs.push_back(s->recvs[0]);
                             }),
                             "number of tensors");
  expect_mismatch_everywhere(run_mismatch([](int r, Submission* s) {
                               s->request.kind = OpKind::kAllgather;
                               s->recvs.clear();
                               s->request.shapes = {{r == 1 ? 4 : 2, r == 1 ? 8 : 16}};
                             }),
                             "shape after the first dimension: [16] on ranks 0, 2; [8] on rank 1");
}

// Named allreduces in int8, fused and alone, with error feedback, of the
// same inputs step after step: bit-identical on every rank, and the sum of
// the results over the steps stays within one step's error of the exact
// sum (what each step lost comes back in the next), where without feedback
// the error would grow with every step.
TEST(Engine, WireFormatsWithErrorFeedbackGiveBackWhatEachStepLost) {
  const int n = 3, steps = 8;
  EngineWorld w(n, engine_config());
  const std::vector<size_t> counts = {5000, 300, 70000};  // the two small ones fuse
  std::vector<std::vector<double>> total(counts.size());
  for (size_t t = 0; t < counts.size(); ++t) total[t].assign(counts[t], 0.0);
  auto input = [](int r, size_t t, size_t i) { return std::sin(0.001f * i * (t + 1) + r) * (1 + t); };
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<std::vector<float>>> out(n, std::vector<std::vector<float>>(counts.size()));
    w.run([&](int r) {
      std::vector<std::vector<float>> in(counts.size());
      std::vector<std::shared_ptr<OpHandle>> h(counts.size());
      for (size_t t = 0; t < counts.size(); ++t) {
        in[t].resize(counts[t]);
        out[r][t].assign(counts[t], 0.0f);
        for (size_t i = 0; i < counts[t]; ++i) in[t][i] = input(r, t, i);
        Submission s = allreduce_submission("grad." + std::to_string(t), in[t].data(), out[r][t].data(), counts[t]);
        s.request.wire = static_cast<int>(WireFormat::kInt8);
        s.request.error_feedback = true;
        ASSERT_TRUE(w.engine(r).submit(std::move(s), &h[t]).is_ok());
      }
      for (auto& handle : h) ASSERT_TRUE(wait(handle).is_ok());
    });
    for (size_t t = 0; t < counts.size(); ++t) {
      for (size_t i = 0; i < counts[t]; ++i) {
        for (int r = 1; r < n; ++r) ASSERT_EQ(out[r][t][i], out[0][t][i]) << "tensor " << t << " element " << i;
        total[t][i] += out[0][t][i];
      }
    }
  }
  for (size_t t = 0; t < counts.size(); ++t) {
    // One step's error: each rank's encoding loses at most half a step of
    // its block's scale, (largest partial sum) / 252.
    const double one_step = n * (n * (1.0 + t)) / 252 * 1.1;
    for (size_t i = 0; i < counts[t]; ++i) {
      double exact = 0;
      for (int r = 0; r < n; ++r) exact += input(r, t, i);
      ASSERT_LE(std::fabs(total[t][i] - steps * exact), one_step) << "tensor " << t << " element " << i;
    }
  }
  // Four bytes per element of every tensor that asked for it.
  size_t all = 0;
  for (size_t c : counts) all += c * sizeof(float);
  for (int r = 0; r < n; ++r) EXPECT_EQ(w.engine(r).residual_bytes(), all) << "rank " << r;
}

TEST(Engine, WireFormatsRefusedWhereTheyCannotApplyAndComparedAcrossRanks) {
  EngineWorld w(1, engine_config());
  std::vector<int32_t> ints(10);
  Submission s = allreduce_submission("ints", ints.data(), ints.data(), 10);
  s.request.dtype = kI32;
  s.request.wire = static_cast<int>(WireFormat::kBf16);
  std::shared_ptr<OpHandle> h;
  Status st = w.engine(0).submit(std::move(s), &h);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("wire format bf16 carries float32, float16 and bfloat16 sums and averages, not int32"),
            std::string::npos)
      << st.to_string();
  std::vector<float> f(10);
  s = allreduce_submission("feedback", f.data(), f.data(), 10);
  s.request.error_feedback = true;
  st = w.engine(0).submit(std::move(s), &h);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("error feedback needs a wire format"), std::string::npos) << st.to_string();
  expect_mismatch_everywhere(run_mismatch([](int r, Submission* m) {
                               m->request.wire = static_cast<int>(r == 1 ? WireFormat::kBf16 : WireFormat::kInt8);
                             }),
                             "wire format: int8 on ranks 0, 2; bf16 on rank 1");
}

TEST(Engine, DuplicateNameInFlightIsRefusedAndReusableAfterCompletion) {
  EngineWorld w(2, engine_config());
  w.run([&](int r) {
    std::vector<float> a(4, 1.f), b(4), c(4);
    std::shared_ptr<OpHandle> h1, h2;
    if (r == 0) {
      ASSERT_TRUE(w.engine(r).submit(allreduce_submission("x", a.data(), b.data(), 4), &h1).is_ok());
      Status dup = w.engine(r).submit(allreduce_submission("x", a.data(), c.data(), 4), &h2);
      EXPECT_EQ(dup.code(), Code::kInvalidUsage);
      EXPECT_NE(dup.message().find("'x' is already in flight"), std::string::npos) << dup.message();
      ASSERT_TRUE(w.world.comm(r).barrier().is_ok());  // rank 1 submits only after the refusal
    } else {
      ASSERT_TRUE(w.world.comm(r).barrier().is_ok());
      ASSERT_TRUE(w.engine(r).submit(allreduce_submission("x", a.data(), b.data(), 4), &h1).is_ok());
    }
    ASSERT_TRUE(wait(h1).is_ok());
    EXPECT_EQ(b[0], 2.f);
    ASSERT_TRUE(w.engine(r).submit(allreduce_submission("x", a.data(), c.data(), 4), &h2).is_ok());
    ASSERT_TRUE(wait(h2).is_ok());
    EXPECT_EQ(c[3], 2.f);
  });
}

// An allgather cannot run while a rank has joined; it fails on each rank
// that submits it without waiting for the other ranks to submit the same
// name, which they may never do: Horovod numbers unnamed operations per
// rank, and a rank that joined first skipped a number (its test suite's
// join tests on 3+ ranks hang on Horovod itself).
TEST(Engine, AnAllgatherWhileARankHasJoinedFailsWithoutWaitingForItsName) {
  const int n = 3;
  EngineWorld w(n, engine_config());
  w.run([&](int r) {
    std::shared_ptr<OpHandle> j;
    if (r != 0) {
      std::vector<float> rows(3, 1.f);
      // A different name on each rank.
      Submission gather =
          one_tensor_submission("allgather.noname." + std::to_string(r), OpKind::kAllgather, {1, 3}, {rows.data()}, {});
      std::shared_ptr<OpHandle> g;
      ASSERT_TRUE(w.world.comm(r).barrier().is_ok());  // after rank 0 has joined
      ASSERT_TRUE(w.engine(r).submit(std::move(gather), &g).is_ok());
      Status gathered = wait(g);
      EXPECT_EQ(gathered.code(), Code::kInvalidUsage) << "rank " << r << ": " << gathered.to_string();
      EXPECT_NE(gathered.message().find("rank 0 have joined"), std::string::npos) << gathered.message();
      ASSERT_TRUE(w.engine(r).join(&j).is_ok());
    } else {
      ASSERT_TRUE(w.engine(r).join(&j).is_ok());
      ASSERT_TRUE(w.world.comm(r).barrier().is_ok());
    }
    Status s = wait(j);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  });
}

TEST(Engine, JoinLetsRanksWithMoreBatchesFinish) {
  const int n = 3;
  EngineWorld w(n, engine_config());
  w.run([&](int r) {
    const int batches = 2 + 3 * r;  // rank 2 has the most
    for (int b = 0; b < batches; ++b) {
      std::vector<float> in(1000, static_cast<float>(r + 1)), out(1000);
      std::vector<float> big_in(30000, static_cast<float>(r + 1)), big_out(30000);  // fused without copies
      std::vector<float> rows(3 * (r + 1), static_cast<float>(r));
      std::shared_ptr<OpHandle> h, g, big;
      const std::string step = "step." + std::to_string(b);
      ASSERT_TRUE(w.engine(r).submit(allreduce_submission(step, in.data(), out.data(), 1000), &h).is_ok());
      ASSERT_TRUE(w.engine(r)
                      .submit(allreduce_submission("big." + std::to_string(b), big_in.data(), big_out.data(), 30000),
                              &big)
                      .is_ok());
      Submission gather = one_tensor_submission("rows." + std::to_string(b), OpKind::kAllgather, {r + 1, 3},
                                                {rows.data()}, {});
      ASSERT_TRUE(w.engine(r).submit(std::move(gather), &g).is_ok());
      ASSERT_TRUE(wait(h).is_ok());
      ASSERT_TRUE(wait(big).is_ok());
      // Ranks that ran out of batches contribute zeros to allreduces; an
      // allgather fails while any rank has joined (Horovod's rule).
      float expect = 0;
      int64_t expect_rows = 0;
      for (int q = 0; q < n; ++q) {
        if (b < 2 + 3 * q) {
          expect += static_cast<float>(q + 1);
          expect_rows += q + 1;
        }
      }
      EXPECT_EQ(out[999], expect) << "rank " << r << " batch " << b;
      EXPECT_EQ(big_out[0], expect) << "rank " << r << " batch " << b;
      EXPECT_EQ(big_out[29999], expect) << "rank " << r << " batch " << b;
      Status gathered = wait(g);
      if (b < 2) {
        ASSERT_TRUE(gathered.is_ok()) << gathered.to_string();
        EXPECT_EQ(static_cast<int64_t>(g->output.size()), expect_rows * 3 * 4) << "rank " << r << " batch " << b;
      } else {
        EXPECT_EQ(gathered.code(), Code::kInvalidUsage) << "rank " << r << " batch " << b;
        EXPECT_NE(gathered.message().find("have joined"), std::string::npos) << gathered.message();
      }
    }
    std::shared_ptr<OpHandle> j;
    ASSERT_TRUE(w.engine(r).join(&j).is_ok());
    std::vector<float> late(2);
    std::shared_ptr<OpHandle> refused;
    EXPECT_EQ(w.engine(r).submit(allreduce_submission("late", late.data(), late.data(), 2), &refused).code(),
              Code::kInvalidUsage);
    Status s = wait(j);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(j->join_last_rank, 2);
    // After the join everyone works normally again.
    std::vector<float> x(5, 1.f), y(5);
    std::shared_ptr<OpHandle> h;
    ASSERT_TRUE(w.engine(r).submit(allreduce_submission("after.join", x.data(), y.data(), 5), &h).is_ok());
    ASSERT_TRUE(wait(h).is_ok());
    EXPECT_EQ(y[4], 3.f);
  });
}

TEST(Engine, StallIsReportedByRankZeroNamingTheMissingRank) {
  Config c = engine_config();
  c.stall_warning_s = 0.3;
  EngineWorld w(3, c);
  w.run([&](int r) {
    warm_up(w.engine(r));
    std::vector<float> in(16, 1.f), out(16);
    std::shared_ptr<OpHandle> h;
    if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    ASSERT_TRUE(w.engine(r).submit(allreduce_submission("lonely", in.data(), out.data(), 16), &h).is_ok());
    ASSERT_TRUE(wait(h).is_ok());
    EXPECT_EQ(out[0], 3.f);
  });
  const std::string report = w.engine(0).last_stall_report();
  EXPECT_NE(report.find("'lonely'"), std::string::npos) << report;
  EXPECT_NE(report.find("submitted on rank(s) 0, 1 but not on rank(s) 2"), std::string::npos) << report;
}

TEST(Engine, StallShutdownFailsEveryRank) {
  Config c = engine_config();
  c.stall_warning_s = 0.2;
  c.stall_shutdown_s = 0.6;
  EngineWorld w(3, c);
  w.run([&](int r) {
    warm_up(w.engine(r));
    std::vector<float> in(16, 1.f), out(16);
    std::shared_ptr<OpHandle> h;
    if (r != 2) {  // rank 2 never submits "orphan"
      ASSERT_TRUE(w.engine(r).submit(allreduce_submission("orphan", in.data(), out.data(), 16), &h).is_ok());
      Status s = wait(h);
      EXPECT_EQ(s.code(), Code::kTimeout) << s.to_string();
      EXPECT_NE(s.message().find("'orphan'"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("not on rank(s) 2"), std::string::npos) << s.message();
    } else {
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (w.engine(r).error().is_ok() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  });
  for (int r = 0; r < 3; ++r) {
    Status s = w.engine(r).error();
    EXPECT_EQ(s.code(), Code::kTimeout) << r << ": " << s.to_string();
    EXPECT_NE(s.message().find("'orphan'"), std::string::npos) << s.message();
  }
}

TEST(Engine, StallShutdownShorterThanTheWarningFailsAtTheShutdownLimit) {
  Config c = engine_config();
  c.stall_warning_s = 60;  // the default warning: the shutdown limit must not wait for it
  c.stall_shutdown_s = 0.5;
  EngineWorld w(2, c);
  const auto start = std::chrono::steady_clock::now();
  w.run([&](int r) {
    warm_up(w.engine(r));
    std::vector<float> in(16, 1.f), out(16);
    std::shared_ptr<OpHandle> h;
    if (r == 0) {  // rank 1 never submits "orphan"
      ASSERT_TRUE(w.engine(r).submit(allreduce_submission("orphan", in.data(), out.data(), 16), &h).is_ok());
      Status s = wait(h);
      EXPECT_EQ(s.code(), Code::kTimeout) << s.to_string();
      EXPECT_NE(s.message().find("KOLO_STALL_SHUTDOWN_S"), std::string::npos) << s.message();
    } else {
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (w.engine(r).error().is_ok() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
}

TEST(Engine, OtherOperationsAgreeWithTheReference) {
  for (int n : {1, 3, 4}) {
    EngineWorld w(n, engine_config());
    w.run([&](int r) {
      Engine& e = w.engine(r);
      // allgather: rank q has q + 1 rows of 5
      std::vector<float> rows(static_cast<size_t>(r + 1) * 5);
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(r * 100 + static_cast<int>(i));
      Submission g;
      g.request = {"gather", OpKind::kAllgather, kF32, 0, 0, 1, 1, {{r + 1, 5}}, {}};
      g.sends = {rows.data()};
      // broadcast from the last rank
      std::vector<int32_t> bc(333, r == n - 1 ? 77 : -1);
      Submission b;
      b.request = {"bcast", OpKind::kBroadcast, kI32, 0, n - 1, 1, 1, {{333}}, {}};
      b.recvs = {bc.data()};
      // reduce-scatter of 10 rows of 3 (uneven parts), prescale 2, postscale 0.5
      std::vector<double> rs_in(30), rs_out(30, -1);
      for (int i = 0; i < 30; ++i) rs_in[i] = r + i;
      Submission rs;
      rs.request = {"rs", OpKind::kReduceScatter, static_cast<int>(DataType::kFloat64), kSum, 0, 2, 0.5, {{10, 3}}, {}};
      rs.sends = {rs_in.data()};
      rs.recvs = {rs_out.data()};
      // alltoall: rank r sends q + 1 rows of 2 to rank q
      std::vector<int64_t> splits(n);
      int64_t total_rows = 0;
      for (int q = 0; q < n; ++q) total_rows += splits[q] = q + 1;
      std::vector<int32_t> a2a(static_cast<size_t>(total_rows) * 2);
      for (size_t i = 0; i < a2a.size(); ++i) a2a[i] = r * 1000 + static_cast<int>(i);
      Submission a;
      a.request = {"a2a", OpKind::kAlltoall, kI32, 0, 0, 1, 1, {{total_rows, 2}}, splits};
      a.sends = {a2a.data()};
      // grouped allreduce of two tensors, average
      std::vector<float> t0(7, static_cast<float>(r)), t1(3, 2.f * r), o0(7), o1(3);
      Submission gr;
      gr.request = {"group", OpKind::kAllreduce, kF32, static_cast<int>(ReduceOp::kAvg), 0, 1, 1, {{7}, {3}}, {}};
      gr.sends = {t0.data(), t1.data()};
      gr.recvs = {o0.data(), o1.data()};
      Submission bar;
      bar.request = {"bar", OpKind::kBarrier, 0, 0, 0, 1, 1, {}, {}};

      std::vector<Submission> subs;
      subs.push_back(std::move(g));
      subs.push_back(std::move(b));
      subs.push_back(std::move(rs));
      subs.push_back(std::move(a));
      subs.push_back(std::move(gr));
      subs.push_back(std::move(bar));
      std::shuffle(subs.begin(), subs.end(), std::mt19937(r));
      std::map<std::string, std::shared_ptr<OpHandle>> h;
      for (auto& s : subs) {
        std::string name = s.request.name;
        Status st = e.submit(std::move(s), &h[name]);
        ASSERT_TRUE(st.is_ok()) << st.to_string();
      }
      for (auto& entry : h) {
        Status st = wait(entry.second);
        ASSERT_TRUE(st.is_ok()) << entry.first << ": " << st.to_string();
      }
      // allgather
      const auto& out = h["gather"]->output;
      std::vector<float> got(out.size() / 4);
      std::memcpy(got.data(), out.data(), out.size());
      size_t k = 0;
      for (int q = 0; q < n; ++q) {
        EXPECT_EQ(h["gather"]->output_rows[q], q + 1);
        for (int i = 0; i < (q + 1) * 5; ++i) ASSERT_EQ(got[k++], static_cast<float>(q * 100 + i));
      }
      EXPECT_EQ(k, got.size());
      for (int32_t v : bc) ASSERT_EQ(v, 77);
      // reduce-scatter: rows partition(10, n, r); value = 0.5 * sum_q 2 * (q + i)
      Range part = partition(10, n, r);
      for (size_t i = 0; i < part.count * 3; ++i) {
        double expect = 0;
        for (int q = 0; q < n; ++q) expect += 0.5 * 2 * (q + static_cast<double>(part.offset * 3 + i));
        ASSERT_EQ(rs_out[i], expect) << "rank " << r << " i " << i;
      }
      // alltoall: from each q, r + 1 rows starting at q's row offset of block r
      const auto& ao = h["a2a"]->output;
      std::vector<int32_t> recv(ao.size() / 4);
      std::memcpy(recv.data(), ao.data(), ao.size());
      ASSERT_EQ(recv.size(), static_cast<size_t>(n * (r + 1) * 2));
      size_t pos = 0;
      for (int q = 0; q < n; ++q) {
        EXPECT_EQ(h["a2a"]->output_rows[q], r + 1);
        int64_t first_row = 0;
        for (int d = 0; d < r; ++d) first_row += d + 1;
        for (int i = 0; i < (r + 1) * 2; ++i) ASSERT_EQ(recv[pos++], q * 1000 + static_cast<int>(first_row * 2 + i));
      }
      // group average
      float avg0 = 0, avg1 = 0;
      for (int q = 0; q < n; ++q) {
        avg0 += static_cast<float>(q);
        avg1 += 2.f * q;
      }
      EXPECT_FLOAT_EQ(o0[6], avg0 / n);
      EXPECT_FLOAT_EQ(o1[2], avg1 / n);
    });
  }
}

TEST(Engine, WaitTimesOutThenCompletesAndCallbackRuns) {
  EngineWorld w(2, engine_config());
  std::atomic<int> callbacks{0};
  w.run([&](int r) {
    std::vector<float> in(8, 1.f), out(8);
    std::shared_ptr<OpHandle> h;
    if (r == 0) {
      ASSERT_TRUE(w.engine(r).submit(allreduce_submission("slow", in.data(), out.data(), 8), &h).is_ok());
      h->set_callback([&](const Status& s) {
        EXPECT_TRUE(s.is_ok());
        ++callbacks;
      });
      EXPECT_EQ(h->wait(Deadline::after_seconds(0.2)).code(), Code::kTimeout);
      EXPECT_FALSE(h->done());
      ASSERT_TRUE(w.world.comm(r).barrier().is_ok());
    } else {
      ASSERT_TRUE(w.world.comm(r).barrier().is_ok());  // after rank 0's wait timed out
      ASSERT_TRUE(w.engine(r).submit(allreduce_submission("slow", in.data(), out.data(), 8), &h).is_ok());
    }
    ASSERT_TRUE(wait(h).is_ok());
    EXPECT_EQ(out[7], 2.f);
  });
  EXPECT_EQ(callbacks.load(), 1);
}

// A submission waits for no collective of the communicator: one thread
// may sit in a blocking collective that a peer joins only after this
// rank's named operation has run, submitted by another thread meanwhile.
TEST(Engine, ASubmissionDoesNotWaitForABlockingCollectiveOfAnotherThread) {
  EngineWorld w(2, engine_config());
  w.run([&](int r) {
    std::vector<float> in(8, 1.f), out(8);
    std::shared_ptr<OpHandle> h;
    if (r == 0) {
      std::thread blocking([&] { ASSERT_TRUE(w.world.comm(r).barrier().is_ok()); });
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the barrier is waiting for rank 1
      ASSERT_TRUE(w.engine(r).submit(allreduce_submission("first", in.data(), out.data(), 8), &h).is_ok());
      Status s = h->wait(Deadline::after_seconds(10));
      EXPECT_TRUE(s.is_ok()) << s.to_string();
      blocking.join();
    } else {
      ASSERT_TRUE(w.engine(r).submit(allreduce_submission("first", in.data(), out.data(), 8), &h).is_ok());
      Status s = h->wait(Deadline::after_seconds(10));
      EXPECT_TRUE(s.is_ok()) << s.to_string();
      ASSERT_TRUE(w.world.comm(r).barrier().is_ok());
    }
    EXPECT_EQ(out[0], 2.f);
  });
}

TEST(Engine, AbortFailsWaitsOnEveryRank) {
  EngineWorld w(3, engine_config());
  w.run([&](int r) {
    std::vector<float> in(8, 1.f), out(8);
    std::shared_ptr<OpHandle> warm, h;
    ASSERT_TRUE(w.engine(r).submit(allreduce_submission("warm", in.data(), out.data(), 8), &warm).is_ok());
    ASSERT_TRUE(wait(warm).is_ok());
    // Only rank 0 submits, then aborts: every rank's engine must stop.
    if (r == 0) {
      ASSERT_TRUE(w.engine(r).submit(allreduce_submission("never", in.data(), out.data(), 8), &h).is_ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      w.engine(r).abort();
      EXPECT_EQ(wait(h).code(), Code::kAborted);
    }
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (w.engine(r).error().is_ok() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_FALSE(w.engine(r).error().is_ok()) << "rank " << r;
  });
}

TEST(Engine, SteadyStateHitsTheCacheAndShapeChangesStillWork) {
  EngineWorld w(3, engine_config());
  const int steps = 6, tensors = 30;
  w.run([&](int r) {
    for (int step = 0; step < steps; ++step) {
      // The last step changes the shape of one cached name.
      std::vector<std::vector<float>> in(tensors), out(tensors);
      std::vector<std::shared_ptr<OpHandle>> h(tensors);
      std::vector<int> order(tensors);
      for (int t = 0; t < tensors; ++t) order[t] = t;
      std::shuffle(order.begin(), order.end(), std::mt19937(step * 10 + r));
      for (int t : order) {
        const size_t count = (step == steps - 1 && t == 4) ? 12 : 100 + t;
        in[t].assign(count, static_cast<float>(r));
        out[t].assign(count, -1);
        ASSERT_TRUE(w.engine(r).submit(allreduce_submission("p" + std::to_string(t), in[t].data(), out[t].data(),
                                                 static_cast<int64_t>(count)),
                                       &h[t]).is_ok());
      }
      for (int t = 0; t < tensors; ++t) {
        ASSERT_TRUE(wait(h[t]).is_ok());
        ASSERT_EQ(out[t].back(), 3.f);  // 0 + 1 + 2
      }
    }
  });
  EngineStats s = w.engine(0).stats();
  // Every name after the first step came from the cache except the changed one.
  EXPECT_GE(s.cache_hits, static_cast<uint64_t>((steps - 2) * tensors));
  EXPECT_EQ(s.operations, static_cast<uint64_t>(steps * tensors));
}

TEST(Engine, ShutdownOfOneRankFailsOthersPendingOperations) {
  EngineWorld w(2, engine_config());
  std::vector<float> in(8, 1.f), out(8);
  std::shared_ptr<OpHandle> warm0, warm1, h;
  ASSERT_TRUE(w.engine(0).submit(allreduce_submission("w", in.data(), out.data(), 8), &warm0).is_ok());
  std::vector<float> in1(8, 1.f), out1(8);
  ASSERT_TRUE(w.engine(1).submit(allreduce_submission("w", in1.data(), out1.data(), 8), &warm1).is_ok());
  ASSERT_TRUE(wait(warm0).is_ok());
  ASSERT_TRUE(wait(warm1).is_ok());
  ASSERT_TRUE(w.engine(0).submit(allreduce_submission("pending", in.data(), out.data(), 8), &h).is_ok());
  w.engines[1].reset();  // rank 1 shuts down
  Status s = wait(h);
  EXPECT_EQ(s.code(), Code::kPeerLost) << s.to_string();
  EXPECT_NE(s.message().find("rank 1 shut down"), std::string::npos) << s.message();
  // A peer's shutdown is no failure of this rank's engine
  // (kolo_comm_get_async_error stays KOLO_SUCCESS: the job may simply have
  // finished first there), but what is submitted now fails as lost.
  EXPECT_TRUE(w.engine(0).error().is_ok()) << w.engine(0).error().to_string();
  std::shared_ptr<OpHandle> late;
  Status submitted = w.engine(0).submit(allreduce_submission("late", in.data(), out.data(), 8), &late);
  if (submitted.is_ok()) submitted = wait(late);
  EXPECT_EQ(submitted.code(), Code::kPeerLost) << submitted.to_string();
  w.engines[1] = make_sibling_engine(&w.world.comm(1));  // for the destructor
}

TEST(Engine, TimelineRecordsEveryPhase) {
  const std::string path = ::testing::TempDir() + "/kolo_timeline_test.json";
  // The ring marks its two phases (the shared-memory allreduce, which one
  // host's ranks take by default, records one ALLREDUCE phase).
  Config config = engine_config();
  config.algorithm = "ring";
  EngineWorld w(2, config);
  w.run([&](int r) {
    if (r == 0) {
      ASSERT_TRUE(w.engine(r).start_timeline(path).is_ok());
    }
    std::vector<std::vector<float>> in(6), out(6);
    std::vector<std::shared_ptr<OpHandle>> h(6);
    for (int t = 0; t < 6; ++t) {
      const size_t count = t == 5 ? 300000 : 50;  // one large: ring phases without fusion
      in[t].assign(count, 1.f);
      out[t].resize(count);
      ASSERT_TRUE(w.engine(r).submit(allreduce_submission("t" + std::to_string(t), in[t].data(), out[t].data(),
                                               static_cast<int64_t>(count)), &h[t]).is_ok());
    }
    for (auto& x : h) ASSERT_TRUE(wait(x).is_ok());
    if (r == 0) w.engine(r).stop_timeline();
  });
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string json = ss.str();
  EXPECT_EQ(json.rfind("{\"traceEvents\": [", 0), 0u);
  EXPECT_NE(json.find("\n]}\n"), std::string::npos);
  for (const char* phase : {"SUBMITTED", "QUEUED", "NEGOTIATING", "MEMCPY_IN_FUSION_BUFFER", "MEMCPY_OUT_FUSION_BUFFER",
                            "RING_REDUCE_SCATTER", "RING_ALLGATHER", "DONE", "\"t5\""}) {
    EXPECT_NE(json.find(phase), std::string::npos) << phase;
  }
}

TEST(Engine, StressThousandsOfRandomTensorsFromSeveralThreadsPerRank) {
  const int n = 3, threads = 4, per_thread = 500;
  Config c = engine_config();
  c.fusion_threshold_bytes = 256 << 10;
  EngineWorld w(n, c);
  w.run([&](int r) {
    std::vector<std::thread> workers;
    std::atomic<int> failures{0};
    for (int th = 0; th < threads; ++th) {
      workers.emplace_back([&, th] {
        std::mt19937 sizes(th);  // the same sizes on every rank
        std::vector<size_t> count(per_thread);
        for (auto& x : count) x = 1 + sizes() % (sizes() % 8 == 0 ? 60000 : 700);
        std::vector<int> order(per_thread);
        for (int i = 0; i < per_thread; ++i) order[i] = i;
        std::shuffle(order.begin(), order.end(), std::mt19937(1000 * r + th));  // a different order per rank
        std::vector<std::vector<float>> in(per_thread), out(per_thread);
        std::vector<std::shared_ptr<OpHandle>> h(per_thread);
        for (int i : order) {
          const int t = th * per_thread + i;
          in[i].resize(count[i]);
          out[i].assign(count[i], -1);
          for (size_t k = 0; k < count[i]; ++k) in[i][k] = value(r, t, k);
          if (!w.engine(r).submit(allreduce_submission("s" + std::to_string(t), in[i].data(), out[i].data(),
                                            static_cast<int64_t>(count[i])), &h[i]).is_ok()) {
            ++failures;
          }
        }
        for (int i = 0; i < per_thread; ++i) {
          const int t = th * per_thread + i;
          if (!h[i] || !wait(h[i]).is_ok()) {
            ++failures;
            continue;
          }
          for (size_t k = 0; k < count[i]; ++k) {
            if (out[i][k] != expected_sum(n, t, k)) {
              ++failures;
              break;
            }
          }
        }
      });
    }
    for (auto& t : workers) t.join();
    EXPECT_EQ(failures.load(), 0) << "rank " << r;
  });
}

}  // namespace
}  // namespace kolo
