// The rendezvous store: its operations, its authentication, and strangers
// on its port that must not disturb it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/lingering_store.h"
#include "runtime/rendezvous.h"
#include "runtime/store_client.h"
#include "runtime/store_server.h"
#include "transport/test_relay.h"

namespace kolo {
namespace {

constexpr uint64_t kJob = 77;
const char kSecret[] = "store secret";

struct Served {
  Served() : server(kJob, 4, kSecret) { EXPECT_TRUE(server.start("127.0.0.1", 0).is_ok()); }
  Status client(int rank, const std::string& secret, std::unique_ptr<StoreClient>* out, uint64_t job = kJob) {
    return StoreClient::connect("127.0.0.1", server.port(), job, rank, secret, 30, Deadline::after_seconds(5), out);
  }
  StoreServer server;
};

TEST(Store, SetGetWaitAndTimeout) {
  Served s;
  std::unique_ptr<StoreClient> a, b;
  ASSERT_TRUE(s.client(0, kSecret, &a).is_ok());
  ASSERT_TRUE(s.client(1, kSecret, &b).is_ok());
  ASSERT_TRUE(a->set("x", "1").is_ok());
  std::vector<std::string> v;
  // b waits for "y", which a sets a little later.
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(a->set("y", std::string(100000, 'y')).is_ok());
  });
  ASSERT_TRUE(b->get({"x", "y"}, Deadline::after_seconds(5), &v).is_ok());
  later.join();
  EXPECT_EQ(v[0], "1");
  EXPECT_EQ(v[1].size(), 100000u);
  Status t = b->get({"x", "never"}, Deadline::after_seconds(0.2), &v);
  EXPECT_EQ(t.code(), Code::kTimeout);
  EXPECT_NE(t.message().find("never"), std::string::npos);
  EXPECT_EQ(t.message().find("x "), std::string::npos) << "only missing keys are named";
}

TEST(Store, SetIfAbsentKeepsTheFirstValue) {
  Served s;
  std::unique_ptr<StoreClient> a, b;
  ASSERT_TRUE(s.client(0, kSecret, &a).is_ok());
  ASSERT_TRUE(s.client(1, kSecret, &b).is_ok());
  std::string cur;
  ASSERT_TRUE(a->set_if_absent("k", "first", Deadline::after_seconds(5), &cur).is_ok());
  EXPECT_EQ(cur, "first");
  ASSERT_TRUE(b->set_if_absent("k", "second", Deadline::after_seconds(5), &cur).is_ok());
  EXPECT_EQ(cur, "first");
}

TEST(Store, RejectsWrongSecretJobAndRank) {
  Served s;
  std::unique_ptr<StoreClient> c;
  EXPECT_EQ(s.client(0, "wrong", &c).code(), Code::kAuth);
  EXPECT_EQ(s.client(0, "", &c).code(), Code::kAuth);
  EXPECT_EQ(s.client(4, kSecret, &c).code(), Code::kAuth);  // beyond the world
  EXPECT_TRUE(s.client(3, kSecret, &c).is_ok());
  // Another job with the same secret: waited for (it may be an earlier run
  // of this job about to go), until the deadline.
  Status other =
      StoreClient::connect("127.0.0.1", s.server.port(), kJob + 1, 0, kSecret, 30, Deadline::after_seconds(0.3), &c);
  EXPECT_EQ(other.code(), Code::kTimeout);
  EXPECT_NE(other.message().find("another run of this job"), std::string::npos) << other.message();
}

// A process that shuts down and initializes again (Horovod's tests do) runs
// the job anew on the same port: a rank that comes back first finds the
// previous run's store, and must wait for the new one rather than fail.
TEST(Store, ClientWaitsForItsRunWhenThePortStillServesThePrevious) {
  auto previous = std::make_unique<StoreServer>(kJob, 4, kSecret);
  ASSERT_TRUE(previous->start("127.0.0.1", 0).is_ok());
  const int port = previous->port();
  std::unique_ptr<StoreClient> c;
  Status connected;
  std::thread next_run([&] {
    connected = StoreClient::connect("127.0.0.1", port, kJob + 1, 1, kSecret, 30, Deadline::after_seconds(10), &c);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  previous.reset();
  StoreServer current(kJob + 1, 4, kSecret);
  ASSERT_TRUE(current.start("127.0.0.1", port).is_ok());
  next_run.join();
  ASSERT_TRUE(connected.is_ok()) << connected.message();
  ASSERT_TRUE(c->set("run", "current").is_ok());
}

TEST(Store, ClientRefusesAServerWithoutTheSecret) {
  StoreServer impostor(kJob, 4, "impostor");
  ASSERT_TRUE(impostor.start("127.0.0.1", 0).is_ok());
  std::unique_ptr<StoreClient> c;
  Status st = StoreClient::connect("127.0.0.1", impostor.port(), kJob, 0, kSecret, 30, Deadline::after_seconds(5), &c);
  EXPECT_EQ(st.code(), Code::kAuth);
}

sockaddr_in loopback(int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  return sa;
}

// A raw TCP connection to 127.0.0.1:port, or -1.
int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa = loopback(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) return fd;
  ::close(fd);
  return -1;
}

// A raw connection to the store that sends `bytes` and waits until the
// server closes it; returns true if it was closed within 3 s.
bool stranger_is_dropped(int port, const std::string& bytes) {
  const int fd = connect_loopback(port);
  if (fd < 0) return false;
  if (!bytes.empty()) ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  bool closed = false;
  char buf[256];
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < until) {
    struct pollfd p {fd, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed = true;
        break;
      }
    }
  }
  ::close(fd);
  return closed;
}

