// The collectives on GPU buffers, without a GPU: each rank (a thread) gets
// an emulated GPU of its own (gpu/emulated_device.h), whose streams run
// their work later, on threads of their own. Every collective and dtype x
// op runs over both device transports (CUDA IPC between the ranks, which
// share a node here, and pinned-host staging over TCP), blocking and
// enqueued on a caller's stream, and every rank's result is compared byte
// for byte with tests/reference.h. Also: mixing host and device buffers,
// a failing GPU, stream ordering, and a staged rank interoperating with a
// host-buffer rank.
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/emulated_device.h"
#include "tests/reference.h"
#include "tests/thread_world.h"

namespace kolo {
namespace {

using Bytes = std::vector<unsigned char>;

struct Mode {
  int ranks;
  bool ipc;    // CUDA IPC between the ranks, else staging over TCP
  int lag_us;  // delay of every emulated GPU operation
  bool split = false;  // the ranks a split of a world one larger (ThreadWorld::AsSplit)
  DeviceWideCalls device_wide = DeviceWideCalls::kFailWhereTheyDeadlock;
};

std::string mode_name(const ::testing::TestParamInfo<Mode>& info) {
  return "N" + std::to_string(info.param.ranks) + (info.param.ipc ? "_ipc" : "_staged") + "_lag" +
         std::to_string(info.param.lag_us) + (info.param.split ? "_split" : "");
}

// A world whose ranks each have an emulated GPU. The devices outlive the
// communicators (declared first).
class GpuWorld {
 public:
  // small_allreduce_bytes: recursive doubling up to there (0: the ring always).
  explicit GpuWorld(const Mode& m, int64_t small_allreduce_bytes = 0) {
    const int world_ranks = m.split ? m.ranks + 1 : m.ranks;
    for (int r = 0; r < world_ranks; ++r) devices_.push_back(std::make_unique<EmulatedDevice>(m.lag_us, m.device_wide));
    const auto config_of = [&](int w) {
      Config c = test_config(4096, small_allreduce_bytes);
      c.transport = "tcp";
      c.cuda_ipc = m.ipc;
      c.device = devices_[w].get();
      return c;
    };
    if (m.split) {
      world_ = std::make_unique<ThreadWorld>(m.ranks, config_of, ThreadWorld::AsSplit{});
      split_ = true;
    } else {
      world_ = std::make_unique<ThreadWorld>(m.ranks, config_of);
    }
  }
  ThreadWorld& world() { return *world_; }
  // Rank r's GPU (a split's rank r is world rank size - 1 - r).
  EmulatedDevice& device(int r) { return *devices_[split_ ? size() - 1 - r : r]; }
  Communicator& comm(int r) { return world_->comm(r); }
  int size() const { return world_->size(); }

  // Device memory holding `bytes` (copied in synchronously, like cudaMemcpy).
  void* upload(int r, const Bytes& bytes) {
    void* p = device(r).allocate(bytes.size());
    if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
    return p;
  }
  Bytes download(const void* p, size_t bytes) {
    Bytes b(bytes);
    if (bytes) std::memcpy(b.data(), p, bytes);
    return b;
  }

