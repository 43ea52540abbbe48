// The engine's named operations on GPU memory, without a GPU: each rank (a
// thread) has an emulated GPU of its own (gpu/emulated_device.h) whose
// stream runs its work later, on a thread of its own, so an engine that
// read a tensor before the GPU's work on it had run, or handed a result
// back before it was written, gives wrong bytes. Over CUDA IPC and over
// staging through TCP: every dtype and op of a single allreduce against
// tests/reference.h; fused batches and grouped allreduces from different
// submission orders, with scale factors; broadcast and reduce-scatter;
// allgather and alltoall into GPU memory the handle keeps; a rank that has
// joined; what GPU memory is refused, and a rank whose tensors are
// elsewhere than its peers'.
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/ring_schedule.h"
#include "gpu/emulated_device.h"
#include "runtime/engine.h"
#include "runtime/sibling_engine_link.h"
#include "tests/reference.h"
#include "tests/submissions.h"
#include "tests/thread_world.h"

namespace kolo {
namespace {

using Bytes = std::vector<unsigned char>;

struct Mode {
  int ranks;
  bool ipc;  // CUDA IPC between the ranks, else staging over TCP
};

std::string mode_name(const ::testing::TestParamInfo<Mode>& info) {
  return "N" + std::to_string(info.param.ranks) + (info.param.ipc ? "_ipc" : "_staged");
}

// Ranks with an emulated GPU and an engine each. The devices outlive the
// communicators, which outlive the engines.
class GpuEngineWorld {
 public:
  explicit GpuEngineWorld(const Mode& m) {
    for (int r = 0; r < m.ranks; ++r) devices_.push_back(std::make_unique<EmulatedDevice>(/*lag_us=*/20));
    world_ = std::make_unique<ThreadWorld>(m.ranks, [&](int r) {
      Config c = test_config(4096, 1024);
      c.transport = "tcp";
      c.cuda_ipc = m.ipc;
      c.device = devices_[r].get();
      c.cycle_time_ms = 0.5;
      c.timeout_s = 30;
      return c;
    });
    for (int r = 0; r < m.ranks; ++r) engines_.push_back(make_sibling_engine(&world_->comm(r)));
  }
  ~GpuEngineWorld() {
    world_->run([&](int r) { engines_[r].reset(); });
  }
  int size() const { return world_->size(); }
  Engine& engine(int r) { return *engines_[r]; }
  EmulatedDevice& device(int r) { return *devices_[r]; }
  void run(const std::function<void(int)>& fn) { world_->run(fn); }

  // Rank r's device memory holding `bytes`.
  void* upload(int r, const Bytes& bytes) {
    void* p = device(r).allocate(std::max<size_t>(bytes.size(), 1));
    if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
    return p;
  }
  static Bytes download(const void* p, size_t bytes) {
    Bytes b(bytes);
    if (bytes) std::memcpy(b.data(), p, bytes);
    return b;
  }

