// The congestion control of data connections (KOLO_TCP_CONGESTION,
// transport/socket/congestion.h): two ranks as threads over an in-memory
// store, connected over loopback.
//  - By default ("auto") both ends of a connection within one host run
//    Reno, whatever the system's default; "system" leaves the system's;
//    a name sets that one; a name the kernel refuses fails the transport
//    on every rank before any connection, with an error naming the setting
//    and what the kernel has.
//  - What counts as this host: loopback addresses and this namespace's
//    interfaces' addresses; documentation-only addresses do not.
// (tests/netns_test.sh checks that connections between emulated hosts keep
// the system's algorithm.)
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "transport/memory_store.h"
#include "transport/socket/congestion.h"
#include "transport/tcp/tcp_transport.h"

namespace kolo {
namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Whether any process may set `name`: the kernel's allowed list (an
// algorithm it has but does not allow needs CAP_NET_ADMIN, which a
// sandbox or a container may not give).
bool kernel_allows(const std::string& name) {
  std::istringstream names(first_line("/proc/sys/net/ipv4/tcp_allowed_congestion_control"));
  std::string n;
  while (names >> n) {
    if (n == name) return true;
  }
  return false;
}

struct Connected {
  MemoryStore store;
  std::unique_ptr<TcpTransport> t[2];
  Status status[2];
};

void connect_pair(const std::string& setting, Connected* c) {
  TcpOptions o;
  o.job_id = 0xcc;
  o.handshake_timeout_s = 5;
  o.congestion = setting;
  ASSERT_TRUE(TcpTransport::create(&c->store, 1, 2, o, &c->t[1]).is_ok());
  ASSERT_TRUE(TcpTransport::create(&c->store, 0, 2, o, &c->t[0]).is_ok());
  std::thread other([&] { c->status[1] = c->t[1]->connect(0, Deadline::after_seconds(5)); });
  c->status[0] = c->t[0]->connect(1, Deadline::after_seconds(5));
  if (!c->status[0].is_ok()) c->t[1]->abort();  // rank 1 would wait for a dial that never comes
  other.join();
}

void expect_both_run(const std::string& setting, const std::string& algorithm) {
  Connected c;
  connect_pair(setting, &c);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(c.status[r].is_ok()) << setting << ", rank " << r << ": " << c.status[r].message();
    EXPECT_EQ(congestion_control_of(c.t[r]->socket_fd(1 - r)), algorithm) << setting << ", rank " << r;
  }
}

TEST(CongestionControlTest, ConnectionsWithinOneHostRunRenoByDefault) {
  expect_both_run("auto", "reno");
  expect_both_run("", "reno");
}

TEST(CongestionControlTest, SystemKeepsTheKernelsDefault) {
  const std::string system = first_line("/proc/sys/net/ipv4/tcp_congestion_control");
  ASSERT_FALSE(system.empty());
  expect_both_run("system", system);
}

TEST(CongestionControlTest, ANameSetsThatAlgorithm) {
  expect_both_run("reno", "reno");
  for (const char* other : {"cubic", "bbr"}) {
    if (kernel_allows(other)) expect_both_run(other, other);
  }
}

// Refused where the transport is made, on every rank alike, before any
// rank dials (a rank that failed while dialing would leave its peer
// waiting for it).
TEST(CongestionControlTest, ANameTheKernelRefusesFailsTheTransportNamingTheSetting) {
  MemoryStore store;
  TcpOptions o;
  o.congestion = "no_such_algo";
  std::unique_ptr<TcpTransport> t;
  const Status s = TcpTransport::create(&store, 0, 2, o, &t);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(t, nullptr);
  EXPECT_NE(s.message().find("KOLO_TCP_CONGESTION=no_such_algo: the kernel refused it"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("it has: "), std::string::npos) << s.message();
  EXPECT_TRUE(check_congestion_setting("auto").is_ok());
  EXPECT_TRUE(check_congestion_setting("system").is_ok());
  EXPECT_TRUE(check_congestion_setting("reno").is_ok());
}

sockaddr_storage address_of(const char* text) {
  sockaddr_storage a{};
  if (std::strchr(text, ':') != nullptr) {
    auto& six = reinterpret_cast<sockaddr_in6&>(a);
    six.sin6_family = AF_INET6;
    EXPECT_EQ(inet_pton(AF_INET6, text, &six.sin6_addr), 1) << text;
  } else {
    auto& four = reinterpret_cast<sockaddr_in&>(a);
    four.sin_family = AF_INET;
    EXPECT_EQ(inet_pton(AF_INET, text, &four.sin_addr), 1) << text;
  }
  return a;
}

TEST(CongestionControlTest, ThisHostsAddressesAreLoopbackAndItsInterfaces) {
  for (const char* local : {"127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(is_this_hosts_address(address_of(local))) << local;
  }
  // Reserved for documentation (RFC 5737, RFC 3849): no host has them.
  for (const char* remote : {"192.0.2.1", "2001:db8::1", "::ffff:192.0.2.1"}) {
    EXPECT_FALSE(is_this_hosts_address(address_of(remote))) << remote;
  }
  ifaddrs* list = nullptr;
  ASSERT_EQ(getifaddrs(&list), 0);
  int interfaces = 0;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    sockaddr_storage a{};
    std::memcpy(&a, i->ifa_addr, i->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    EXPECT_TRUE(is_this_hosts_address(a)) << i->ifa_name;
    if (i->ifa_addr->sa_family == AF_INET) {
      // The same address as a dual-stack socket reports an IPv4 peer.
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof(text));
      const std::string mapped = std::string("::ffff:") + text;
      EXPECT_TRUE(is_this_hosts_address(address_of(mapped.c_str()))) << mapped;
    }
    ++interfaces;
  }
  freeifaddrs(list);
  EXPECT_GT(interfaces, 0);
}

}  // namespace
}  // namespace kolo
