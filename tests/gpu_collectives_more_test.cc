// The rooted and "v" collectives (collectives_more_test's) on GPU buffers,
// without a GPU: each rank (a thread) has an emulated GPU of its own
// (gpu/emulated_device.h), over CUDA IPC and over pinned-host staging;
// and asynchronous calls on device buffers.
// Results are compared byte for byte with tests/reference.h or the inputs.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/emulated_device.h"
#include "tests/reference.h"
#include "tests/thread_world.h"

namespace kolo {
namespace {

using Bytes = std::vector<unsigned char>;
using Counts = std::vector<size_t>;

struct Mode {
  int ranks;
  bool ipc;
  int lag_us;
};

class GpuWorld {
 public:
  explicit GpuWorld(const Mode& m) {
    for (int r = 0; r < m.ranks; ++r) devices_.push_back(std::make_unique<EmulatedDevice>(m.lag_us));
    world_ = std::make_unique<ThreadWorld>(m.ranks, [&](int r) {
      Config c = test_config();
      c.transport = "tcp";
      c.cuda_ipc = m.ipc;
      c.device = devices_[r].get();
      return c;
    });
  }
  ThreadWorld& world() { return *world_; }
  Communicator& comm(int r) { return world_->comm(r); }
  int size() const { return world_->size(); }
  void* upload(int r, const Bytes& bytes) {
    void* p = devices_[r]->allocate(std::max<size_t>(bytes.size(), 1));
    if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
    return p;
  }
  Bytes download(const void* p, size_t bytes) {
    Bytes b(bytes);
    if (bytes) std::memcpy(b.data(), p, bytes);
    return b;
  }
  void release(int r, void* p) { devices_[r]->release(p); }

