// What is particular to the RDMA transport, which needs a device and so
// runs in the soft-RoCE VM (tools/rdma_suite.sh); the TCP-only machines
// check the no-device path in transport_choice_test.
//  - Memory: steady-state collectives register nothing, whether their
//    buffers were declared (moved directly) or not (staged), and buffers
//    freed and allocated anew at the same addresses are never written
//    through stale registrations.
//  - Faults: a queue pair forced into the error state, as a failing NIC or
//    a fatal transfer error leaves it, fails every rank promptly: the rank
//    that owns it with TRANSPORT naming the peer and the verbs status, the
//    others with that failure or the loss of a peer, never at the deadline.
//  - Sharing: every communicator of a process uses one device context.
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/dtype.h"
#include "collectives/ring.h"
#include "tests/thread_world.h"
#include "transport/ib/ib_transport.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;
constexpr DataType kF32 = DataType::kFloat32;
constexpr ReduceOp kSum = ReduceOp::kSum;

Config ib_config() {
  Config c = test_config(64 << 10);
  c.transport = "ib";
  return c;
}

IbTransport* ib_of(Communicator& comm) {
  IbTransport* ib = nullptr;
  Status s = comm.run_custom("find the transport", [&](const ScheduleContext& ctx) {
    ib = dynamic_cast<IbTransport*>(ctx.transport);
    return Status::ok();
  });
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return ib;
}

// Each rank allreduces fresh buffers (allocated, filled with rank-specific
// values, freed after), so addresses repeat with new pages behind them.
void allreduce_fresh_buffers(ThreadWorld& w, size_t count, int iteration, bool declare) {
  const int n = w.size();
  w.run([&](int r) {
    std::vector<float> in(count), out(count, -1.0f);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((r + 1) * (iteration + 1) + i % 7);
    Communicator& c = w.comm(r);
    if (declare) {
      ASSERT_TRUE(c.register_memory(in.data(), count * sizeof(float)).is_ok());
      ASSERT_TRUE(c.register_memory(out.data(), count * sizeof(float)).is_ok());
    }
    ASSERT_TRUE(c.allreduce(in.data(), out.data(), count, kF32, kSum).is_ok());
    if (declare) {
      ASSERT_TRUE(c.deregister_memory(in.data(), count * sizeof(float)).is_ok());
      ASSERT_TRUE(c.deregister_memory(out.data(), count * sizeof(float)).is_ok());
    }
    for (size_t i = 0; i < count; ++i) {
      const float want = static_cast<float>(n * (n + 1) / 2 * (iteration + 1) + n * static_cast<int>(i % 7));
      ASSERT_EQ(out[i], want) << "rank " << r << " iteration " << iteration << " element " << i;
    }
  });
}

TEST(IbMemory, SteadyStateStagedCollectivesRegisterNothing) {
  ThreadWorld w(3, ib_config());
  const size_t count = 1 << 20;  // 4 MiB: many segments in flight
  for (int i = 0; i < 3; ++i) allreduce_fresh_buffers(w, count, i, /*declare=*/false);
  const IbTransport::Stats warm = ib_of(w.comm(1))->stats();
  for (int i = 3; i < 13; ++i) allreduce_fresh_buffers(w, count, i, /*declare=*/false);
  const IbTransport::Stats after = ib_of(w.comm(1))->stats();
  EXPECT_EQ(after.registrations, warm.registrations);
  EXPECT_GT(after.staged, warm.staged);
}

TEST(IbMemory, DeclaredBuffersMoveDirectlyAndFreedOnesAreForgotten) {
  ThreadWorld w(3, ib_config());
  const size_t count = 1 << 20;
  allreduce_fresh_buffers(w, count, 0, /*declare=*/true);
  const IbTransport::Stats first = ib_of(w.comm(1))->stats();
  EXPECT_GT(first.direct, 0u);
  // Declared, used, undeclared and freed again and again: the same
  // addresses come back with new pages, and every result is right.
  for (int i = 1; i < 8; ++i) allreduce_fresh_buffers(w, count, i, /*declare=*/true);
  const IbTransport::Stats after = ib_of(w.comm(1))->stats();
  EXPECT_GT(after.direct, first.direct);
}

