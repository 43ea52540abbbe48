// The part of the Transport contract that receives from any peer rely on
// (any_source.h: can_peek, try_connect, peek, watch), as one suite that each
// transport able to peek instantiates with a factory of its own
// (INSTANTIATE_TEST_SUITE_P(Name, PeekConformance, Values(factory))). Ranks
// are threads of the test over an in-memory store:
//  - peek shows the next message's size and tag without taking it: the
//    receive posted after takes it whole, and the next peek shows the one
//    after;
//  - a receive pending hides the messages behind it;
//  - watch makes a waiting progress() return when a message arrives or the
//    peer closes, and not before; an empty watch ends that;
//  - try_connect completes a pair without the peer's help where it can
//    (this rank dials, or the peer's half is there), and otherwise puts
//    this rank's half in place so that the peer's connect() returns, as
//    the lower and as the higher rank of a pair;
//  - what a peer sent before closing is still seen and taken, then the
//    peer is seen closed.
#pragma once

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "transport/any_source.h"
#include "transport/memory_store.h"
#include "transport/transport.h"

namespace kolo {

// Makes rank `rank` of `size` over `store`; each call of one test gets the
// same job id.
using PeekTransportFactory =
    std::function<Status(Store* store, int rank, int size, std::unique_ptr<Transport>* out)>;

class PeekConformance : public ::testing::TestWithParam<PeekTransportFactory> {
 protected:
  using Clock = std::chrono::steady_clock;

  void make(int size) {
    t_.resize(size);
    for (int r = 0; r < size; ++r) {
      Status s = GetParam()(&store_, r, size, &t_[r]);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
    }
  }
  // Rank r's receiving from any peer, which every transport of this suite has.
  AnySource* any(int r) {
    AnySource* a = t_[r]->any_source();
    EXPECT_NE(a, nullptr) << t_[r]->name() << " has no AnySource";
    return a;
  }
  // Connects a and b, each from its own thread.
  void connect(int a, int b) {
    Status sb;
    std::thread other([&] { sb = t_[b]->connect(a, Deadline::after_seconds(10)); });
    Status sa = t_[a]->connect(b, Deadline::after_seconds(10));
    other.join();
    ASSERT_TRUE(sa.is_ok()) << sa.to_string();
    ASSERT_TRUE(sb.is_ok()) << sb.to_string();
  }
  static Status wait_for(Transport* t, Request* r) {
    const Deadline deadline = Deadline::after_seconds(10);
    while (!r->done) KOLO_RETURN_IF_ERROR(t->progress(deadline));
    return Status::ok();
  }
  // from sends `bytes` bytes of value `fill` with `tag` to `to`, progressing
  // until the send is done (the bytes are in the socket or the ring).
  void send(int from, int to, size_t bytes, unsigned char fill, uint64_t tag) {
    std::vector<unsigned char> out(bytes, fill);
    Request r;
    ASSERT_TRUE(t_[from]->post_send(to, out.data(), bytes, tag, &r).is_ok());
    Status s = wait_for(t_[from].get(), &r);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  }
  // `at` peeks at `peer` until it sees something other than nothing, or 10 s.
  Arrival await_arrival(int at, int peer) {
    Arrival next;
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < until) {
      Status s = any(at)->peek(peer, &next);
      EXPECT_TRUE(s.is_ok()) << s.to_string();
      if (!s.is_ok() || next.state != Arrival::kNothing) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return next;
  }
  // `at` receives a message of `bytes` with `tag` from `peer` and checks
  // that it is all `fill`.
  void receive(int at, int peer, size_t bytes, unsigned char fill, uint64_t tag) {
    std::vector<unsigned char> in(bytes, 0);
    Request r;
    ASSERT_TRUE(t_[at]->post_recv(peer, in.data(), bytes, tag, &r).is_ok());
    Status s = wait_for(t_[at].get(), &r);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(in, std::vector<unsigned char>(bytes, fill));
  }

