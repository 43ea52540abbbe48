// The connection handshake: check_hello's verdicts, and strangers connecting
// to a live rank's listener being turned away while the job goes on.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/thread_world.h"
#include "transport/handshake.h"
#include "transport/tcp/address.h"

namespace kolo {
namespace {

HelloExpectation expect() { return HelloExpectation{job_id_from_name("job"), 1, 4, 2, 0}; }

TEST(CheckHello, AcceptsAMemberOfTheJob) {
  EXPECT_TRUE(check_hello(make_hello(job_id_from_name("job"), 0, 1, 4, 1, 2), expect()).is_ok());
}

TEST(CheckHello, RejectsEverythingElse) {
  const uint64_t job = job_id_from_name("job");
  Hello h = make_hello(job, 0, 1, 4, 0, 2);
  h.magic = 0x12345678;
  EXPECT_EQ(check_hello(h, expect()).code(), Code::kAuth);
  h = make_hello(job, 0, 1, 4, 0, 2);
  h.version = 99;
  EXPECT_EQ(check_hello(h, expect()).code(), Code::kInvalidUsage);
  EXPECT_EQ(check_hello(make_hello(job_id_from_name("other"), 0, 1, 4, 0, 2), expect()).code(), Code::kAuth);
  EXPECT_EQ(check_hello(make_hello(job, 0, 2, 4, 0, 2), expect()).code(), Code::kInvalidUsage);  // not for me
  EXPECT_EQ(check_hello(make_hello(job, 1, 1, 4, 0, 2), expect()).code(), Code::kInvalidUsage);  // from myself
  EXPECT_EQ(check_hello(make_hello(job, 9, 1, 4, 0, 2), expect()).code(), Code::kInvalidUsage);  // no such rank
  EXPECT_EQ(check_hello(make_hello(job, 0, 1, 5, 0, 2), expect()).code(), Code::kMismatch);      // world size
  EXPECT_EQ(check_hello(make_hello(job, 0, 1, 4, 0, 3), expect()).code(), Code::kMismatch);      // socket count
  EXPECT_EQ(check_hello(make_hello(job, 0, 1, 4, 2, 2), expect()).code(), Code::kInvalidUsage);  // socket index
  EXPECT_EQ(check_hello(make_hello(job, 0, 1, 4, 0, 2, kHelloFlagChecksum), expect()).code(), Code::kMismatch);
}

// Connects to host:port, sends `bytes`, and returns what came back before
// the listener closed the connection (or 2 s passed).
std::string poke(const std::string& address, const std::string& bytes) {
  std::string host;
  int port = 0;
  EXPECT_TRUE(split_host_port(address, &host, &port).is_ok());
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &sa.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  if (!bytes.empty()) EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  std::string reply;
  char buf[64];
  for (;;) {
    struct pollfd p {fd, POLLIN, 0};
    if (::poll(&p, 1, 2000) <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return reply;
}

TEST(Handshake, StrangersAreTurnedAwayAndTheJobGoesOn) {
  ThreadWorld w(3, test_config());
  std::string address;
  ASSERT_TRUE(w.store().get_one("tcp/1", Deadline::after_seconds(5), &address).is_ok());

  // Garbage of a hello's length: answered with a rejection code, then closed.
  std::string reply = poke(address, std::string(sizeof(Hello), 'x'));
  ASSERT_EQ(reply.size(), sizeof(HelloAck));
  HelloAck ack;
  std::memcpy(&ack, reply.data(), sizeof(ack));
  EXPECT_EQ(ack.code, static_cast<int32_t>(Code::kAuth));

  // A well-formed hello from another job.
  Hello other = make_hello(job_id_from_name("someone else"), 0, 1, 3, 0, 1);
  reply = poke(address, std::string(reinterpret_cast<const char*>(&other), sizeof(other)));
  ASSERT_EQ(reply.size(), sizeof(HelloAck));
  std::memcpy(&ack, reply.data(), sizeof(ack));
  EXPECT_EQ(ack.code, static_cast<int32_t>(Code::kAuth));

  // A hello of this job claiming a link that already exists.
  Hello dup = make_hello(job_id_from_name("in-process"), 0, 1, 3, 0, 1);
  reply = poke(address, std::string(reinterpret_cast<const char*>(&dup), sizeof(dup)));
  ASSERT_EQ(reply.size(), sizeof(HelloAck));
  std::memcpy(&ack, reply.data(), sizeof(ack));
  EXPECT_NE(ack.code, static_cast<int32_t>(Code::kOk));

  // A half-sent hello: the stranger is dropped by the handshake deadline,
  // and nobody waits for it.
  poke(address, "KOL");

  // The job is undisturbed.
  const size_t count = 50000;
  w.run([&](int r) {
    std::vector<int32_t> v(count, r + 1), out(count);
    ASSERT_TRUE(w.comm(r).allreduce(v.data(), out.data(), count, static_cast<int>(DataType::kInt32),
                                    static_cast<int>(ReduceOp::kSum)).is_ok());
    for (size_t i = 0; i < count; i += 977) EXPECT_EQ(out[i], 6);
  });
}

}  // namespace
}  // namespace kolo
