// TCP with every connection sealed (KOLO_ENCRYPT, sealed_stream.h): two
// ranks as threads over an in-memory store, rank 0 dialing rank 1 through
// a relay the test puts in between (it rewrites rank 1's published
// address), which records the bytes on the wire and can flip one:
//  - messages of every size boundary arrive whole in both directions, on
//    one socket and on two, and the text they carry never shows on the wire;
//  - a byte flipped on the wire fails the receive with an error naming the
//    peer and the tampering, never with wrong data reported done;
//  - an end that encrypts and one that does not refuse each other at the
//    handshake, naming KOLO_ENCRYPT; so does a job with no secret.
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "transport/memory_store.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/test_relay.h"

namespace kolo {
namespace {

const char kSecret[] = "encrypted transport test";

struct Pair {
  MemoryStore store;
  std::unique_ptr<TcpTransport> t[2];
  std::unique_ptr<TcpRelay> relay;
  Status connected[2];
};

TcpOptions options(bool encrypt, int streams, const std::string& secret = kSecret) {
  TcpOptions o;
  o.job_id = 0xe9c;
  o.streams_per_peer = streams;
  o.secret = secret;
  o.encrypt = encrypt;
  o.handshake_timeout_s = 5;
  return o;
}

// Rank 1's address in the store replaced by a relay's (with streams > 1,
// only the first stream's bytes pass the relay... so one stream only there).
void open_pair(Pair* p, const TcpOptions& o0, const TcpOptions& o1, long flip_at = -1, bool relayed = true) {
  ASSERT_TRUE(TcpTransport::create(&p->store, 1, 2, o1, &p->t[1]).is_ok());
  ASSERT_TRUE(TcpTransport::create(&p->store, 0, 2, o0, &p->t[0]).is_ok());
  if (relayed) {
    std::string address;
    ASSERT_TRUE(p->store.get_one(o1.store_prefix + "1", Deadline::after_seconds(1), &address).is_ok());
    p->relay = std::make_unique<TcpRelay>(std::atoi(address.substr(address.rfind(':') + 1).c_str()));
    if (flip_at >= 0) p->relay->flip_byte(TcpRelay::kToTarget, flip_at);
    ASSERT_TRUE(p->store.set(o1.store_prefix + "1", "127.0.0.1:" + std::to_string(p->relay->port())).is_ok());
  }
  std::thread other([&] { p->connected[1] = p->t[1]->connect(0, Deadline::after_seconds(relayed ? 5 : 1)); });
  p->connected[0] = p->t[0]->connect(1, Deadline::after_seconds(5));
  other.join();
}

// from sends `data` to the other rank; returns the receive's status and
// what arrived.
Status exchange(Pair* p, int from, const std::string& data, std::string* got) {
  const int to = 1 - from;
  got->assign(data.size(), '\0');
  Request send, recv;
  KOLO_RETURN_IF_ERROR(p->t[to]->post_recv(from, &(*got)[0], data.size(), 77, &recv));
  KOLO_RETURN_IF_ERROR(p->t[from]->post_send(to, data.data(), data.size(), 77, &send));
  Status sent;
  std::thread sender([&] {
    while (sent.is_ok() && !send.done) sent = p->t[from]->progress(Deadline::after_seconds(5));
  });
  Status received;
  while (received.is_ok() && !recv.done) received = p->t[to]->progress(Deadline::after_seconds(5));
  if (!received.is_ok()) p->t[from]->abort();  // the sender may wait for a reader that is gone
  sender.join();
  return received;
}

std::string text_of(size_t bytes) {
  const std::string line = "the gradients of layer 7 at step 1234; ";
  std::string s;
  while (s.size() < bytes) s += line;
  s.resize(bytes);
  return s;
}

TEST(EncryptedTcp, EverySizeArrivesWholeBothWaysAndNoTextShowsOnTheWire) {
  for (int streams : {1, 2}) {
    Pair p;
    open_pair(&p, options(true, streams), options(true, streams), -1, /*relayed=*/streams == 1);
    ASSERT_TRUE(p.connected[0].is_ok()) << p.connected[0].to_string();
    ASSERT_TRUE(p.connected[1].is_ok()) << p.connected[1].to_string();
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{31}, size_t{4096}, size_t{128 << 10}, size_t{(128 << 10) + 1},
                         size_t{3 << 20}}) {
      for (int from : {0, 1}) {
        const std::string data = text_of(bytes);
        std::string got;
        Status s = exchange(&p, from, data, &got);
        ASSERT_TRUE(s.is_ok()) << bytes << " bytes from rank " << from << ": " << s.to_string();
        EXPECT_TRUE(got == data) << bytes << " bytes from rank " << from << " arrived altered";
      }
    }
    if (p.relay) {
      const std::string wire = p.relay->forwarded(TcpRelay::kToTarget);
      EXPECT_GT(wire.size(), size_t{3 << 20});
      EXPECT_EQ(wire.find("gradients of layer"), std::string::npos) << "plain text on the wire";
    }
  }
}

TEST(EncryptedTcp, WithoutEncryptionTheTextShowsOnTheWire) {  // the relay sees what it should
  Pair p;
  open_pair(&p, options(false, 1), options(false, 1));
  ASSERT_TRUE(p.connected[0].is_ok() && p.connected[1].is_ok());
  std::string got;
  ASSERT_TRUE(exchange(&p, 0, text_of(4096), &got).is_ok());
  EXPECT_NE(p.relay->forwarded(TcpRelay::kToTarget).find("gradients of layer"), std::string::npos);
}

TEST(EncryptedTcp, AByteFlippedOnTheWireFailsTheReceiveNamingThePeer) {
  // Past the handshake (24 + 88 bytes from the dialer: its hello), in the
  // first message's payload record, and in its header record.
  for (long flip_at : {long{88 + 4 + 32 + 16 + 4 + 100}, long{88 + 10}}) {
    Pair p;
    open_pair(&p, options(true, 1), options(true, 1), flip_at);
    ASSERT_TRUE(p.connected[0].is_ok() && p.connected[1].is_ok());
    const std::string data = text_of(1 << 16);
    std::string got;
    Status s = exchange(&p, 0, data, &got);
    EXPECT_EQ(s.code(), Code::kTransport) << s.to_string();
    EXPECT_NE(s.message().find("tampered or corrupt data from rank 0"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("failed to authenticate"), std::string::npos) << s.message();
  }
}

TEST(EncryptedTcp, EndsThatDisagreeOrHaveNoSecretAreRefused) {
  Pair p;
  open_pair(&p, options(true, 1), options(false, 1), -1, /*relayed=*/false);
  // The dialer is told (its peer logs which setting differs); the acceptor
  // never gets the connection it waits for.
  EXPECT_EQ(p.connected[0].code(), Code::kMismatch) << p.connected[0].to_string();
  EXPECT_NE(p.connected[0].message().find("KOLO_ENCRYPT"), std::string::npos) << p.connected[0].to_string();
  EXPECT_FALSE(p.connected[1].is_ok());
  MemoryStore store;
  std::unique_ptr<TcpTransport> t;
  const Status no_secret = TcpTransport::create(&store, 0, 2, options(true, 1, ""), &t);
  EXPECT_EQ(no_secret.code(), Code::kInvalidArgument);
  EXPECT_NE(no_secret.message().find("KOLO_SECRET"), std::string::npos) << no_secret.message();
}

}  // namespace
}  // namespace kolo