 private:
  std::vector<std::unique_ptr<EmulatedDevice>> devices_;
  std::unique_ptr<ThreadWorld> world_;
  std::vector<std::unique_ptr<Engine>> engines_;
};

Status wait(const std::shared_ptr<OpHandle>& h) { return h->wait(Deadline::after_seconds(30)); }

// Rank r's float value at element i of tensor t: small integers, so sums
// and the scale factors below (powers of two) are exact in float.
float value(int r, int t, size_t i) { return static_cast<float>((r * 5 + t * 3 + static_cast<int>(i % 11)) % 13); }

Bytes floats(const std::vector<float>& v) {
  Bytes b(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> as_floats(const Bytes& b) {
  std::vector<float> v(b.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

class GpuEngine : public ::testing::TestWithParam<Mode> {};

TEST_P(GpuEngine, AllreduceOfEveryDtypeAndOpRunsOnTheGpuAndMatchesTheReference) {
  GpuEngineWorld w(GetParam());
  const int n = w.size();
  w.run([&](int r) {
    const uint64_t before = w.device(r).fence();
    for (int di = 0; di < kNumDataTypes; ++di) {
      for (int oi = 0; oi < kNumReduceOps; ++oi) {
        const auto d = static_cast<DataType>(di);
        const auto op = static_cast<ReduceOp>(oi);
        for (size_t count : {size_t{0}, size_t{1}, size_t{3001}}) {
          const std::string name = std::string(dtype_name(d)) + "." + op_name(op) + "." + std::to_string(count);
          const Bytes in = ref::input_buffer(d, op, r, count);
          const bool in_place = count == 1;
          void* send = w.upload(r, in);
          void* recv = in_place ? send : w.upload(r, Bytes(in.size(), 0xAB));
          std::shared_ptr<OpHandle> h;
          Status s =
              w.engine(r).submit(allreduce_submission(name, send, recv, static_cast<int64_t>(count), di, oi), &h);
          ASSERT_TRUE(s.is_ok()) << name << ": " << s.to_string();
          s = wait(h);
          ASSERT_TRUE(s.is_ok()) << name << ": " << s.to_string();
          EXPECT_EQ(GpuEngineWorld::download(recv, in.size()), ref::expected_buffer(d, op, n, count))
              << name << " on rank " << r;
          w.device(r).release(send);
          if (!in_place) w.device(r).release(recv);
        }
      }
    }
    // The work went through the GPU's own stream: the host path would
    // have enqueued nothing there.
    EXPECT_GT(w.device(r).fence(), before) << "rank " << r;
    EXPECT_TRUE(w.device(r).violations().empty()) << w.device(r).violations()[0];
  });
}

TEST_P(GpuEngine, FusedBatchesAndGroupsInAnyOrderAreScaledOnTheGpu) {
  GpuEngineWorld w(GetParam());
  const int n = w.size();
  const int tensors = 12;
  // Tensor t: 1 + 700 t elements (small and large ones, fused together),
  // prescale 2 and postscale 1/4 on the odd ones; the last four form one
  // grouped allreduce.
  const auto count_of = [](int t) { return static_cast<size_t>(1 + 700 * t); };
  const auto pre_of = [](int t) { return t % 2 ? 2.0 : 1.0; };
  const auto post_of = [](int t) { return t % 2 ? 0.25 : 1.0; };
  w.run([&](int r) {
    std::vector<void*> send(tensors), recv(tensors);
    for (int t = 0; t < tensors; ++t) {
      std::vector<float> in(count_of(t));
      for (size_t i = 0; i < in.size(); ++i) in[i] = value(r, t, i);
      send[t] = w.upload(r, floats(in));
      recv[t] = w.upload(r, Bytes(in.size() * sizeof(float), 0xCD));
    }
    std::vector<int> order;
    for (int t = 0; t < tensors - 4; ++t) order.push_back(t);
    std::mt19937 rng(static_cast<unsigned>(r) + 1);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::shared_ptr<OpHandle>> handles;
    for (int t : order) {
      Submission s = allreduce_submission("t" + std::to_string(t), send[t], recv[t], static_cast<int64_t>(count_of(t)));
      s.request.prescale = pre_of(t);
      s.request.postscale = post_of(t);
      std::shared_ptr<OpHandle> h;
      ASSERT_TRUE(w.engine(r).submit(std::move(s), &h).is_ok());
      handles.push_back(h);
    }
    Submission group = allreduce_submission("group", nullptr, nullptr, 0);
    group.request.shapes.clear();
    group.sends.clear();
    group.recvs.clear();
    group.request.prescale = 2;
    group.request.postscale = 0.25;
    for (int t = tensors - 4; t < tensors; ++t) {
      group.request.shapes.push_back({static_cast<int64_t>(count_of(t))});
      group.sends.push_back(send[t]);
      group.recvs.push_back(recv[t]);
    }
    std::shared_ptr<OpHandle> h;
    ASSERT_TRUE(w.engine(r).submit(std::move(group), &h).is_ok());
    handles.push_back(h);
    for (const auto& handle : handles) {
      Status s = wait(handle);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
    }
    for (int t = 0; t < tensors; ++t) {
      const bool grouped = t >= tensors - 4;
      const double pre = grouped ? 2.0 : pre_of(t), post = grouped ? 0.25 : post_of(t);
      const std::vector<float> got = as_floats(GpuEngineWorld::download(recv[t], count_of(t) * sizeof(float)));
      for (size_t i = 0; i < got.size(); ++i) {
        double want = 0;
        for (int q = 0; q < n; ++q) want += value(q, t, i) * pre;
        want *= post;
        ASSERT_EQ(got[i], static_cast<float>(want)) << "tensor " << t << " element " << i << " on rank " << r;
      }
      w.device(r).release(send[t]);
      w.device(r).release(recv[t]);
    }
    EXPECT_TRUE(w.device(r).violations().empty());
  });
  for (int r = 0; r < n; ++r) EXPECT_GT(w.engine(r).stats().fused_batches, 0u) << "rank " << r;
}

TEST_P(GpuEngine, BroadcastAndReduceScatterMatchWhatEveryRankSent) {
  GpuEngineWorld w(GetParam());
  const int n = w.size();
  const size_t rows = 2 * static_cast<size_t>(n) + 1, row = 257;
  const int root = n - 1;
  w.run([&](int r) {
    // Broadcast: the root's values replace every rank's.
    std::vector<float> mine(rows * row);
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = value(r, 0, i);
    void* buf = w.upload(r, floats(mine));
    const std::vector<int64_t> shape = {static_cast<int64_t>(rows), static_cast<int64_t>(row)};
    Submission b = one_tensor_submission("broadcast", OpKind::kBroadcast, shape, {}, {buf});
    b.request.root = root;
    std::shared_ptr<OpHandle> hb;
    ASSERT_TRUE(w.engine(r).submit(std::move(b), &hb).is_ok());

    // Reduce-scatter with a postscale: this rank's rows of the sum.
    void* send = w.upload(r, floats(mine));
    const Range part = partition(rows, n, r);
    void* recv = w.upload(r, Bytes(part.count * row * sizeof(float), 0xEE));
    Submission rs = one_tensor_submission("reduce_scatter", OpKind::kReduceScatter, shape, {send}, {recv});
    rs.request.postscale = 0.5;
    std::shared_ptr<OpHandle> hr;
    ASSERT_TRUE(w.engine(r).submit(std::move(rs), &hr).is_ok());

    Status s = wait(hb);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    s = wait(hr);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    const std::vector<float> got = as_floats(GpuEngineWorld::download(buf, mine.size() * sizeof(float)));
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], value(root, 0, i)) << "broadcast element " << i;
    const std::vector<float> part_got = as_floats(GpuEngineWorld::download(recv, part.count * row * sizeof(float)));
    for (size_t i = 0; i < part_got.size(); ++i) {
      float want = 0;
      for (int q = 0; q < n; ++q) want += value(q, 0, part.offset * row + i);
      ASSERT_EQ(part_got[i], want * 0.5f) << "reduce-scatter element " << i << " on rank " << r;
    }
    w.device(r).release(buf);
    w.device(r).release(send);
    w.device(r).release(recv);
  });
}

// The output, sized by the negotiation, in GPU memory the handle keeps,
// complete once the handle is.
Bytes device_output(GpuEngineWorld& w, int r, const OpHandle& h) {
  EXPECT_NE(h.device_output, nullptr);
  EXPECT_TRUE(h.output.empty());
  if (!h.device_output) return {};
  EXPECT_EQ(w.device(r).classify(h.device_output.get()), MemoryKind::kThisDevice);
  return GpuEngineWorld::download(h.device_output.get(), h.device_output_bytes);
}

TEST_P(GpuEngine, AllgatherAndAlltoallGatherIntoGpuMemoryTheHandleKeeps) {
  GpuEngineWorld w(GetParam());
  const int n = w.size();
  const int64_t row = 129;
  w.run([&](int r) {
    // Allgather: rank r gives r + 1 rows.
    std::vector<float> mine(static_cast<size_t>((r + 1) * row));
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = value(r, 1, i);
    void* send = w.upload(r, floats(mine));
    Submission g = one_tensor_submission("gather", OpKind::kAllgather, {r + 1, row}, {send}, {});
    std::shared_ptr<OpHandle> hg;
    ASSERT_TRUE(w.engine(r).submit(std::move(g), &hg).is_ok());

    // Alltoall: rank r sends q + 1 rows of its values to rank q.
    std::vector<int64_t> splits;
    int64_t rows = 0;
    for (int q = 0; q < n; ++q) rows += splits.emplace_back(q + 1);
    std::vector<float> out(static_cast<size_t>(rows * row));
    for (size_t i = 0; i < out.size(); ++i) out[i] = value(r, 2, i);
    void* a_send = w.upload(r, floats(out));
    Submission a = one_tensor_submission("alltoall", OpKind::kAlltoall, {rows, row}, {a_send}, {});
    a.request.splits = splits;
    std::shared_ptr<OpHandle> ha;
    ASSERT_TRUE(w.engine(r).submit(std::move(a), &ha).is_ok());

    Status s = wait(hg);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    s = wait(ha);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    std::vector<float> gathered_want;
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < static_cast<size_t>((q + 1) * row); ++i) gathered_want.push_back(value(q, 1, i));
    }
    EXPECT_EQ(as_floats(device_output(w, r, *hg)), gathered_want) << "rank " << r;
    // From each rank q: its rows [sum of splits before r, + r + 1).
    std::vector<float> received_want;
    const size_t first_row = static_cast<size_t>(r * (r + 1) / 2);
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < static_cast<size_t>((r + 1) * row); ++i) {
        received_want.push_back(value(q, 2, first_row * row + i));
      }
    }
    EXPECT_EQ(as_floats(device_output(w, r, *ha)), received_want) << "rank " << r;
    EXPECT_EQ(ha->output_rows, std::vector<int64_t>(n, r + 1));
    w.device(r).release(send);
    w.device(r).release(a_send);
  });
}

