#include "transport/progress_loop.h"

#include <thread>

#include <gtest/gtest.h>

namespace kolo {
namespace {

// A transport with nothing to move: pump finds nothing, sleep waits on the
// wake eventfd alone.
struct Idle {
  explicit Idle(ProgressLoop* loop) : loop(loop) {}
  Status run(Deadline deadline) {
    return loop->run(
        deadline, [this](Pumped*) { ++pumps; return Status::ok(); },
        [this](Deadline d, Pumped*) {
          ++sleeps;
          int ready = 0;
          return loop->wait(&fds, d.remaining_ms(), &ready);
        },
        [] { return std::string("receiving message 3 from rank 1"); });
  }
  // Whether the wake eventfd is readable now.
  bool wake_pending() {
    int ready = 0;
    EXPECT_TRUE(loop->wait(&fds, 0, &ready).is_ok());
    return ready > 0;
  }
  ProgressLoop* loop;
  std::vector<pollfd> fds;
  int pumps = 0;
  int sleeps = 0;
};

class ProgressLoopTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(loop.open().is_ok()); }
  // Runs `action` on another thread 50 ms from now, while this one waits.
  template <typename Action>
  std::thread soon(Action action) {
    return std::thread([action] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      action();
    });
  }
  ProgressLoop loop;
};

TEST_F(ProgressLoopTest, ReturnsOnceARequestCompletes) {
  int calls = 0;
  Status s = loop.run(
      Deadline::after_seconds(5),
      [&](Pumped* p) {
        if (++calls == 3) p->completed = 1;
        return Status::ok();
      },
      [](Deadline, Pumped*) { return Status::ok(); }, [] { return std::string(); });
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(calls, 3);
}

// A watched peer's message (Transport::watch) ends the wait as a completed
// request does, whether the pump or the sleep saw it.
TEST_F(ProgressLoopTest, ReturnsOnceAWatchedPeersMessageIsNoticed) {
  for (bool in_sleep : {false, true}) {
    int calls = 0;
    Status s = loop.run(
        Deadline::after_seconds(5),
        [&](Pumped* p) {
          if (++calls == 3 && !in_sleep) p->noticed = true;
          return Status::ok();
        },
        [&](Deadline, Pumped* p) {
          p->noticed = in_sleep;
          return Status::ok();
        },
        [] { return std::string(); });
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    if (!in_sleep) {
      EXPECT_EQ(calls, 3);
    }
  }
}

TEST_F(ProgressLoopTest, ATransportErrorEndsTheWait) {
  Status s = loop.run(
      Deadline::after_seconds(5), [](Pumped*) { return peer_lost("rank 1 closed the connection"); },
      [](Deadline, Pumped*) { return Status::ok(); }, [] { return std::string(); });
  EXPECT_EQ(s.code(), Code::kPeerLost);
}

TEST_F(ProgressLoopTest, TimeoutNamesWhatIsPending) {
  loop.set_polling(0, false);
  Idle idle(&loop);
  Status s = idle.run(Deadline::after(std::chrono::milliseconds(20)));
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_NE(s.message().find("no progress before the deadline while receiving message 3 from rank 1"),
            std::string::npos)
      << s.message();
  EXPECT_GE(idle.sleeps, 1);
}

TEST_F(ProgressLoopTest, NothingPostedIsSaid) {
  loop.set_polling(0, false);
  Status s = loop.run(
      Deadline::after(std::chrono::milliseconds(1)), [](Pumped*) { return Status::ok(); },
      [](Deadline, Pumped*) { return Status::ok(); }, [] { return std::string(); });
  EXPECT_NE(s.message().find("no progress before the deadline while nothing posted"), std::string::npos)
      << s.message();
}

TEST_F(ProgressLoopTest, InterruptReturnsOkAndIsConsumed) {
  Idle idle(&loop);
  loop.interrupt();  // before the call: the next one returns at once
  EXPECT_TRUE(idle.run(Deadline::after_seconds(5)).is_ok());
  EXPECT_EQ(idle.pumps, 0);
  EXPECT_FALSE(idle.wake_pending()) << "an interrupt's count must be consumed, or later sleeps return at once";
  // Only once: the call after it waits again.
  loop.set_polling(0, false);
  EXPECT_EQ(idle.run(Deadline::after(std::chrono::milliseconds(20))).code(), Code::kTimeout);
}

TEST_F(ProgressLoopTest, InterruptWakesASleepingWait) {
  loop.set_polling(0, false);
  Idle idle(&loop);
  std::thread other = soon([this] { loop.interrupt(); });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(idle.run(Deadline::after_seconds(30)).is_ok());
  other.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_FALSE(idle.wake_pending());
}

TEST_F(ProgressLoopTest, AbortIsForeverAndLeavesTheWakeReadable) {
  loop.set_polling(0, false);
  Idle idle(&loop);
  std::thread other = soon([this] { EXPECT_TRUE(loop.abort()); });
  EXPECT_EQ(idle.run(Deadline::after_seconds(30)).code(), Code::kAborted);
  other.join();
  EXPECT_FALSE(loop.abort()) << "aborted already";
  EXPECT_TRUE(loop.aborted());
  loop.interrupt();  // an abort outranks an interrupt
  EXPECT_EQ(idle.run(Deadline::after_seconds(30)).code(), Code::kAborted);
  EXPECT_TRUE(idle.wake_pending()) << "after an abort every sleep must return at once";
  EXPECT_TRUE(idle.wake_pending());
}

}  // namespace
}  // namespace kolo
