// Faults of the RDMA transport itself, which need a device and so run in the
// soft-RoCE VM (tools/rdma_suite.sh): a queue pair forced into the error
// state, as a failing NIC or a fatal transfer error leaves it, fails every
// rank promptly: the rank that owns it with TRANSPORT naming the peer and
// the verbs status, the others with that failure or the loss of a peer,
// never at the deadline. (The TCP-only machines check the no-device path in
// transport_choice_test.)
#include <atomic>
#include <chrono>
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

void expect_prompt_failures_after_forcing(int n, int victim, int towards) {
  Config c = test_config(64 << 10);
  c.transport = "ib";
  c.timeout_s = 30;  // the failures must come long before this
  ThreadWorld w(n, c);
  ASSERT_STREQ(w.comm(0).transport_name(), "ib");
  std::atomic<int> iterations{0};
  std::vector<Status> got(n);
  std::vector<double> took(n);
  IbTransport* ib = nullptr;
  ASSERT_TRUE(w.comm(victim)
                  .run_custom("find the transport",
                              [&](const RingContext& ctx) {
                                ib = dynamic_cast<IbTransport*>(ctx.transport);
                                return Status::ok();
                              })
                  .is_ok());
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
      got[r] = w.comm(r).allreduce(in.data(), out.data(), count, static_cast<int>(DataType::kFloat32),
                                   static_cast<int>(ReduceOp::kSum));
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

}  // namespace
}  // namespace kolo