TEST_P(GpuEngine, ARankThatJoinedTakesPartFromGpuMemoryOfItsOwn) {
  GpuEngineWorld w(GetParam());
  const int n = w.size();
  const size_t count = 5000;
  w.run([&](int r) {
    if (r == 0) {  // no data: joins at once, and contributes the identity
      std::shared_ptr<OpHandle> j;
      ASSERT_TRUE(w.engine(r).join(&j).is_ok());
      Status s = wait(j);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      return;
    }
    for (int step = 0; step < 3; ++step) {
      std::vector<float> in(count);
      for (size_t i = 0; i < count; ++i) in[i] = value(r, step, i);
      void* buf = w.upload(r, floats(in));
      std::shared_ptr<OpHandle> h;
      ASSERT_TRUE(w.engine(r).submit(allreduce_submission("step" + std::to_string(step), buf, buf, count), &h).is_ok());
      Status s = wait(h);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      const std::vector<float> got = as_floats(GpuEngineWorld::download(buf, count * sizeof(float)));
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int q = 1; q < n; ++q) want += value(q, step, i);
        ASSERT_EQ(got[i], want) << "step " << step << " element " << i << " on rank " << r;
      }
      w.device(r).release(buf);
    }
    std::shared_ptr<OpHandle> j;
    ASSERT_TRUE(w.engine(r).join(&j).is_ok());
    Status s = wait(j);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  });
}