  // try_connect from `receiver` to `sender` (of 3 ranks), which then
  // connects and sends 300 bytes.
  void try_connect_then_receive(int receiver, int sender) {
    make(3);
    bool connected = true;
    ASSERT_TRUE(any(receiver)->try_connect(sender, Deadline::after_seconds(10), &connected).is_ok());
    // Either done already (this rank dialed) or its half is in place: the
    // sender connects without the receiver's connect().
    Status sent;
    std::thread other([&] {
      sent = t_[sender]->connect(receiver, Deadline::after_seconds(10));
      if (sent.is_ok()) send(sender, receiver, 300, 3, 77);
    });
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (!connected && Clock::now() < until) {
      Status s = any(receiver)->try_connect(sender, Deadline::after_seconds(10), &connected);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      if (!connected) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    other.join();
    ASSERT_TRUE(sent.is_ok()) << sent.to_string();
    ASSERT_TRUE(connected);
    Arrival next = await_arrival(receiver, sender);
    ASSERT_EQ(next.state, Arrival::kArrived);
    EXPECT_EQ(next.bytes, 300u);
    receive(receiver, sender, 300, 3, 77);
    // Connected now: try_connect says so at once.
    ASSERT_TRUE(any(receiver)->try_connect(sender, Deadline::after_seconds(1), &connected).is_ok());
    EXPECT_TRUE(connected);
  }

  MemoryStore store_;
  std::vector<std::unique_ptr<Transport>> t_;
};

TEST_P(PeekConformance, ShowsTheNextMessageAndLeavesItForTheReceive) {
  make(2);
  connect(0, 1);
  ASSERT_TRUE(any(1)->can_peek(0));
  Arrival next;
  ASSERT_TRUE(any(1)->peek(0, &next).is_ok());
  EXPECT_EQ(next.state, Arrival::kNothing);
  // Sizes around what transports stage or cut: an empty message, one
  // byte, 100 KiB.
  const std::vector<size_t> sizes = {0, 1, 100 << 10, 7};
  for (size_t i = 0; i < sizes.size(); ++i) send(0, 1, sizes[i], static_cast<unsigned char>(i + 1), 100 + i);
  for (size_t i = 0; i < sizes.size(); ++i) {
    next = await_arrival(1, 0);
    ASSERT_EQ(next.state, Arrival::kArrived) << "message " << i;
    EXPECT_EQ(next.bytes, sizes[i]);
    EXPECT_EQ(next.tag, 100 + i);
    // Looking again changes nothing.
    ASSERT_TRUE(any(1)->peek(0, &next).is_ok());
    EXPECT_EQ(next.state, Arrival::kArrived);
    EXPECT_EQ(next.bytes, sizes[i]);
    receive(1, 0, sizes[i], static_cast<unsigned char>(i + 1), 100 + i);
  }
  ASSERT_TRUE(any(1)->peek(0, &next).is_ok());
  EXPECT_EQ(next.state, Arrival::kNothing);
}

TEST_P(PeekConformance, APendingReceiveHidesTheMessagesBehindIt) {
  make(2);
  connect(0, 1);
  std::vector<unsigned char> first(64);
  Request r;
  ASSERT_TRUE(t_[1]->post_recv(0, first.data(), first.size(), 5, &r).is_ok());
  send(0, 1, 64, 1, 5);
  send(0, 1, 32, 2, 6);
  // Let the second one arrive too; the receive is not progressed, so it is
  // still pending.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Arrival next;
  ASSERT_TRUE(any(1)->peek(0, &next).is_ok());
  EXPECT_EQ(next.state, Arrival::kNothing) << "a pending receive's message is not the next unposted one";
  Status s = wait_for(t_[1].get(), &r);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(first, std::vector<unsigned char>(64, 1));
  next = await_arrival(1, 0);
  ASSERT_EQ(next.state, Arrival::kArrived);
  EXPECT_EQ(next.bytes, 32u);
  EXPECT_EQ(next.tag, 6u);
  receive(1, 0, 32, 2, 6);
}

TEST_P(PeekConformance, WatchWakesAWaitingProgressOnArrivalAndOnClose) {
  make(3);
  connect(0, 2);
  connect(1, 2);
  // Nothing watched, nothing posted: progress() waits out its deadline.
  EXPECT_EQ(t_[2]->progress(Deadline::after(std::chrono::milliseconds(50))).code(), Code::kTimeout);
  ASSERT_TRUE(any(2)->watch({0, 1}).is_ok());
  EXPECT_EQ(t_[2]->progress(Deadline::after(std::chrono::milliseconds(50))).code(), Code::kTimeout)
      << "nothing has arrived yet";
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    send(1, 2, 1000, 9, 42);
  });
  const auto start = Clock::now();
  Status s = t_[2]->progress(Deadline::after_seconds(10));
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  sender.join();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_GT(took, 0.1);
  EXPECT_LT(took, 5.0) << "the arrival woke the wait";
  Arrival next;
  ASSERT_TRUE(any(2)->peek(1, &next).is_ok());
  ASSERT_EQ(next.state, Arrival::kArrived);
  EXPECT_EQ(next.tag, 42u);
  // While rank 1's message waits, watching it returns at once; watching
  // only rank 0 waits again. Then rank 0 closes, which wakes it.
  EXPECT_TRUE(t_[2]->progress(Deadline::after_seconds(10)).is_ok());
  ASSERT_TRUE(any(2)->watch({0}).is_ok());
  EXPECT_EQ(t_[2]->progress(Deadline::after(std::chrono::milliseconds(50))).code(), Code::kTimeout);
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    t_[0].reset();
  });
  s = t_[2]->progress(Deadline::after_seconds(10));
  closer.join();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  ASSERT_TRUE(any(2)->peek(0, &next).is_ok());
  EXPECT_EQ(next.state, Arrival::kClosed);
  ASSERT_TRUE(any(2)->watch({}).is_ok());
  receive(2, 1, 1000, 9, 42);
}

TEST_P(PeekConformance, TryConnectAsTheLowerRankOfThePair) { try_connect_then_receive(0, 2); }

TEST_P(PeekConformance, TryConnectAsTheHigherRankOfThePair) { try_connect_then_receive(2, 0); }

TEST_P(PeekConformance, WhatAClosedPeerSentIsStillSeenAndTaken) {
  make(2);
  connect(0, 1);
  send(0, 1, 5000, 4, 11);
  send(0, 1, 0, 0, 12);
  t_[0].reset();
  for (uint64_t tag : {11, 12}) {
    Arrival next = await_arrival(1, 0);
    ASSERT_EQ(next.state, Arrival::kArrived) << "tag " << tag;
    EXPECT_EQ(next.tag, tag);
    receive(1, 0, next.bytes, tag == 11 ? 4 : 0, tag);
  }
  Arrival next = await_arrival(1, 0);
  EXPECT_EQ(next.state, Arrival::kClosed);
}

}  // namespace kolo
