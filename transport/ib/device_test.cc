#include "transport/ib/device.h"

#include <gtest/gtest.h>

namespace kolo {
namespace {

IbGidEntry gid(int index, bool v2, std::initializer_list<uint8_t> tail) {
  IbGidEntry g;
  g.index = index;
  g.roce_v2 = v2;
  int i = 16 - static_cast<int>(tail.size());
  for (uint8_t b : tail) g.raw[i++] = b;
  return g;
}

IbGidEntry link_local(int index, bool v2) {
  IbGidEntry g = gid(index, v2, {1});
  g.raw[0] = 0xfe;
  g.raw[1] = 0x80;
  return g;
}

IbGidEntry ipv4(int index, bool v2) { return gid(index, v2, {0xff, 0xff, 10, 0, 2, 15}); }

IbPortInfo roce_port(int number, bool active) {
  IbPortInfo p;
  p.number = number;
  p.active = active;
  p.ethernet = true;
  p.active_mtu = 3;
  // As rxe lays out its table: v1 and v2 of the link-local address, then of the IPv4 one.
  p.gids = {link_local(0, false), link_local(1, true), ipv4(2, false), ipv4(3, true)};
  return p;
}

TEST(IbDevice, NoDeviceMeansUnsupportedSoTheCallerFallsBackToTcp) {
  IbChoice c;
  Status s = choose_ib_port({}, IbSettings{}, &c);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("no RDMA device"), std::string::npos);
}

TEST(IbDevice, ThisMachineHasNoneAndSaysSoCleanly) {
  // No RDMA hardware and no rdma_rxe here: the library reports nothing and
  // the choice is the fallback's UNSUPPORTED, not a crash or a hang.
  std::vector<IbDeviceInfo> devices;
  ASSERT_TRUE(query_ib_devices(&devices).is_ok());
  if (devices.empty()) {
    IbChoice c;
    EXPECT_EQ(choose_ib_port(devices, IbSettings{}, &c).code(), Code::kUnsupported);
  }
}

TEST(IbDevice, PrefersRoceV2WithAnIpv4Address) {
  IbChoice c;
  ASSERT_TRUE(choose_ib_port({{"rxe0", {roce_port(1, true)}}}, IbSettings{}, &c).is_ok());
  EXPECT_EQ(c.device, "rxe0");
  EXPECT_EQ(c.port, 1);
  EXPECT_EQ(c.gid_index, 3);
  EXPECT_TRUE(c.ethernet);
  EXPECT_EQ(gid_to_string(c.gid), "::ffff:10.0.2.15");
  EXPECT_NE(c.describe().find("rxe0 port 1 GID 3 (RoCE, ::ffff:10.0.2.15), MTU 1024"), std::string::npos)
      << c.describe();
}

TEST(IbDevice, FallsBackToAnyRoceV2ThenAnyGid) {
  IbPortInfo p = roce_port(1, true);
  p.gids = {link_local(0, false), link_local(1, true)};
  IbChoice c;
  ASSERT_TRUE(choose_ib_port({{"rxe0", {p}}}, IbSettings{}, &c).is_ok());
  EXPECT_EQ(c.gid_index, 1);
  p.gids = {link_local(0, false)};
  ASSERT_TRUE(choose_ib_port({{"rxe0", {p}}}, IbSettings{}, &c).is_ok());
  EXPECT_EQ(c.gid_index, 0);
}

TEST(IbDevice, InfinibandUsesGidZeroAndTheLid) {
  IbPortInfo p;
  p.number = 1;
  p.active = true;
  p.ethernet = false;
  p.active_mtu = 5;
  p.lid = 12;
  p.gids = {link_local(0, false)};
  IbChoice c;
  ASSERT_TRUE(choose_ib_port({{"mlx5_0", {p}}}, IbSettings{}, &c).is_ok());
  EXPECT_EQ(c.gid_index, 0);
  EXPECT_EQ(c.lid, 12);
  EXPECT_NE(c.describe().find("InfiniBand, LID 12"), std::string::npos) << c.describe();
}

TEST(IbDevice, SkipsInactivePortsAndSaysWhyWhenNoneIsLeft) {
  std::vector<IbDeviceInfo> devices = {{"mlx5_0", {roce_port(1, false)}}, {"mlx5_1", {roce_port(1, false), roce_port(2, true)}}};
  IbChoice c;
  ASSERT_TRUE(choose_ib_port(devices, IbSettings{}, &c).is_ok());
  EXPECT_EQ(c.device, "mlx5_1");
  EXPECT_EQ(c.port, 2);
  devices[1].ports[1].active = false;
  Status s = choose_ib_port(devices, IbSettings{}, &c);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("mlx5_0 port 1 is not active; mlx5_1 port 1 is not active; mlx5_1 port 2"),
            std::string::npos)
      << s.message();
}

TEST(IbDevice, OverridesPickTheirDevicePortAndGid) {
  std::vector<IbDeviceInfo> devices = {{"a", {roce_port(1, true)}}, {"b", {roce_port(1, true), roce_port(2, true)}}};
  IbSettings s;
  s.device = "b";
  s.port = 2;
  s.gid_index = 1;
  IbChoice c;
  ASSERT_TRUE(choose_ib_port(devices, s, &c).is_ok());
  EXPECT_EQ(c.device, "b");
  EXPECT_EQ(c.port, 2);
  EXPECT_EQ(c.gid_index, 1);
}

TEST(IbDevice, OverridesNamingNothingAreClearErrors) {
  std::vector<IbDeviceInfo> devices = {{"a", {roce_port(1, true)}}, {"b", {roce_port(1, true)}}};
  IbChoice c;
  IbSettings s;
  s.device = "c";
  Status st = choose_ib_port(devices, s, &c);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("KOLO_IB_DEV=c: no such RDMA device (found: a, b)"), std::string::npos)
      << st.message();
  s = IbSettings{};
  s.port = 3;
  st = choose_ib_port(devices, s, &c);
  EXPECT_NE(st.message().find("KOLO_IB_PORT=3: no such port"), std::string::npos) << st.message();
  s = IbSettings{};
  s.gid_index = 9;
  st = choose_ib_port(devices, s, &c);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("KOLO_IB_GID_INDEX: a port 1 has no valid GID at index 9"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace kolo