INSTANTIATE_TEST_SUITE_P(Modes, GpuEngine,
                         ::testing::Values(Mode{2, true}, Mode{3, true}, Mode{3, false}), mode_name);

TEST(GpuEngineRefusals, WhatGpuMemoryCannotTakeIsRefusedSayingWhy) {
  GpuEngineWorld w(Mode{1, true});
  Engine& e = w.engine(0);
  void* a = w.upload(0, Bytes(64, 0));
  void* b = w.upload(0, Bytes(64, 0));
  std::vector<float> host(16);
  std::shared_ptr<OpHandle> h;

  Submission wire = allreduce_submission("wire", a, b, 16);
  wire.request.wire = static_cast<int>(WireFormat::kBf16);
  Status s = e.submit(wire, &h);
  EXPECT_EQ(s.code(), Code::kUnsupported) << s.to_string();
  EXPECT_NE(s.message().find("wire format"), std::string::npos) << s.message();

  Submission rs = one_tensor_submission("rs", OpKind::kReduceScatter, {16}, {a}, {b});
  rs.request.prescale = 2;
  s = e.submit(rs, &h);
  EXPECT_EQ(s.code(), Code::kUnsupported) << s.to_string();
  EXPECT_NE(s.message().find("prescale"), std::string::npos) << s.message();

  s = e.submit(allreduce_submission("mixed", a, host.data(), 16), &h);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("'mixed'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("host memory"), std::string::npos) << s.message();

  // Host buffers still go the host way, and GPU ones the GPU's.
  s = e.submit(allreduce_submission("host", host.data(), host.data(), 16), &h);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(wait(h).is_ok());
  s = e.submit(allreduce_submission("gpu", a, b, 16), &h);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(wait(h).is_ok());
  w.device(0).release(a);
  w.device(0).release(b);
}

TEST(GpuEngineRefusals, ARankWhoseTensorIsElsewhereFailsTheNameOnEveryRankNamingTheMemory) {
  GpuEngineWorld w(Mode{2, false});
  w.run([&](int r) {
    std::vector<float> host(32, 1.0f);
    void* dev = w.upload(r, floats(host));
    void* buf = r == 0 ? dev : static_cast<void*>(host.data());
    std::shared_ptr<OpHandle> h;
    ASSERT_TRUE(w.engine(r).submit(allreduce_submission("where", buf, buf, 32), &h).is_ok());
    Status s = wait(h);
    EXPECT_EQ(s.code(), Code::kMismatch) << s.to_string();
    EXPECT_NE(s.message().find("memory"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("GPU"), std::string::npos) << s.message();
    // The engine goes on: the same name on GPU memory everywhere runs.
    ASSERT_TRUE(w.engine(r).submit(allreduce_submission("where", dev, dev, 32), &h).is_ok());
    s = wait(h);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(as_floats(GpuEngineWorld::download(dev, 32 * sizeof(float)))[0], 2.0f);
    w.device(r).release(dev);
  });
}

}  // namespace
}  // namespace kolo