TEST(IbMemory, DeclaredBuffersReusedAcrossCallsRegisterOnce) {
  ThreadWorld w(2, ib_config());
  const size_t count = 1 << 18;
  std::vector<std::vector<float>> in(2, std::vector<float>(count, 1.0f)), out(2, std::vector<float>(count));
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(w.comm(r).register_memory(in[r].data(), count * sizeof(float)).is_ok());
    ASSERT_TRUE(w.comm(r).register_memory(out[r].data(), count * sizeof(float)).is_ok());
  }
  w.run([&](int r) { ASSERT_TRUE(w.comm(r).allreduce(in[r].data(), out[r].data(), count, kF32, kSum).is_ok()); });
  const IbTransport::Stats warm = ib_of(w.comm(0))->stats();
  for (int i = 0; i < 10; ++i) {
    w.run([&](int r) { ASSERT_TRUE(w.comm(r).allreduce(in[r].data(), out[r].data(), count, kF32, kSum).is_ok()); });
  }
  const IbTransport::Stats after = ib_of(w.comm(0))->stats();
  EXPECT_EQ(after.registrations, warm.registrations);
  EXPECT_EQ(after.staged, warm.staged);  // nothing staged: every message end was declared or the workspace
  EXPECT_GT(after.direct, warm.direct);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(out[r][count - 1], 2.0f);
}

void expect_prompt_failures_after_forcing(int n, int victim, int towards) {
  Config c = ib_config();
  c.timeout_s = 30;  // the failures must come long before this
  ThreadWorld w(n, c);
  ASSERT_STREQ(w.comm(0).transport_name(), "ib");
  std::atomic<int> iterations{0};
  std::vector<Status> got(n);
  std::vector<double> took(n);
  IbTransport* ib = ib_of(w.comm(victim));
  ASSERT_NE(ib, nullptr);
  std::thread breaker([&] {
    // In the middle of a collective (the injection is thread-safe).
    while (iterations.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ib->inject_queue_pair_error(towards);
  });
  auto start = Clock::now();
  w.run([&](int r) {
    const size_t count = 1 << 20;
    std::vector<float> in(count, 1.0f), out(count);
    for (int i = 0; i < 2000; ++i) {
      got[r] = w.comm(r).allreduce(in.data(), out.data(), count, kF32, kSum);
      if (!got[r].is_ok()) break;
      if (r == victim) ++iterations;
    }
    took[r] = std::chrono::duration<double>(Clock::now() - start).count();
  });
  breaker.join();
  EXPECT_EQ(got[victim].code(), Code::kTransport) << got[victim].to_string();
  EXPECT_NE(got[victim].message().find("queue pair to rank " + std::to_string(towards)), std::string::npos)
      << got[victim].message();
  EXPECT_NE(got[victim].message().find("verbs status"), std::string::npos) << got[victim].message();
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(got[r].code() == Code::kTransport || got[r].code() == Code::kPeerLost)
        << "rank " << r << ": " << got[r].to_string();
    EXPECT_LT(took[r], 10.0) << "rank " << r << ": " << got[r].to_string();
  }
}

TEST(IbFault, ForcedQueuePairErrorFailsBothRanks) { expect_prompt_failures_after_forcing(2, 0, 1); }

TEST(IbFault, ForcedQueuePairErrorFailsTheWholeRing) { expect_prompt_failures_after_forcing(4, 2, 3); }

// Every communicator of a process (here the ranks as threads and their
// splits) uses the process's one device context and protection domain,
// closed with the last of them; a queue pair failing in one split fails
// that split only.
TEST(IbDevice, CommunicatorsOfAProcessShareOneDeviceContext) {
  {
    ThreadWorld w(4, ib_config());
    ASSERT_STREQ(w.comm(0).transport_name(), "ib");
    std::vector<std::unique_ptr<Communicator>> halves(4);
    w.run([&](int r) { ASSERT_TRUE(w.comm(r).split(r % 2, r, &halves[r]).is_ok()); });
    EXPECT_EQ(IbDeviceContext::open_count(), 1);
    const IbDeviceContext* shared = ib_of(w.comm(0))->device_context();
    ASSERT_NE(shared, nullptr);
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(ib_of(w.comm(r))->device_context(), shared) << "rank " << r;
      EXPECT_EQ(ib_of(*halves[r])->device_context(), shared) << "rank " << r << "'s split";
    }
    ib_of(*halves[0])->inject_queue_pair_error(1);  // world ranks 0 -> 2, in the even split
    std::vector<Status> got(4);
    w.run([&](int r) {
      std::vector<float> x(1 << 16, 1.0f);
      got[r] = halves[r]->allreduce(x.data(), x.data(), x.size(), kF32, kSum);
      if (r % 2 == 1) {
        EXPECT_EQ(x[0], 2.0f);
      }
    });
    EXPECT_FALSE(got[0].is_ok());
    EXPECT_FALSE(got[2].is_ok());
    EXPECT_TRUE(got[1].is_ok()) << got[1].to_string();
    EXPECT_TRUE(got[3].is_ok()) << got[3].to_string();
    w.run([&](int r) {
      float x = 1.0f;
      Status s = w.comm(r).allreduce(&x, &x, 1, kF32, kSum);
      EXPECT_TRUE(s.is_ok()) << "the world, rank " << r << ": " << s.to_string();
      EXPECT_EQ(x, 4.0f);
    });
  }
  EXPECT_EQ(IbDeviceContext::open_count(), 0);
}

}  // namespace
}  // namespace kolo
