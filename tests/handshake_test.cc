// The connection handshake: check_hello's verdicts, and strangers connecting
// to a live rank's listener being turned away while the job goes on.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/thread_world.h"
#include "transport/handshake.h"
#include "transport/socket/address.h"

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

// Connects to a listener, reads its challenge, sends what `answer` makes of
// it, and returns what came back before the listener closed the connection
// (or 2 s passed).
std::string poke(const std::string& address, const std::function<std::string(const Challenge&)>& answer) {
  std::string host;
  int port = 0;
  EXPECT_TRUE(split_host_port(address, &host, &port).is_ok());
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &sa.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  Challenge challenge{};
  EXPECT_EQ(::recv(fd, &challenge, sizeof(challenge), MSG_WAITALL), static_cast<ssize_t>(sizeof(challenge)));
  EXPECT_TRUE(check_challenge(challenge).is_ok());
  const std::string bytes = answer(challenge);
  if (!bytes.empty()) {
    EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
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

std::string bytes_of(const HelloMessage& m) { return std::string(reinterpret_cast<const char*>(&m), sizeof(m)); }

int32_t ack_code(const std::string& reply) {
  EXPECT_EQ(reply.size(), sizeof(HelloAck));
  if (reply.size() != sizeof(HelloAck)) return -1;
  HelloAck ack;
  std::memcpy(&ack, reply.data(), sizeof(ack));
  return ack.code;
}

TEST(HelloMessage, MacBindsSecretNoncesAndContent) {
  const Challenge c = make_challenge();
  const Hello h = make_hello(1, 0, 1, 2, 0, 1);
  const HelloExpectation e{1, 1, 2, 1, 0};
  HelloMessage m = make_hello_message(h, c, "s3cret");
  EXPECT_TRUE(check_hello_message(m, c, e, "s3cret").is_ok());
  EXPECT_EQ(check_hello_message(m, c, e, "other").code(), Code::kAuth);
  EXPECT_EQ(check_hello_message(m, make_challenge(), e, "s3cret").code(), Code::kAuth) << "a replay must fail";
  HelloMessage tampered = m;
  tampered.hello.from_rank = 1;
  EXPECT_EQ(check_hello_message(tampered, c, e, "s3cret").code(), Code::kAuth);
  // The acceptor's answer proves it knows the secret too.
  HelloAck ok = make_ack(Code::kOk, m, c, "s3cret");
  EXPECT_TRUE(check_ack(ok, m, c, "s3cret", "peer").is_ok());
  EXPECT_EQ(check_ack(ok, m, c, "other", "peer").code(), Code::kAuth);
  EXPECT_EQ(check_ack(make_ack(Code::kMismatch, m, c, "s3cret"), m, c, "s3cret", "peer").code(), Code::kMismatch);
}

TEST(Handshake, StrangersAreTurnedAwayAndTheJobGoesOn) {
  Config config = test_config();
  config.secret = "the job's secret";
  config.transport = "tcp";  // its listener is what strangers knock on
  ThreadWorld w(3, config);
  std::string address;
  ASSERT_TRUE(w.store().get_one("tcp/1", Deadline::after_seconds(5), &address).is_ok());
  const uint64_t job = job_id_from_name("in-process");

  // Garbage of a hello's length.
  EXPECT_EQ(ack_code(poke(address, [](const Challenge&) { return std::string(sizeof(HelloMessage), 'x'); })),
            static_cast<int32_t>(Code::kAuth));
  // A well-formed hello for this job and link, but without the secret.
  EXPECT_EQ(ack_code(poke(address, [&](const Challenge& c) {
              return bytes_of(make_hello_message(make_hello(job, 2, 1, 3, 0, 1), c, "a guess"));
            })),
            static_cast<int32_t>(Code::kAuth));
  // A hello of another job that knows this secret.
  EXPECT_EQ(ack_code(poke(address, [&](const Challenge& c) {
              return bytes_of(make_hello_message(make_hello(job + 1, 2, 1, 3, 0, 1), c, config.secret));
            })),
            static_cast<int32_t>(Code::kAuth));
  // A member's hello for a link that is already in use.
  EXPECT_EQ(ack_code(poke(address, [&](const Challenge& c) {
              return bytes_of(make_hello_message(make_hello(job, 0, 1, 3, 0, 1), c, config.secret));
            })),
            static_cast<int32_t>(Code::kInvalidUsage));
  // A half-sent hello, and silence: dropped at the handshake deadline; nobody waits.
  poke(address, [](const Challenge&) { return std::string("KOL"); });
  poke(address, [](const Challenge&) { return std::string(); });

  // The job is undisturbed.
  const size_t count = 50000;
  w.run([&](int r) {
    std::vector<int32_t> v(count, r + 1), out(count);
    ASSERT_TRUE(w.comm(r).allreduce(v.data(), out.data(), count, DataType::kInt32,
                                    ReduceOp::kSum).is_ok());
    for (size_t i = 0; i < count; i += 977) EXPECT_EQ(out[i], 6);
  });
}

}  // namespace
}  // namespace kolo
