// Which transport a communicator takes: with KOLO_TRANSPORT=auto, RDMA where
// every rank can open an RDMA device, else TCP on every rank; KOLO_TRANSPORT=ib
// needs an active device or fails saying there is none. Run on the TCP-only
// machines and, in the RDMA suite, inside the soft-RoCE VM.
#include <thread>

#include <gtest/gtest.h>

#include "collectives/dtype.h"
#include "runtime/config.h"
#include "tests/thread_world.h"
#include "transport/ib/device.h"

namespace kolo {
namespace {

bool machine_has_rdma() {
  std::vector<IbDeviceInfo> devices;
  IbChoice choice;
  return query_ib_devices(&devices).is_ok() && choose_ib_port(devices, IbSettings{}, &choice).is_ok();
}

void expect_allreduce_works(const std::vector<Communicator*>& comms) {
  const int n = static_cast<int>(comms.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> x = {1, 2, static_cast<float>(r)}, y(3);
      ASSERT_TRUE(comms[r]
                      ->allreduce(x.data(), y.data(), 3, static_cast<int>(DataType::kFloat32),
                                  static_cast<int>(ReduceOp::kSum))
                      .is_ok());
      EXPECT_EQ(y[1], 2.0f * n);
      EXPECT_EQ(y[2], n * (n - 1) / 2.0f);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(TransportChoice, AutoTakesRdmaWhereEveryRankHasIt) {
  Config c = test_config();
  c.transport = "auto";
  ThreadWorld world(2, c);
  const char* want = machine_has_rdma() ? "ib" : "tcp";
  EXPECT_STREQ(world.comm(0).transport_name(), want);
  EXPECT_STREQ(world.comm(1).transport_name(), want);
  expect_allreduce_works({&world.comm(0), &world.comm(1)});
}

TEST(TransportChoice, AutoFallsBackToTcpOnEveryRankWhenOneCannotUseRdma) {
  // Rank 2 names a device that does not exist, so it cannot open RDMA; a
  // queue pair needs both ends, so the whole world agrees on TCP.
  const int n = 3;
  MemoryStore store;
  std::vector<std::unique_ptr<Communicator>> comms(n);
  std::vector<Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Config c = test_config();
      c.transport = "auto";
      if (r == 2) c.ib_device = "no-such-device";
      status[r] = Communicator::create_with_store(r, n, &store, c, &comms[r]);
    });
  }
  for (auto& t : threads) t.join();
  std::vector<Communicator*> raw;
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(status[r].is_ok()) << status[r].to_string();
    EXPECT_STREQ(comms[r]->transport_name(), "tcp") << "rank " << r;
    raw.push_back(comms[r].get());
  }
  expect_allreduce_works(raw);
}

TEST(TransportChoice, DemandingRdmaWithoutADeviceFailsClearly) {
  if (machine_has_rdma()) {
    Config c = test_config();
    c.transport = "ib";
    ThreadWorld world(2, c);
    EXPECT_STREQ(world.comm(1).transport_name(), "ib");
    return;
  }
  Config c = test_config();
  c.transport = "ib";
  MemoryStore store;
  std::unique_ptr<Communicator> comm;
  Status s = Communicator::create_with_store(0, 2, &store, c, &comm);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("KOLO_TRANSPORT=ib"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("no RDMA device"), std::string::npos) << s.message();
}

TEST(TransportChoice, TcpIsAlwaysAvailable) {
  Config c = test_config();
  c.transport = "tcp";
  ThreadWorld world(3, c);
  for (int r = 0; r < 3; ++r) EXPECT_STREQ(world.comm(r).transport_name(), "tcp");
}

TEST(TransportChoice, UnknownTransportsAreRejected) {
  setenv("KOLO_TRANSPORT", "carrier-pigeon", 1);
  Config c;
  Status s = load_config(&c);
  unsetenv("KOLO_TRANSPORT");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("KOLO_TRANSPORT='carrier-pigeon': use auto, tcp, ib or shm"), std::string::npos);
}

}  // namespace
}  // namespace kolo