 private:
  std::vector<std::unique_ptr<EmulatedDevice>> devices_;
  std::unique_ptr<ThreadWorld> world_;
};

Bytes pattern(int from, int to, size_t bytes) {
  Bytes b(bytes);
  for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<unsigned char>(from * 37 + to * 11 + i * 7 + 1);
  return b;
}

// Uneven, with a zero, in reverse rank order with gaps.
Counts uneven(int n) {
  Counts c(n);
  for (int q = 0; q < n; ++q) c[q] = q == 1 ? 0 : 1500 + q * 37;
  return c;
}
Counts scattered(const Counts& counts, size_t* extent) {
  Counts d(counts.size());
  size_t at = 0;
  for (size_t q = counts.size(); q-- > 0;) {
    at += 3;
    d[q] = at;
    at += counts[q];
  }
  *extent = at;
  return d;
}

class GpuMore : public ::testing::TestWithParam<Mode> {};

constexpr DataType kF = DataType::kFloat32;
constexpr DataType kFi = kF;

TEST_P(GpuMore, ReduceEveryOp) {
  GpuWorld g(GetParam());
  const int n = g.size();
  const size_t count = 5003, es = 4;
  for (int o = 0; o < kNumReduceOps; ++o) {
    const ReduceOp op = static_cast<ReduceOp>(o);
    const int root = o % 2 ? n - 1 : 0;
    Bytes want(count * es);
    for (size_t i = 0; i < count; ++i) ref::expected(kF, op, n, i, want.data(), i);
    g.world().run([&](int r) {
      Bytes in(count * es);
      for (size_t i = 0; i < count; ++i) ref::store(kF, in.data(), i, ref::input_value(r, i, op, true));
      void* send = g.upload(r, in);
      void* recv = r == root ? g.upload(r, Bytes(count * es, 0xAB)) : nullptr;
      Status s = g.comm(r).reduce(send, recv, count, kFi, static_cast<ReduceOp>(o), root);
      ASSERT_TRUE(s.is_ok()) << op_name(op) << " rank " << r << ": " << s.to_string();
      if (r == root) {
        EXPECT_EQ(g.download(recv, want.size()), want) << op_name(op);
        g.release(r, recv);
      }
      g.release(r, send);
    });
  }
}

TEST_P(GpuMore, GatherScatterAllgathervAlltoallv) {
  GpuWorld g(GetParam());
  const int n = g.size();
  const size_t es = 4;
  const Counts counts = uneven(n);
  size_t extent = 0;
  const Counts displs = scattered(counts, &extent);
  const int root = n - 1;
  g.world().run([&](int r) {
    // gatherv to root.
    void* send = g.upload(r, pattern(r, root, counts[r] * es));
    void* recv = g.upload(r, Bytes(extent * es, 0xEE));
    Status s = g.comm(r).gatherv(send, counts[r], r == root ? recv : nullptr, counts, displs, kFi, root);
    ASSERT_TRUE(s.is_ok()) << "gatherv rank " << r << ": " << s.to_string();
    if (r == root) {
      const Bytes got = g.download(recv, extent * es);
      for (int q = 0; q < n; ++q) {
        const Bytes b = pattern(q, root, counts[q] * es);
        EXPECT_EQ(Bytes(got.begin() + displs[q] * es, got.begin() + displs[q] * es + b.size()), b) << "gatherv " << q;
      }
    }
    // scatterv back out of the same layout: rank q gets root's block q.
    void* mine = g.upload(r, Bytes(counts[r] * es, 0xCC));
    s = g.comm(r).scatterv(r == root ? recv : nullptr, counts, displs, mine, counts[r], kFi, root);
    ASSERT_TRUE(s.is_ok()) << "scatterv rank " << r << ": " << s.to_string();
    EXPECT_EQ(g.download(mine, counts[r] * es), pattern(r, root, counts[r] * es)) << "scatterv rank " << r;
    // allgatherv into the scattered layout on every rank.
    s = g.comm(r).allgatherv(send, counts[r], recv, counts, displs, kFi);
    ASSERT_TRUE(s.is_ok()) << "allgatherv rank " << r << ": " << s.to_string();
    const Bytes all = g.download(recv, extent * es);
    for (int q = 0; q < n; ++q) {
      const Bytes b = pattern(q, root, counts[q] * es);
      EXPECT_EQ(Bytes(all.begin() + displs[q] * es, all.begin() + displs[q] * es + b.size()), b) << "allgatherv " << q;
    }
    // alltoallv: rank r sends (r + q) % 3 * 500 elements to q, packed.
    Counts sc(n), rc(n), sd(n), rd(n);
    size_t st = 0, rt = 0;
    for (int q = 0; q < n; ++q) {
      sc[q] = static_cast<size_t>((r + q) % 3) * 500;
      rc[q] = static_cast<size_t>((q + r) % 3) * 500;
      sd[q] = st;
      rd[q] = rt;
      st += sc[q];
      rt += rc[q];
    }
    Bytes out(st * es);
    for (int q = 0; q < n; ++q) {
      const Bytes b = pattern(r, q, sc[q] * es);
      if (!b.empty()) std::memcpy(out.data() + sd[q] * es, b.data(), b.size());
    }
    void* a_send = g.upload(r, out);
    void* a_recv = g.upload(r, Bytes(rt * es, 0xEE));
    s = g.comm(r).alltoallv(a_send, sc, sd, a_recv, rc, rd, kFi);
    ASSERT_TRUE(s.is_ok()) << "alltoallv rank " << r << ": " << s.to_string();
    const Bytes got = g.download(a_recv, rt * es);
    for (int q = 0; q < n; ++q) {
      const Bytes b = pattern(q, r, rc[q] * es);
      EXPECT_EQ(Bytes(got.begin() + rd[q] * es, got.begin() + rd[q] * es + b.size()), b) << "alltoallv from " << q;
    }
    for (void* p : {send, recv, mine, a_send, a_recv}) g.release(r, p);
  });
}

TEST_P(GpuMore, ReduceScattervUneven) {
  GpuWorld g(GetParam());
  const int n = g.size();
  const Counts counts = uneven(n);
  size_t total = 0;
  Counts off(n);
  for (int q = 0; q < n; ++q) {
    off[q] = total;
    total += counts[q];
  }
  const ReduceOp op = ReduceOp::kAvg;
  Bytes want(total * 4);
  for (size_t i = 0; i < total; ++i) ref::expected(kF, op, n, i, want.data(), i);
  g.world().run([&](int r) {
    Bytes in(total * 4);
    for (size_t i = 0; i < total; ++i) ref::store(kF, in.data(), i, ref::input_value(r, i, op, true));
    void* send = g.upload(r, in);
    void* recv = g.upload(r, Bytes(counts[r] * 4, 0xCD));
    Status s = g.comm(r).reduce_scatterv(send, recv, counts, kFi, op);
    ASSERT_TRUE(s.is_ok()) << "rank " << r << ": " << s.to_string();
    EXPECT_EQ(g.download(recv, counts[r] * 4),
              Bytes(want.begin() + off[r] * 4, want.begin() + (off[r] + counts[r]) * 4))
        << "rank " << r;
    g.release(r, send);
    g.release(r, recv);
  });
}

// kolo_*_async on device buffers: queued on kolo's thread after the work
// the default stream had when called, every op's allreduce and reduce in
// flight at once, then waited for and checked.
TEST_P(GpuMore, AsyncCallsOnDeviceBuffers) {
  GpuWorld g(GetParam());
  const int n = g.size();
  const size_t count = 3001, es = 4;
  g.world().run([&](int r) {
    std::vector<void*> sends, alls, roots;
    std::vector<std::shared_ptr<OpHandle>> handles;
    for (int o = 0; o < kNumReduceOps; ++o) {
      Bytes in(count * es);
      for (size_t i = 0; i < count; ++i) {
        ref::store(kF, in.data(), i, ref::input_value(r, i, static_cast<ReduceOp>(o), true));
      }
      sends.push_back(g.upload(r, in));
      alls.push_back(g.upload(r, Bytes(count * es, 0xAB)));
      roots.push_back(r == 0 ? g.upload(r, Bytes(count * es, 0xAB)) : nullptr);
      for (void* out : {alls.back(), roots.back()}) {
        Launch launch;
        launch.done.push_back(std::make_shared<OpHandle>());
        handles.push_back(launch.done.back());
        Status s = out == alls.back() ? g.comm(r).allreduce(sends.back(), out, count, kFi, static_cast<ReduceOp>(o), launch)
                                      : g.comm(r).reduce(sends.back(), out, count, kFi, static_cast<ReduceOp>(o), 0, launch);
        ASSERT_TRUE(s.is_ok()) << "rank " << r << ": " << s.to_string();
      }
    }
    for (const auto& h : handles) {
      Status s = h->wait(Deadline::after_seconds(60));
      ASSERT_TRUE(s.is_ok()) << "rank " << r << ": " << s.to_string();
    }
    for (int o = 0; o < kNumReduceOps; ++o) {
      Bytes want(count * es);
      for (size_t i = 0; i < count; ++i) ref::expected(kF, static_cast<ReduceOp>(o), n, i, want.data(), i);
      EXPECT_EQ(g.download(alls[o], want.size()), want) << "allreduce " << op_name(static_cast<ReduceOp>(o));
      if (r == 0) {
        EXPECT_EQ(g.download(roots[o], want.size()), want) << "reduce " << op_name(static_cast<ReduceOp>(o));
        g.release(r, roots[o]);
      }
      g.release(r, alls[o]);
      g.release(r, sends[o]);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Modes, GpuMore,
                         ::testing::Values(Mode{3, true, 0}, Mode{3, false, 0}, Mode{2, false, 20}, Mode{1, false, 0}),
                         [](const ::testing::TestParamInfo<Mode>& i) {
                           return "N" + std::to_string(i.param.ranks) + (i.param.ipc ? "_ipc" : "_staged") + "_lag" +
                                  std::to_string(i.param.lag_us);
                         });

}  // namespace
}  // namespace kolo