 private:
  std::vector<std::unique_ptr<EmulatedDevice>> devices_;
  std::unique_ptr<ThreadWorld> world_;
  bool split_ = false;
};

class GpuCollectives : public ::testing::TestWithParam<Mode> {};

std::string label(DataType d, ReduceOp op, size_t count) {
  return std::string(dtype_name(d)) + " " + op_name(op) + " count=" + std::to_string(count);
}

TEST_P(GpuCollectives, AllreduceEveryDtypeAndOp) {
  GpuWorld g(GetParam());
  const int n = g.size();
  for (int di = 0; di < kNumDataTypes; ++di) {
    for (int oi = 0; oi < kNumReduceOps; ++oi) {
      const auto d = static_cast<DataType>(di);
      const auto op = static_cast<ReduceOp>(oi);
      for (size_t count : {size_t{0}, size_t{1}, static_cast<size_t>(n + 1), size_t{5003}}) {
        const Bytes want = ref::expected_buffer(d, op, n, count);
        const bool in_place = count == 5003;
        g.world().run([&](int r) {
          const Bytes in = ref::input_buffer(d, op, r, count);
          void* send = g.upload(r, in);
          void* recv = in_place ? send : g.upload(r, Bytes(in.size(), 0xAB));
          Status s = g.comm(r).allreduce(send, recv, count, static_cast<DataType>(di), static_cast<ReduceOp>(oi));
          ASSERT_TRUE(s.is_ok()) << label(d, op, count) << " rank " << r << ": " << s.to_string();
          EXPECT_EQ(g.download(recv, want.size()), want) << label(d, op, count) << " rank " << r;
          g.device(r).release(send);
          if (!in_place) g.device(r).release(recv);
        });
      }
    }
  }
}

TEST_P(GpuCollectives, SmallMessageAlgorithmToo) {
  // Recursive doubling (the default up to 64 KiB) on device buffers.
  GpuWorld g(GetParam(), 64 << 10);
  const Bytes want = ref::expected_buffer(DataType::kFloat32, ReduceOp::kAvg, g.size(), 777);
  g.world().run([&](int r) {
    void* buf = g.upload(r, ref::input_buffer(DataType::kFloat32, ReduceOp::kAvg, r, 777));
    Status s = g.comm(r).allreduce(buf, buf, 777, DataType::kFloat32, ReduceOp::kAvg);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(std::memcmp(buf, want.data(), want.size()), 0) << "rank " << r;
    g.device(r).release(buf);
  });
}

TEST_P(GpuCollectives, ReduceScatterAllgatherBroadcast) {
  GpuWorld g(GetParam());
  const int n = g.size();
  const auto d = DataType::kBfloat16;
  const size_t es = dtype_size(d);
  const size_t block = 3001;
  const Bytes want_sum = ref::expected_buffer(d, ReduceOp::kSum, n, block * n);
  g.world().run([&](int r) {
    // reduce-scatter: rank r gets block r of the sum.
    void* send = g.upload(r, ref::input_buffer(d, ReduceOp::kSum, r, block * n));
    void* recv = g.upload(r, Bytes(block * es, 0));
    Status s = g.comm(r).reduce_scatter(send, recv, block, d, ReduceOp::kSum);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(std::memcmp(recv, want_sum.data() + r * block * es, block * es), 0) << "reduce_scatter rank " << r;

    // allgather of each rank's block, in place: the whole sum everywhere.
    void* all = g.upload(r, Bytes(block * n * es, 0));
    std::memcpy(static_cast<unsigned char*>(all) + r * block * es, recv, block * es);
    s = g.comm(r).allgather(static_cast<unsigned char*>(all) + r * block * es, all, block, d);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(std::memcmp(all, want_sum.data(), want_sum.size()), 0) << "allgather rank " << r;

    // broadcast from the last rank.
    const Bytes root_data = ref::input_buffer(d, ReduceOp::kSum, n - 1, 9999);
    void* buf = g.upload(r, r == n - 1 ? root_data : Bytes(root_data.size(), 0));
    s = g.comm(r).broadcast(buf, 9999, d, n - 1);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(std::memcmp(buf, root_data.data(), root_data.size()), 0) << "broadcast rank " << r;
    for (void* p : {send, recv, all, buf}) g.device(r).release(p);
  });
}

TEST_P(GpuCollectives, OnStreamReturnsAtOnceAndOrdersTheStream) {
  GpuWorld g(GetParam());
  const int n = g.size();
  const auto d = DataType::kFloat32;
  const size_t count = 20000;
  const Bytes want = ref::expected_buffer(d, ReduceOp::kSum, n, count);
  g.world().run([&](int r) {
    void* stream = g.device(r).create_stream();
    const Bytes in = ref::input_buffer(d, ReduceOp::kSum, r, count);
    void* buf = g.upload(r, Bytes(in.size(), 0));
    std::atomic<bool> produced{false};
    // The caller's "kernel" that writes the input runs late on its stream:
    // the collective must wait for it.
    g.device(r).run_on(stream, [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::memcpy(buf, in.data(), in.size());
      produced = true;
    });
    const auto start = std::chrono::steady_clock::now();
    Status s = g.comm(r).allreduce(buf, buf, count, d, ReduceOp::kSum,
                                   Launch::on(stream));
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_LT(took, std::chrono::milliseconds(150)) << "an enqueued collective must not wait for its stream";
    EXPECT_FALSE(produced.load()) << "the call returned after the stream's earlier work: it did not return at once";
    // The caller's next "kernel" reads the result: it must see it.
    Bytes seen;
    g.device(r).run_on(stream, [&] { seen = g.download(buf, want.size()); });
    ASSERT_TRUE(g.device(r).synchronize_stream(stream, Deadline::after_seconds(60)));
    EXPECT_EQ(seen, want) << "rank " << r;
    Status health = g.comm(r).async_error();
    EXPECT_TRUE(health.is_ok()) << health.to_string();
    g.device(r).release(buf);
  });
}

TEST_P(GpuCollectives, StreamAndBlockingCallsKeepTheirOrder) {
  GpuWorld g(GetParam());
  const int n = g.size();
  const auto d = DataType::kInt32;
  g.world().run([&](int r) {
    void* stream = g.device(r).create_stream();
    const size_t count = 3000;
    std::vector<void*> bufs;
    // Three on the stream, then one blocking: all four agree across ranks.
    for (int k = 0; k < 4; ++k) {
      Bytes in(count * 4);
      for (size_t i = 0; i < count; ++i) {
        const int32_t v = (r + 1) * (k + 1) + static_cast<int32_t>(i);
        std::memcpy(in.data() + i * 4, &v, 4);
      }
      bufs.push_back(g.upload(r, in));
      Launch on = k < 3 ? Launch::on(stream) : Launch{};
      Status s = g.comm(r).allreduce(bufs[k], bufs[k], count, d, ReduceOp::kSum, on);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
    }
    ASSERT_TRUE(g.device(r).synchronize_stream(stream, Deadline::after_seconds(60)));
    for (int k = 0; k < 4; ++k) {
      for (size_t i = 0; i < count; i += 499) {
        int32_t got;
        std::memcpy(&got, static_cast<unsigned char*>(bufs[k]) + i * 4, 4);
        const int32_t want = (k + 1) * n * (n + 1) / 2 + n * static_cast<int32_t>(i);
        ASSERT_EQ(got, want) << "call " << k << " element " << i << " rank " << r;
      }
      g.device(r).release(bufs[k]);
    }
  });
}

// The sequence that hung tests/gpu's worker on an H100 (a blocking
// zero-byte allreduce, then its first stream-ordered call), and on past
// it: stream allreduces of 1, 1031 and 2^20 + 3 elements over several
// dtypes and ops, every other stream-ordered collective, a group of sends
// and receives, and an asynchronous call; staged through host memory, and
// over CUDA IPC (whose first message into a peer's buffer goes staged, as
// opening that buffer would wait for the device). The emulated GPUs are strict:
// a call that waits for the whole device, made by kolo's thread while a
// caller's stream is held (an allocation, a free, a kernel's first load),
// fails at once and is listed. There must be none, and every result must
// be the reference's.
TEST(GpuStreams, TheSequenceThatHungRunsWithNothingThatWaitsForTheDeviceInAHold) {
  for (const Mode& m : {Mode{2, false, 0}, Mode{3, false, 50}, Mode{2, true, 0}, Mode{3, true, 50},
                        Mode{2, false, 0, true}, Mode{3, true, 0, true}}) {
    SCOPED_TRACE(mode_name(::testing::TestParamInfo<Mode>(m, 0)));
    GpuWorld g(m);
    const int n = g.size();
    g.world().run([&](int r) {
      void* stream = g.device(r).create_stream();
      void* nothing = g.upload(r, Bytes(4, 0));
      ASSERT_TRUE(g.comm(r).allreduce(nothing, nothing, 0, DataType::kFloat32, ReduceOp::kSum).is_ok());
      struct Call {
        DataType d;
        ReduceOp op;
        size_t count;
        void* buf;
        Bytes want;
      };
      std::vector<Call> calls;
      for (size_t count : {size_t{1}, size_t{1031}, (size_t{1} << 20) + 3}) {
        for (auto [d, op] : {std::pair{DataType::kFloat32, ReduceOp::kSum}, std::pair{DataType::kInt32, ReduceOp::kMax},
                             std::pair{DataType::kFloat16, ReduceOp::kAvg}, std::pair{DataType::kInt64, ReduceOp::kProd}}) {
          if (count > 2000 && d != DataType::kFloat32) continue;  // the large size once
          calls.push_back(
              {d, op, count, g.upload(r, ref::input_buffer(d, op, r, count)), ref::expected_buffer(d, op, n, count)});
          Status s = g.comm(r).allreduce(calls.back().buf, calls.back().buf, count, d, op, Launch::on(stream));
          ASSERT_TRUE(s.is_ok()) << label(d, op, count) << ": " << s.to_string();
        }
      }
      // The other stream-ordered collectives, each against what every
      // rank's inputs make: broadcast from the last rank, allgather and
      // reduce-scatter of int32 rows.
      const size_t rows = 777;
      Bytes mine(rows * 4), all(rows * 4 * n);
      for (size_t i = 0; i < rows; ++i) {
        const int32_t v = r * 1000 + static_cast<int32_t>(i);
        std::memcpy(mine.data() + i * 4, &v, 4);
        for (int q = 0; q < n; ++q) {
          const int32_t w = q * 1000 + static_cast<int32_t>(i);
          std::memcpy(all.data() + (q * rows + i) * 4, &w, 4);
        }
      }
      void* bcast = g.upload(r, mine);
      ASSERT_TRUE(g.comm(r).broadcast(bcast, rows, DataType::kInt32, n - 1, Launch::on(stream)).is_ok());
      void* gather_in = g.upload(r, mine);
      void* gathered = g.upload(r, Bytes(all.size(), 0));
      ASSERT_TRUE(g.comm(r).allgather(gather_in, gathered, rows, DataType::kInt32, Launch::on(stream)).is_ok());
      void* scatter_in = g.upload(r, all);  // the same on every rank: rank r gets n times block r
      void* scattered = g.upload(r, Bytes(rows * 4, 0));
      ASSERT_TRUE(
          g.comm(r).reduce_scatter(scatter_in, scattered, rows, DataType::kInt32, ReduceOp::kSum, Launch::on(stream)).is_ok());
      // Two buffers in one allreduce, and an alltoall of int32 blocks: rank
      // r's block for q holds r * 100 + q.
      void* many_a = g.upload(r, ref::input_buffer(DataType::kFloat32, ReduceOp::kSum, r, 1031));
      void* many_b = g.upload(r, ref::input_buffer(DataType::kFloat32, ReduceOp::kSum, r, 5));
      ASSERT_TRUE(g.comm(r)
                      .allreduce_many({{many_a, many_a, 1031}, {many_b, many_b, 5}}, DataType::kFloat32, ReduceOp::kSum,
                                      Launch::on(stream))
                      .is_ok());
      const size_t per_peer = 333;
      Bytes to_each(per_peer * 4 * n), from_each(per_peer * 4 * n);
      for (int q = 0; q < n; ++q) {
        for (size_t i = 0; i < per_peer; ++i) {
          const int32_t out_v = r * 100 + q, in_v = q * 100 + r;
          std::memcpy(to_each.data() + (q * per_peer + i) * 4, &out_v, 4);
          std::memcpy(from_each.data() + (q * per_peer + i) * 4, &in_v, 4);
        }
      }
      void* a2a_in = g.upload(r, to_each);
      void* a2a_out = g.upload(r, Bytes(to_each.size(), 0));
      const std::vector<size_t> per_peer_counts(n, per_peer);
      ASSERT_TRUE(g.comm(r)
                      .alltoallv(a2a_in, per_peer_counts, {}, a2a_out, per_peer_counts, {}, DataType::kInt32,
                                 Launch::on(stream))
                      .is_ok());
      // A group of sends and receives on the stream (a shift around the
      // ring), messages far larger than a staging slot.
      const size_t shift = 200003;
      Bytes out_words(shift * 4), from_prev(shift * 4);
      const int prev = (r + n - 1) % n;
      for (size_t i = 0; i < shift; ++i) {
        const int32_t mine_i = r * 7 + static_cast<int32_t>(i % 1000), theirs_i = prev * 7 + static_cast<int32_t>(i % 1000);
        std::memcpy(out_words.data() + i * 4, &mine_i, 4);
        std::memcpy(from_prev.data() + i * 4, &theirs_i, 4);
      }
      void* p2p_out = g.upload(r, out_words);
      void* p2p_in = g.upload(r, Bytes(shift * 4, 0));
      ASSERT_TRUE(g.comm(r)
                      .point_to_point({{PointToPoint::kSend, (r + 1) % n, p2p_out, shift, DataType::kInt32},
                                       {PointToPoint::kRecv, prev, p2p_in, shift, DataType::kInt32}},
                                      Launch::on(stream))
                      .is_ok());
      // And one asynchronous call on device buffers.
      void* async_buf = g.upload(r, ref::input_buffer(DataType::kFloat32, ReduceOp::kSum, r, 4099));
      Launch later;
      later.done.push_back(std::make_shared<OpHandle>());
      ASSERT_TRUE(g.comm(r).allreduce(async_buf, async_buf, 4099, DataType::kFloat32, ReduceOp::kSum, later).is_ok());
      ASSERT_TRUE(later.done[0]->wait(Deadline::after_seconds(60)).is_ok());
      ASSERT_TRUE(g.device(r).synchronize_stream(stream, Deadline::after_seconds(60)));
      Status health = g.comm(r).async_error();
      ASSERT_TRUE(health.is_ok()) << health.to_string();
      for (const Call& c : calls) {
        EXPECT_EQ(g.download(c.buf, c.want.size()), c.want) << label(c.d, c.op, c.count) << " rank " << r;
        g.device(r).release(c.buf);
      }
      Bytes from_last(rows * 4);
      for (size_t i = 0; i < rows; ++i) {
        const int32_t v = (n - 1) * 1000 + static_cast<int32_t>(i);
        std::memcpy(from_last.data() + i * 4, &v, 4);
      }
      EXPECT_EQ(g.download(bcast, rows * 4), from_last) << "broadcast, rank " << r;
      EXPECT_EQ(g.download(gathered, all.size()), all) << "allgather, rank " << r;
      Bytes block(all.begin() + r * rows * 4, all.begin() + (r + 1) * rows * 4);
      for (size_t i = 0; i < rows; ++i) {
        int32_t v;
        std::memcpy(&v, block.data() + i * 4, 4);
        v *= n;
        std::memcpy(block.data() + i * 4, &v, 4);
      }
      EXPECT_EQ(g.download(scattered, rows * 4), block) << "reduce_scatter, rank " << r;
      EXPECT_EQ(g.download(async_buf, 4099 * 4), ref::expected_buffer(DataType::kFloat32, ReduceOp::kSum, n, 4099))
          << "asynchronous allreduce, rank " << r;
      EXPECT_EQ(g.download(p2p_in, shift * 4), from_prev) << "point-to-point, rank " << r;
      EXPECT_EQ(g.download(many_a, 1031 * 4), ref::expected_buffer(DataType::kFloat32, ReduceOp::kSum, n, 1031))
          << "allreduce_many's first buffer, rank " << r;
      EXPECT_EQ(g.download(many_b, 5 * 4), ref::expected_buffer(DataType::kFloat32, ReduceOp::kSum, n, 5))
          << "allreduce_many's second buffer, rank " << r;
      EXPECT_EQ(g.download(a2a_out, from_each.size()), from_each) << "alltoall, rank " << r;
      // Over IPC the first calls found no peer's buffer open and staged
      // those messages; a call repeated on the same buffers finds them open
      // (opened before its hold), so nothing more goes staged.
      if (m.ipc) EXPECT_GT(g.device(r).imports_deferred(), 0u) << "rank " << r;
      for (int again = 0; again < 2; ++again) {
        const size_t deferred = g.device(r).imports_deferred();
        ASSERT_TRUE(g.comm(r)
                        .allreduce(gather_in, gather_in, rows, DataType::kInt32, ReduceOp::kSum, Launch::on(stream))
                        .is_ok());
        ASSERT_TRUE(g.device(r).synchronize_stream(stream, Deadline::after_seconds(60)));
        if (again == 1) EXPECT_EQ(g.device(r).imports_deferred(), deferred) << "rank " << r << ": staged again";
      }
      for (void* p : {nothing, bcast, gather_in, gathered, scatter_in, scattered, async_buf, p2p_out, p2p_in, many_a,
                      many_b, a2a_in, a2a_out}) {
        g.device(r).release(p);
      }
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(g.device(r).violations(), std::vector<std::string>{}) << "rank " << r;
  }
}

// As on a GPU, an allocation (or an IPC open) waits for every held
// stream: a caller's thread setting up its next call waits for the calls
// before it, and must hold nothing kolo's thread needs to run them. After
// a first call (which sets up what a call of its size needs), the stream
// runs a slow kernel of the caller's, which a call on host buffers waits
// for; then a call on device buffers like the first, queued behind it; then
// a larger one, whose scratch grows: setting it up waits for the one
// before, which has not started yet and must get through unhindered.
TEST(GpuStreams, SettingUpTheNextCallWaitsForTheHeldStreamWithoutDeadlock) {
  for (bool ipc : {false, true}) {
    Mode m{2, ipc, 50};
    m.device_wide = DeviceWideCalls::kWaitForHolds;
    SCOPED_TRACE(mode_name(::testing::TestParamInfo<Mode>(m, 0)));
    GpuWorld g(m);
    const int n = g.size();
    const auto start = std::chrono::steady_clock::now();
    g.world().run([&](int r) {
      void* stream = g.device(r).create_stream();
      std::vector<void*> bufs;
      std::vector<Bytes> wants;
      const size_t counts[] = {1000, 1000, 200000};
      // Uploaded first: the test's own allocations wait for held streams too.
      for (size_t count : counts) {
        bufs.push_back(g.upload(r, ref::input_buffer(DataType::kFloat32, ReduceOp::kSum, r, count)));
        wants.push_back(ref::expected_buffer(DataType::kFloat32, ReduceOp::kSum, n, count));
      }
      const auto call = [&](size_t k) {
        Status s = g.comm(r).allreduce(bufs[k], bufs[k], counts[k], DataType::kFloat32, ReduceOp::kSum,
                                       Launch::on(stream));
        ASSERT_TRUE(s.is_ok()) << s.to_string();
      };
      call(0);
      ASSERT_TRUE(g.device(r).synchronize_stream(stream, Deadline::after_seconds(60)));
      g.device(r).run_on(stream, [] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
      std::vector<float> host(64, 1.0f);
      ASSERT_TRUE(g.comm(r)
                      .allreduce(host.data(), host.data(), host.size(), DataType::kFloat32, ReduceOp::kSum,
                                 Launch::on(stream))
                      .is_ok());
      call(1);
      call(2);
      ASSERT_TRUE(g.device(r).synchronize_stream(stream, Deadline::after_seconds(60)));
      Status health = g.comm(r).async_error();
      ASSERT_TRUE(health.is_ok()) << health.to_string();
      for (float x : host) ASSERT_EQ(x, static_cast<float>(n));
      for (size_t k = 0; k < bufs.size(); ++k) {
        EXPECT_EQ(g.download(bufs[k], wants[k].size()), wants[k]) << "call " << k << " rank " << r;
        g.device(r).release(bufs[k]);
      }
    });
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, GpuCollectives,
                         ::testing::Values(Mode{1, true, 0}, Mode{2, true, 0}, Mode{3, true, 0}, Mode{4, true, 0},
                                           Mode{2, false, 0}, Mode{3, false, 0}, Mode{4, false, 0},
                                           Mode{3, true, 50}, Mode{3, false, 50}),
                         mode_name);

TEST(GpuBuffers, MixingHostAndDeviceBuffersIsRejected) {
  GpuWorld g(Mode{1, true, 0});
  Bytes host(64);
  void* dev = g.upload(0, Bytes(64));
  Status s = g.comm(0).allreduce(dev, host.data(), 16, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("sendbuf is GPU memory but recvbuf is host memory"), std::string::npos) << s.message();
  EXPECT_TRUE(g.comm(0).async_error().is_ok()) << "a bad argument must leave the communicator healthy";
  g.device(0).release(dev);
}

TEST(GpuBuffers, AFailingGpuFailsTheCollectiveAndReleasesTheStream) {
  GpuWorld g(Mode{2, true, 0});
  g.world().run([&](int r) {
    void* stream = g.device(r).create_stream();
    void* buf = g.upload(r, Bytes(40000, 1));
    if (r == 0) g.device(r).fail_next(device_error("emulated launch failure"));
    Status s = g.comm(r).allreduce(buf, buf, 10000, DataType::kFloat32, ReduceOp::kSum, Launch::on(stream));
    ASSERT_TRUE(s.is_ok()) << "enqueueing succeeds; the failure comes later: " << s.to_string();
    std::atomic<bool> after{false};
    g.device(r).run_on(stream, [&] { after = true; });
    ASSERT_TRUE(g.device(r).synchronize_stream(stream, Deadline::after_seconds(60)))
        << "the stream must be released even though the collective failed";
    EXPECT_TRUE(after.load());
    Status e = g.comm(r).async_error();
    EXPECT_FALSE(e.is_ok()) << "rank " << r << ": the failure must be sticky";
    if (r == 0) {
      EXPECT_EQ(e.code(), Code::kDevice) << e.to_string();
    }
    Status later = g.comm(r).allreduce(buf, buf, 10, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_FALSE(later.is_ok());
    g.device(r).release(buf);
  });
}

TEST(GpuBuffers, AStagedRankWorksWithAHostBufferRank) {
  // Staging puts on the wire exactly the bytes host buffers would: rank 0
  // passes device memory, rank 1 host memory, in one allreduce.
  GpuWorld g(Mode{2, false, 20});
  const auto d = DataType::kFloat16;
  const size_t count = 30011;
  const Bytes want = ref::expected_buffer(d, ReduceOp::kMax, 2, count);
  g.world().run([&](int r) {
    Bytes in = ref::input_buffer(d, ReduceOp::kMax, r, count);
    void* buf = r == 0 ? g.upload(r, in) : in.data();
    Status s = g.comm(r).allreduce(buf, buf, count, d, ReduceOp::kMax);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(g.download(buf, want.size()), want) << "rank " << r;
    if (r == 0) g.device(r).release(buf);
  });
}

TEST(GpuBuffers, HostBuffersAgainstAnIpcPeerFailAsMismatchNotAHang) {
  // Over CUDA IPC both ranks of a pair must pass device buffers: a rank
  // passing host buffers sends raw data where control messages are due.
  GpuWorld g(Mode{2, true, 0});
  const auto start = std::chrono::steady_clock::now();
  g.world().run([&](int r) {
    Bytes in(4000 * 4, 1);
    void* buf = r == 0 ? g.upload(r, in) : in.data();
    Status s = g.comm(r).allreduce(buf, buf, 4000, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_FALSE(s.is_ok()) << "rank " << r;
    EXPECT_EQ(s.code(), Code::kMismatch) << "rank " << r << ": " << s.to_string();
    if (r == 0) g.device(r).release(buf);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(GpuBuffers, WithoutAGpuAStreamCallSaysWhy) {
  // No GPU injected: this rank opens the real one, which a build without
  // CUDA, or a machine without a GPU, does not have.
  Config c = test_config();
  ThreadWorld w(1, c);
  int ordinal = -1;
  Status s = w.comm(0).gpu_ordinal(&ordinal);
  if (s.is_ok()) GTEST_SKIP() << "this machine has a GPU (" << ordinal << "): the no-GPU path cannot be tested here";
  EXPECT_EQ(s.code(), Code::kUnsupported) << s.to_string();
  EXPECT_TRUE(s.message().find("without CUDA") != std::string::npos || s.message().find("no GPU") != std::string::npos)
      << s.message();
  float x = 1;
  s = w.comm(0).allreduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum, Launch::on(nullptr));
  EXPECT_EQ(s.code(), Code::kUnsupported) << s.to_string();
  // Host collectives are unaffected.
  EXPECT_TRUE(w.comm(0).allreduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum).is_ok());
}

}  // namespace
}  // namespace kolo
