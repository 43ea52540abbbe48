// Which transport a communicator takes: TCP unless KOLO_TRANSPORT=ib asks
// for RDMA (experimental until it passes the conformance suite), which then
// needs an active device or fails saying there is none.
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

TEST(TransportChoice, AutoUsesTcpWhileRdmaIsExperimental) {
  Config c = test_config();
  c.transport = "auto";
  ThreadWorld world(2, c);
  EXPECT_STREQ(world.comm(0).transport_name(), "tcp");
  std::vector<float> x = {1, 2, 3};
  world.run([&](int r) {
    std::vector<float> y(3);
    ASSERT_TRUE(world.comm(r)
                    .allreduce(x.data(), y.data(), 3, static_cast<int>(DataType::kFloat32),
                               static_cast<int>(ReduceOp::kSum))
                    .is_ok());
    EXPECT_EQ(y[2], 6.0f);
  });
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
  EXPECT_NE(s.message().find("KOLO_TRANSPORT='carrier-pigeon': use auto, tcp or ib"), std::string::npos);
}

}  // namespace
}  // namespace kolo
