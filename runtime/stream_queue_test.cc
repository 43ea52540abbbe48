#include "runtime/stream_queue.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace kolo {
namespace {

class Order {
 public:
  std::function<void()> note(std::string name) {
    return [this, name] {
      std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back(name);
    };
  }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> seen_;
};

TEST(StreamQueue, RunsJobsInTheOrderPushed) {
  Order order;
  StreamQueue q;
  for (const char* name : {"a", "b", "c"}) q.push(order.note(name));
  ASSERT_TRUE(q.drain(10));
  EXPECT_EQ(order.seen(), (std::vector<std::string>{"a", "b", "c"}));
}

// The case that makes it matter: another thread pushes B while A runs;
// A's callback then pushes C1 and C2. They run before B, as they would had
// the callback run before B was pushed, so every rank gets one order.
TEST(StreamQueue, WhatACallbackPushesRunsNext) {
  Order order;
  StreamQueue q;
  std::atomic<bool> b_pushed{false};
  q.push(
      [&] {
        order.note("A")();
        while (!b_pushed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      [&] {
        q.push(order.note("C1"), [&] { q.push(order.note("D")); });  // a callback of a callback's job
        q.push(order.note("C2"));
      });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // A is running
  q.push(order.note("B"));
  b_pushed = true;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (order.seen().size() < 5 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(order.seen(), (std::vector<std::string>{"A", "C1", "D", "C2", "B"}));
}

// Pushed by another thread while a callback runs: after the callback's.
TEST(StreamQueue, OtherThreadsPushAtTheEndWhileACallbackRuns) {
  Order order;
  StreamQueue q;
  std::atomic<bool> b_pushed{false};
  q.push(order.note("A"), [&] {
    std::thread other([&] {
      q.push(order.note("B"));
      b_pushed = true;
    });
    other.join();
    q.push(order.note("C"));
  });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (order.seen().size() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(b_pushed);
  EXPECT_EQ(order.seen(), (std::vector<std::string>{"A", "C", "B"}));
}

// A callback may wait for a job it pushed (PowerSGD's hook waits for the
// allreduce it just issued): the wait runs the queue forward on the
// queue's own thread instead of waiting for itself.
TEST(StreamQueue, ACallbackWaitsForWhatItPushedByRunningItHere) {
  Order order;
  StreamQueue q;
  std::atomic<bool> c_ran{false};
  StreamQueue::Ran elsewhere = StreamQueue::Ran::kOne;
  std::atomic<StreamQueue::Ran> at_the_end{StreamQueue::Ran::kOne};
  std::atomic<bool> b_then_done{false};
  q.push(order.note("A"), [&] {
    q.push([&] {
      order.note("C")();
      c_ran = true;
    });
    while (!c_ran) ASSERT_EQ(q.run_next_here(), StreamQueue::Ran::kOne);
    order.note("waited")();
    q.push(order.note("E"));  // after C ran here: still next
    ASSERT_EQ(q.run_next_here(), StreamQueue::Ran::kOne);
    q.push(order.note("F"));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  q.push(order.note("B"), [&] {
    at_the_end = q.run_next_here();
    b_then_done = true;
  });
  elsewhere = q.run_next_here();
  ASSERT_TRUE(q.drain(10));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((order.seen().size() < 6 || !b_then_done) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(order.seen(), (std::vector<std::string>{"A", "C", "waited", "E", "F", "B"}));
  EXPECT_EQ(elsewhere, StreamQueue::Ran::kNotThisThread);
  // B's callback: nothing queued behind it, so a wait there could never end.
  EXPECT_EQ(at_the_end, StreamQueue::Ran::kNothingQueued);
}

}  // namespace
}  // namespace kolo
