// The process's TCP listener: communicators of one process share its port and
// thread, each with its own endpoint, id, secret and abort; a connection
// for no communicator here is turned away without disturbing the others;
// the listener closes with its last transport.
#include "transport/tcp/listener.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "transport/handshake.h"
#include "transport/memory_store.h"
#include "transport/socket/address.h"
#include "transport/tcp/tcp_transport.h"

namespace kolo {
namespace {

int thread_count() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return -1;
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

// Two ranks of one communicator, as threads of this process; communicators
// differ by store prefix and id, as the runtime's main one and its engine
// sibling do.
struct Comm {
  Comm(MemoryStore* store, const std::string& prefix, const std::string& secret = "s") {
    TcpOptions o;
    o.job_id = job_id_from_name("job" + prefix);
    o.store_prefix = prefix + "tcp/";
    o.secret = secret;
    for (int r = 0; r < 2; ++r) {
      Status s = TcpTransport::create(store, r, 2, o, &t[r]);
      EXPECT_TRUE(s.is_ok()) << s.to_string();
    }
  }
  Status connect_both() {
    Status s1;
    std::thread other([&] { s1 = t[1]->connect(0, Deadline::after_seconds(5)); });
    Status s0 = t[0]->connect(1, Deadline::after_seconds(5));
    other.join();
    return s0.is_ok() ? s1 : s0;
  }
  // Rank 0 sends `bytes` to rank 1, which checks them.
  Status exchange(size_t bytes) {
    std::vector<unsigned char> out(bytes), in(bytes, 0);
    for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>(i * 7 + 1);
    Request send, recv;
    KOLO_RETURN_IF_ERROR(t[0]->post_send(1, out.data(), bytes, 9, &send));
    KOLO_RETURN_IF_ERROR(t[1]->post_recv(0, in.data(), bytes, 9, &recv));
    Status sent;
    std::thread sender([&] {
      while (sent.is_ok() && !send.done) sent = t[0]->progress(Deadline::after_seconds(5));
    });
    Status got;
    while (got.is_ok() && !recv.done) got = t[1]->progress(Deadline::after_seconds(5));
    sender.join();
    KOLO_RETURN_IF_ERROR(sent);
    KOLO_RETURN_IF_ERROR(got);
    if (in != out) return internal_error("payload changed on the way");
    return Status::ok();
  }
  std::unique_ptr<TcpTransport> t[2];
};

TEST(TcpListener, CommunicatorsShareOnePortAndOneThread) {
  // A first thread makes a sanitizer start its own helper thread, if any.
  std::thread([] {}).join();
  const int before = thread_count();
  MemoryStore store;
  {
    Comm a(&store, "");
    const int with_one = thread_count();
    EXPECT_EQ(with_one, before + 1) << "one listener thread for both ranks";
    Comm b(&store, "engine/");
    EXPECT_EQ(thread_count(), with_one) << "a second communicator opens no thread";
    const std::string address = a.t[0]->listen_address();
    EXPECT_EQ(a.t[1]->listen_address(), address);
    EXPECT_EQ(b.t[0]->listen_address(), address);
    EXPECT_EQ(b.t[1]->listen_address(), address);
    std::shared_ptr<TcpListener> listener;
    ASSERT_TRUE(TcpListener::get("127.0.0.1", &listener).is_ok());
    EXPECT_EQ(format_endpoint(listener->endpoint()), address);
    EXPECT_EQ(listener->endpoint_count(), 4u);
    ASSERT_TRUE(a.connect_both().is_ok());
    ASSERT_TRUE(b.connect_both().is_ok());
    EXPECT_TRUE(a.exchange(1 << 20).is_ok());
    EXPECT_TRUE(b.exchange(3 << 20).is_ok());
    EXPECT_TRUE(a.exchange(17).is_ok());
  }
  EXPECT_EQ(thread_count(), before) << "the listener closes with its last transport";
  // A later transport opens a fresh listener.
  Comm c(&store, "again/");
  EXPECT_EQ(thread_count(), before + 1);
  ASSERT_TRUE(c.connect_both().is_ok());
  EXPECT_TRUE(c.exchange(4096).is_ok());
}

// Survivors of a failure re-form a communicator of the same job (so the
// same id) while the old one is still open: each connects its own links.
TEST(TcpListener, ACommunicatorReformedBesideTheOldOneConnects) {
  MemoryStore store, other_store;
  Comm old(&store, "");
  ASSERT_TRUE(old.connect_both().is_ok());
  Comm reformed(&other_store, "");
  std::shared_ptr<TcpListener> listener;
  ASSERT_TRUE(TcpListener::get("127.0.0.1", &listener).is_ok());
  EXPECT_EQ(listener->endpoint_count(), 4u);
  ASSERT_TRUE(reformed.connect_both().is_ok());
  EXPECT_TRUE(reformed.exchange(1 << 20).is_ok());
  EXPECT_TRUE(old.exchange(1 << 20).is_ok());
}

// Reads the listener's challenge, sends a Hello made with it and returns the
// answer's code (-1 when none came).
int32_t hello_answer(const std::string& address, const Hello& hello, const std::string& secret) {
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
  HelloMessage m = make_hello_message(hello, challenge, secret);
  EXPECT_EQ(::send(fd, &m, sizeof(m), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(m)));
  HelloAck ack{};
  ssize_t n = ::recv(fd, &ack, sizeof(ack), MSG_WAITALL);
  ::close(fd);
  return n == static_cast<ssize_t>(sizeof(ack)) ? ack.code : -1;
}

TEST(TcpListener, StrangersAndOtherSecretsAreTurnedAwayPerCommunicator) {
  MemoryStore store;
  Comm a(&store, "", "secret a");
  Comm b(&store, "engine/", "secret b");
  const std::string address = a.t[0]->listen_address();
  const int32_t auth = static_cast<int32_t>(Code::kAuth);
  // A communicator this process does not have, with either secret.
  EXPECT_EQ(hello_answer(address, make_hello(job_id_from_name("nobody"), 0, 1, 2, 0, 1), "secret a"), auth);
  // B's link with A's secret: each endpoint checks its own.
  EXPECT_EQ(hello_answer(address, make_hello(job_id_from_name("jobengine/"), 0, 1, 2, 0, 1), "secret a"), auth);
  // A rank this process does not hold, of a communicator it does: told why.
  EXPECT_EQ(hello_answer(address, make_hello(job_id_from_name("job"), 0, 5, 2, 0, 1), "secret a"),
            static_cast<int32_t>(Code::kInvalidUsage));
  // Both communicators are undisturbed.
  ASSERT_TRUE(a.connect_both().is_ok());
  ASSERT_TRUE(b.connect_both().is_ok());
  EXPECT_TRUE(a.exchange(1 << 16).is_ok());
  EXPECT_TRUE(b.exchange(1 << 16).is_ok());
}

TEST(TcpListener, AbortingOneCommunicatorLeavesTheOtherWorking) {
  MemoryStore store;
  Comm a(&store, "");
  Comm b(&store, "engine/");
  // Rank 1 accepts from rank 0, which never dials: it waits in take().
  Status waited;
  std::thread waiter([&] { waited = a.t[1]->connect(0, Deadline::after_seconds(10)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  a.t[1]->abort();
  waiter.join();
  EXPECT_EQ(waited.code(), Code::kAborted) << waited.to_string();
  ASSERT_TRUE(b.connect_both().is_ok());
  EXPECT_TRUE(b.exchange(1 << 20).is_ok());
  // And a communicator closing leaves the other's endpoint in place.
  a.t[0].reset();
  a.t[1].reset();
  EXPECT_TRUE(b.exchange(1 << 20).is_ok());
}

}  // namespace
}  // namespace kolo