TEST(Store, StrangersAreDroppedWithoutDisturbingMembers) {
  Served s;
  std::unique_ptr<StoreClient> member;
  ASSERT_TRUE(s.client(0, kSecret, &member).is_ok());
  // A huge length field: never allocated, the connection is dropped.
  EXPECT_TRUE(stranger_is_dropped(s.server.port(), std::string("\xff\xff\xff\xff", 4)));
  // A plausible length with garbage inside.
  EXPECT_TRUE(stranger_is_dropped(s.server.port(), std::string("\x10\x00\x00\x00", 4) + std::string(16, 'g')));
  // A first message larger than any hello.
  EXPECT_TRUE(stranger_is_dropped(s.server.port(), std::string("\x00\x10\x00\x00", 4) + std::string(4096, 'g')));
  // Meanwhile a silent stranger holds a connection open; members carry on.
  const int silent = connect_loopback(s.server.port());
  ASSERT_GE(silent, 0);
  ASSERT_TRUE(member->set("still", "working").is_ok());
  std::unique_ptr<StoreClient> late;
  ASSERT_TRUE(s.client(2, kSecret, &late).is_ok());
  std::string v;
  ASSERT_TRUE(late->get_one("still", Deadline::after_seconds(2), &v).is_ok());
  EXPECT_EQ(v, "working");
  ::close(silent);
}

