// The per-peer transport and receives from any peer: each peer's own
// transport answers can_peek, try_connect and peek, watch() gives each
// transport only its own peers, and a sleep with no request in flight
// waits in the transport that watches; a peer whose transport has no
// AnySource (RDMA has none) is UNSUPPORTED. Fake transports, no wire.
#include "transport/per_peer_transport.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace kolo {
namespace {

// Records what it is asked; peeks only if `peeks`.
class Fake final : public DirectTransport, public AnySource {
 public:
  Fake(const char* name, bool peeks) : name_(name), peeks_(peeks) {}
  int rank() const override { return 0; }
  int size() const override { return 4; }
  const char* name() const override { return name_; }
  Status connect(int, Deadline) override { return Status::ok(); }
  Status post_send(int, const void*, size_t, uint64_t, Request*) override { return Status::ok(); }
  Status post_recv(int, void*, size_t, uint64_t, Request*) override { return Status::ok(); }
  Status progress(Deadline) override { return Status::ok(); }
  void abort() override {}
  void interrupt() override {}
  Status pump(Pumped* pumped) override {
    pumped->noticed = noticed;
    return Status::ok();
  }
  Status sleep(Deadline, Pumped*) override {
    ++sleeps;
    return Status::ok();
  }
  bool has_pending() override { return false; }
  std::string describe_pending() override { return ""; }

  // Only a transport that peeks has an AnySource (RDMA has none).
  AnySource* any_source() override { return peeks_ ? this : nullptr; }
  bool can_peek(int) const override { return true; }
  Status try_connect(int peer, Deadline, bool* connected) override {
    asked.push_back(peer);
    *connected = true;
    return Status::ok();
  }
  Status peek(int peer, Arrival* next) override {
    asked.push_back(peer);
    next->state = Arrival::kArrived;
    next->tag = static_cast<uint64_t>(peer);
    return Status::ok();
  }
  Status watch(const std::vector<int>& peers) override {
    watched = peers;
    return Status::ok();
  }
  bool watching() const override { return !watched.empty(); }

  std::vector<int> asked, watched;
  bool noticed = false;
  int sleeps = 0;

 private:
  const char* name_;
  bool peeks_;
};

struct World {
  Fake* shm;
  Fake* ib;
  std::unique_ptr<PerPeerTransport> t;

  World() {
    auto a = std::make_unique<Fake>("shm", true);
    auto b = std::make_unique<Fake>("ib", false);
    shm = a.get();
    ib = b.get();
    std::vector<std::unique_ptr<DirectTransport>> ts;
    ts.push_back(std::move(b));
    ts.push_back(std::move(a));
    // Ranks 1 and 2 over shared memory, 3 over RDMA (the first transport,
    // where a sleep with nothing in flight and nothing watched goes).
    Status s = PerPeerTransport::create(std::move(ts), {1, 1, 1, 0}, &t);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
};

TEST(PerPeerPeek, EachPeersTransportAnswers) {
  World w;
  EXPECT_TRUE(w.t->any_source()->can_peek(1));
  EXPECT_TRUE(w.t->any_source()->can_peek(2));
  EXPECT_FALSE(w.t->any_source()->can_peek(3));
  bool connected = false;
  ASSERT_TRUE(w.t->any_source()->try_connect(2, Deadline::after_seconds(1), &connected).is_ok());
  EXPECT_TRUE(connected);
  Arrival next;
  ASSERT_TRUE(w.t->any_source()->peek(1, &next).is_ok());
  EXPECT_EQ(next.state, Arrival::kArrived);
  EXPECT_EQ(next.tag, 1u);
  EXPECT_EQ(w.shm->asked, (std::vector<int>{2, 1}));
  // The defaults: UNSUPPORTED, naming the transport, and nothing seen.
  Status s = w.t->any_source()->peek(3, &next);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("ib transport"), std::string::npos) << s.to_string();
  EXPECT_EQ(next.state, Arrival::kNothing);
  EXPECT_EQ(w.t->any_source()->try_connect(3, Deadline::after_seconds(1), &connected).code(), Code::kUnsupported);
  EXPECT_FALSE(connected);
}

TEST(PerPeerPeek, WatchGivesEachTransportItsOwnPeersAndTheSleepWaitsInIt) {
  World w;
  ASSERT_TRUE(w.t->any_source()->watch({1, 2}).is_ok());
  EXPECT_EQ(w.shm->watched, (std::vector<int>{1, 2}));
  // No request in flight: the sleep is the watching transport's.
  EXPECT_EQ(w.t->progress(Deadline::after(std::chrono::milliseconds(20))).code(), Code::kTimeout);
  EXPECT_GT(w.shm->sleeps, 0);
  EXPECT_EQ(w.ib->sleeps, 0);
  // What the watching transport notices ends the wait.
  w.shm->noticed = true;
  EXPECT_TRUE(w.t->progress(Deadline::after_seconds(5)).is_ok());
  ASSERT_TRUE(w.t->any_source()->watch({}).is_ok());
  EXPECT_TRUE(w.shm->watched.empty());
  // A peer over a transport that cannot peek cannot be watched.
  EXPECT_EQ(w.t->any_source()->watch({1, 3}).code(), Code::kUnsupported);
}

}  // namespace
}  // namespace kolo