// Communicators split from one world share its store client: a split
// waiting for keys that never come must not hold back another's get, and
// aborting the split ends its wait at once.
TEST(Store, SplitViewsWaitApartAndEndWhenCancelled) {
  Served s;
  std::shared_ptr<StoreClient> client;
  {
    std::unique_ptr<StoreClient> c;
    ASSERT_TRUE(s.client(0, kSecret, &c).is_ok());
    client = std::move(c);
  }
  PrefixStore stuck(client, "split0.0/"), other(client, "split1.0/");
  Status waited;
  std::thread waiter([&] {
    std::vector<std::string> v;
    waited = stuck.get({"never"}, Deadline::after_seconds(20), &v);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(other.set("k", "v").is_ok());
  std::string value;
  Status got = other.get_one("k", Deadline::after_seconds(2), &value);
  ASSERT_TRUE(got.is_ok()) << got.to_string();  // not behind the stuck get
  EXPECT_EQ(value, "v");
  stuck.cancel(Status(Code::kAborted, "the split was aborted"));
  waiter.join();
  EXPECT_EQ(waited.code(), Code::kAborted) << waited.message();
}

// Rank 0 is done, other ranks are not: its server, handed over, serves them
// on while the handing over returns at once and frees the port.
TEST(Store, OutlivesItsOwnerWhileOtherRanksAreConnected) {
  auto server = std::make_unique<StoreServer>(kJob, 4, kSecret);
  ASSERT_TRUE(server->start("127.0.0.1", 0).is_ok());
  const int port = server->port();
  std::unique_ptr<StoreClient> own, other;
  ASSERT_TRUE(StoreClient::connect("127.0.0.1", port, kJob, 0, kSecret, 30, Deadline::after_seconds(5), &own).is_ok());
  ASSERT_TRUE(StoreClient::connect("127.0.0.1", port, kJob, 1, kSecret, 30, Deadline::after_seconds(5), &other).is_ok());
  ASSERT_TRUE(own->set("x", "1").is_ok());
  ASSERT_EQ(server->clients().size(), 2u);
  for (const StoreServer::Client& c : server->clients()) {
    EXPECT_TRUE(is_this_process_store_client(c.endpoint)) << "rank " << c.rank << " at " << c.endpoint;
  }
  own.reset();
  const auto handed = std::chrono::steady_clock::now();
  serve_until_clients_leave(std::move(server), Deadline::after_seconds(60));
  EXPECT_LT(std::chrono::steady_clock::now() - handed, std::chrono::seconds(1)) << "handing over must not wait";

  StoreServer next(kJob + 1, 4, kSecret);
  EXPECT_TRUE(next.start("127.0.0.1", port).is_ok()) << "the port is free for the job's next run";
  std::string value;
  ASSERT_TRUE(other->get_one("x", Deadline::after_seconds(2), &value).is_ok());
  EXPECT_EQ(value, "1");
  ASSERT_TRUE(other->set("y", "2").is_ok());
}

// A server that took its last client and then stopped accepting has no
// work left on its I/O thread; its destructor must still not wait for it.
TEST(Store, EndsPromptlyAfterItStopsAccepting) {
  auto server = std::make_unique<StoreServer>(kJob, 4, kSecret);
  ASSERT_TRUE(server->start("127.0.0.1", 0).is_ok());
  {
    std::unique_ptr<StoreClient> c;
    ASSERT_TRUE(
        StoreClient::connect("127.0.0.1", server->port(), kJob, 1, kSecret, 30, Deadline::after_seconds(5), &c).is_ok());
  }
  server->stop_accepting();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the client's close is seen
  const auto start = std::chrono::steady_clock::now();
  server.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
}

// Every request to a store that stops answering ends by its deadline (set:
// the client's request timeout), and the connection, out of step since,
// refuses the next at once rather than read a late answer as its own.
TEST(Store, EveryRequestEndsByItsDeadlineWhenTheStoreStopsAnswering) {
  Served s;
  TcpRelay relay(s.server.port());
  std::unique_ptr<StoreClient> c;
  ASSERT_TRUE(StoreClient::connect("127.0.0.1", relay.port(), kJob, 0, kSecret, /*request_timeout_s=*/0.4,
                                   Deadline::after_seconds(5), &c)
                  .is_ok());
  ASSERT_TRUE(c->set("warm", "1").is_ok());
  relay.freeze();
  const auto took = [](const std::function<Status()>& call, Code* code) {
    const auto start = std::chrono::steady_clock::now();
    *code = call().code();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  Code code;
  EXPECT_LT(took([&] { return c->set("a", "1"); }, &code), 1.5);
  EXPECT_EQ(code, Code::kTimeout);
  // Out of step now: the next request fails at once, whatever its deadline.
  std::string current;
  EXPECT_LT(took([&] { return c->set_if_absent("b", "1", Deadline::after_seconds(30), &current); }, &code), 0.1);
  EXPECT_EQ(code, Code::kTimeout);
  // A fresh connection through a frozen relay: each call ends by its own deadline.
  TcpRelay second(s.server.port());
  std::unique_ptr<StoreClient> d;
  ASSERT_TRUE(StoreClient::connect("127.0.0.1", second.port(), kJob, 1, kSecret, 30, Deadline::after_seconds(5), &d)
                  .is_ok());
  second.freeze();
  std::vector<std::string> values;
  // (Its answer is awaited a second past the deadline: a store's trip.)
  EXPECT_LT(took([&] { return d->get({"never"}, Deadline::after_seconds(0.5), &values); }, &code), 2.5);
  EXPECT_EQ(code, Code::kTimeout);
  TcpRelay third(s.server.port());
  std::unique_ptr<StoreClient> e;
  ASSERT_TRUE(StoreClient::connect("127.0.0.1", third.port(), kJob, 2, kSecret, 30, Deadline::after_seconds(5), &e)
                  .is_ok());
  third.freeze();
  EXPECT_LT(took([&] { return e->set_if_absent("c", "1", Deadline::after_seconds(0.5), &current); }, &code), 1.5);
  EXPECT_EQ(code, Code::kTimeout);
}

// A store that accepts and never says a word: connecting ends by its deadline.
TEST(Store, ConnectingToAStoreThatNeverAnswersEndsByItsDeadline) {
  Served s;
  TcpRelay relay(s.server.port());
  relay.freeze();
  std::unique_ptr<StoreClient> c;
  const auto start = std::chrono::steady_clock::now();
  Status st = StoreClient::connect("127.0.0.1", relay.port(), kJob, 0, kSecret, 30, Deadline::after_seconds(0.5), &c);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.5);
  EXPECT_EQ(st.code(), Code::kTimeout) << st.to_string();
}

// The look a shrink takes at the store before trusting it: answered at
// once by a store that serves, ended by its deadline by one that is stuck,
// refused at once by one whose process has gone.
TEST(Store, PingTellsAServingStoreFromAStuckOrLostOne) {
  auto s = std::make_unique<Served>();
  std::unique_ptr<StoreClient> live;
  ASSERT_TRUE(s->client(0, kSecret, &live).is_ok());
  EXPECT_TRUE(live->ping(Deadline::after_seconds(1)).is_ok());
  TcpRelay relay(s->server.port());
  std::unique_ptr<StoreClient> stuck;
  ASSERT_TRUE(StoreClient::connect("127.0.0.1", relay.port(), kJob, 1, kSecret, 30, Deadline::after_seconds(5), &stuck)
                  .is_ok());
  EXPECT_TRUE(stuck->ping(Deadline::after_seconds(1)).is_ok());
  relay.freeze();
  const auto start = std::chrono::steady_clock::now();
  Status st = stuck->ping(Deadline::after_seconds(0.3));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  EXPECT_EQ(st.code(), Code::kTimeout) << st.to_string();
  s.reset();  // the store's process ends: its connections close
  st = live->ping(Deadline::after_seconds(5));
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.code(), Code::kTimeout) << "a closed store is told at once, not by the deadline: " << st.to_string();
}

// KOLO_ENCRYPT=1: after the handshake every message is sealed. Nothing a
// client stores shows on the wire; a client that does not seal is refused
// naming the setting; a reply altered on the way fails the request.
TEST(Store, SealedMessagesHideTheirKeysAndRefuseTampering) {
  StoreServer server(kJob, 4, kSecret, /*encrypt=*/true);
  ASSERT_TRUE(server.start("127.0.0.1", 0).is_ok());
  TcpRelay relay(server.port());
  std::unique_ptr<StoreClient> c;
  ASSERT_TRUE(StoreClient::connect("127.0.0.1", relay.port(), kJob, 0, kSecret, 30, Deadline::after_seconds(5), &c,
                                   /*encrypt=*/true)
                  .is_ok());
  ASSERT_TRUE(c->set("host/0", "visible-host-name").is_ok());
  std::vector<std::string> values;
  ASSERT_TRUE(c->get({"host/0"}, Deadline::after_seconds(1), &values).is_ok());
  EXPECT_EQ(values[0], "visible-host-name");
  std::string current;
  ASSERT_TRUE(c->set_if_absent("first", "rank 0", Deadline::after_seconds(1), &current).is_ok());
  EXPECT_EQ(current, "rank 0");
  EXPECT_EQ(relay.forwarded(TcpRelay::kToTarget).find("visible-host"), std::string::npos) << "a stored value on the wire";
  EXPECT_EQ(relay.forwarded(TcpRelay::kToTarget).find("host/0"), std::string::npos) << "a key on the wire";

  std::unique_ptr<StoreClient> plain;
  Status refused = StoreClient::connect("127.0.0.1", server.port(), kJob, 1, kSecret, 30, Deadline::after_seconds(5),
                                        &plain, /*encrypt=*/false);
  EXPECT_EQ(refused.code(), Code::kAuth) << refused.to_string();
  EXPECT_NE(refused.message().find("KOLO_ENCRYPT"), std::string::npos) << refused.message();

  TcpRelay tampering(server.port());
  std::unique_ptr<StoreClient> d;
  ASSERT_TRUE(StoreClient::connect("127.0.0.1", tampering.port(), kJob, 2, kSecret, 30, Deadline::after_seconds(5), &d,
                                   /*encrypt=*/true)
                  .is_ok());
  // The challenge (28 bytes) and the handshake's OK (41) came in the
  // clear; the next reply is sealed: one of its bytes is flipped.
  tampering.flip_byte(TcpRelay::kFromTarget, 28 + 41 + 6);
  Status s = d->set("x", "1");
  EXPECT_EQ(s.code(), Code::kTransport) << s.to_string();
  EXPECT_NE(s.message().find("tampered or corrupt reply"), std::string::npos) << s.message();
}

// A standby store holds its port from listen() on: a client that comes
// before it serves waits in the backlog and is served once it does.
TEST(Store, AStandbyServesTheClientsThatCameBeforeItDid) {
  StoreServer standby(kJob, 1 << 20, kSecret);
  ASSERT_TRUE(standby.listen("127.0.0.1", 0).is_ok());
  EXPECT_FALSE(standby.serving());
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    standby.serve();
  });
  std::unique_ptr<StoreClient> c;
  Status st = StoreClient::connect("127.0.0.1", standby.port(), kJob, 1000, kSecret, 30, Deadline::after_seconds(5), &c);
  later.join();
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_TRUE(standby.serving());
  std::string current;
  ASSERT_TRUE(c->set_if_absent("members", "1,2,3", Deadline::after_seconds(1), &current).is_ok());
  EXPECT_EQ(current, "1,2,3");
}

}  // namespace
}  // namespace kolo
