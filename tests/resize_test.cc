// Changing a communicator's membership (Communicator::revoke, shrink, grow;
// kolo_comm_revoke, kolo_comm_shrink, kolo_comm_grow) with ranks as
// threads: a revocation ends every rank's collective at once; the
// survivors of a dead rank, or of one alive but stuck, shrink around it
// and go on (collectives against tests/reference.h, the engine's named
// operations); a shrink that drops the unresponsive agrees on who is left;
// a split shrinks; a world grows, and a shrunk one grows back with a
// replacement; bad arguments are refused, naming them.
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/communicator_handle.h"
#include "runtime/engine.h"
#include "runtime/sibling_engine_link.h"
#include "runtime/shrink_agreement.h"
#include "tests/reference.h"
#include "tests/submissions.h"
#include "tests/thread_world.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;
using Comms = std::vector<std::unique_ptr<Communicator>>;

Config resize_config(double timeout_s = 30) {
  Config c = test_config(64 << 10, 16 << 10);
  c.timeout_s = timeout_s;
  return c;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Runs fn(i, comm) for every communicator that is not null, one thread each.
void run_on(const Comms& comms, const std::function<void(int, Communicator&)>& fn) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i < comms.size(); ++i) {
    if (comms[i]) threads.emplace_back([&, i] { fn(static_cast<int>(i), *comms[i]); });
  }
  for (auto& t : threads) t.join();
}

// Every allreduce, allgather and broadcast of the communicators (their
// ranks 0 .. n-1) against the reference, computed from their own ranks.
void expect_collectives_work(const Comms& comms) {
  int n = 0;
  for (const auto& c : comms) n += c != nullptr;
  run_on(comms, [&](int, Communicator& c) {
    ASSERT_EQ(c.size(), n);
    for (size_t count : {size_t{1}, size_t{1000}, size_t{70000}}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        auto in = ref::input_buffer(DataType::kFloat32, op, c.rank(), count);
        std::vector<unsigned char> out(in.size());
        ASSERT_TRUE(c.allreduce(in.data(), out.data(), count, DataType::kFloat32, op).is_ok()) << "rank " << c.rank();
        EXPECT_EQ(out, ref::expected_buffer(DataType::kFloat32, op, n, count)) << "rank " << c.rank() << " count " << count;
      }
    }
    std::vector<int32_t> all(n, -1);
    const int32_t mine = 100 + c.rank();
    ASSERT_TRUE(c.allgather(&mine, all.data(), 1, DataType::kInt32).is_ok());
    for (int r = 0; r < n; ++r) EXPECT_EQ(all[r], 100 + r);
    int64_t word = c.rank() == n - 1 ? 4242 : 0;
    ASSERT_TRUE(c.broadcast(&word, 1, DataType::kInt64, n - 1).is_ok());
    EXPECT_EQ(word, 4242);
  });
}

// The survivors (every rank of w not in `gone`) shrink w's communicators
// without `exclude`; returns the new ones at the survivors' indices.
Comms shrink_all(ThreadWorld& w, const std::vector<int>& gone, const std::vector<int>& exclude, int flags,
                 std::vector<Status>* got = nullptr) {
  Comms out(w.size());
  std::vector<Status> status(w.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < w.size(); ++r) {
    if (std::find(gone.begin(), gone.end(), r) != gone.end()) continue;
    threads.emplace_back([&, r] { status[r] = w.comm(r).shrink(exclude, flags, &out[r]); });
  }
  for (auto& t : threads) t.join();
  if (got) {
    *got = status;
  } else {
    for (int r = 0; r < w.size(); ++r) EXPECT_TRUE(status[r].is_ok()) << "rank " << r << ": " << status[r].to_string();
  }
  return out;
}

TEST(Revoke, EndsTheCollectiveOnEveryRankWithRevoked) {
  const int n = 4;
  ThreadWorld w(n, resize_config());
  std::atomic<bool> started{false};
  std::vector<Status> got(n);
  std::vector<double> took(n);
  std::thread revoker([&] {
    while (!started.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    w.comm(1).revoke();  // while rank 1's thread is inside a collective
  });
  const auto start = Clock::now();
  w.run([&](int r) {
    const size_t count = 1 << 20;
    std::vector<float> in(count, 1.0f), out(count);
    started = true;
    for (int i = 0; i < 100000; ++i) {
      got[r] = w.comm(r).allreduce(in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum);
      if (!got[r].is_ok()) break;
    }
    took[r] = seconds_since(start);
  });
  revoker.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(got[r].code(), Code::kRevoked) << "rank " << r << ": " << got[r].to_string();
    EXPECT_NE(got[r].message().find("rank 1 revoked"), std::string::npos) << got[r].message();
    EXPECT_LT(took[r], 5.0) << "rank " << r;
  }
  // Later calls fail at once, with the same code.
  std::vector<float> x(10);
  EXPECT_EQ(w.comm(3).allreduce(x.data(), x.data(), 10, DataType::kFloat32, ReduceOp::kSum).code(), Code::kRevoked);
}

TEST(Revoke, DoesNotWaitForAStuckPeer) {
  // Rank 1 never calls anything (alive, stuck); rank 0 is inside a
  // collective waiting for it. Revoking rank 0 ends its call at once.
  ThreadWorld w(2, resize_config());
  Status got;
  std::thread caller([&] {
    std::vector<float> x(1000, 1.0f);
    got = w.comm(0).allreduce(x.data(), x.data(), x.size(), DataType::kFloat32, ReduceOp::kSum);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = Clock::now();
  w.comm(0).revoke();
  caller.join();
  EXPECT_LT(seconds_since(start), 3.0);
  EXPECT_EQ(got.code(), Code::kRevoked) << got.to_string();
}

TEST(Revoke, FailsTheEnginesNamedOperationsWithRevoked) {
  // Rank 0 submits a named allreduce the others never do, then revokes:
  // its handle ends with REVOKED (not ABORTED), at once, and the engine
  // refuses more work with the same code.
  ThreadWorld w(3, resize_config());
  std::vector<std::unique_ptr<CommunicatorHandle>> comms;
  for (int r = 0; r < w.size(); ++r) comms.push_back(std::make_unique<CommunicatorHandle>(w.take(r)));
  w.run([&](int r) {
    std::vector<float> in(64, 1.0f), out(64);
    std::shared_ptr<OpHandle> warm;
    ASSERT_TRUE(comms[r]->engine()->submit(allreduce_submission("warm", in.data(), out.data(), 64), &warm).is_ok());
    ASSERT_TRUE(warm->wait(Deadline::after_seconds(30)).is_ok()) << "rank " << r;
  });
  std::vector<float> in(64, 1.0f), out(64);
  std::shared_ptr<OpHandle> pending;
  ASSERT_TRUE(comms[0]->engine()->submit(allreduce_submission("alone", in.data(), out.data(), 64), &pending).is_ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = Clock::now();
  comms[0]->revoke();
  Status s = pending->wait(Deadline::after_seconds(10));
  EXPECT_LT(seconds_since(start), 3.0);
  EXPECT_EQ(s.code(), Code::kRevoked) << s.to_string();
  std::shared_ptr<OpHandle> later;
  Status submitted = comms[0]->engine()->submit(allreduce_submission("later", in.data(), out.data(), 64), &later);
  if (submitted.is_ok()) submitted = later->wait(Deadline::after_seconds(10));
  EXPECT_EQ(submitted.code(), Code::kRevoked) << submitted.to_string();
}

TEST(Shrink, SurvivorsOfADeadRankGoOnWithoutIt) {
  for (int dead : {0, 2}) {
    SCOPED_TRACE("dead rank " + std::to_string(dead));
    const int n = 4;
    ThreadWorld w(n, resize_config());
    w.release(dead);  // its connections close
    // The survivors find out, then shrink around it.
    w.run([&](int r) {
      if (r == dead) return;
      std::vector<float> x(1000, 1.0f);
      Status s = w.comm(r).allreduce(x.data(), x.data(), x.size(), DataType::kFloat32, ReduceOp::kSum);
      EXPECT_FALSE(s.is_ok()) << "rank " << r;
    });
    const auto start = Clock::now();
    Comms shrunk = shrink_all(w, {dead}, {dead}, Communicator::kShrinkDefault);
    EXPECT_LT(seconds_since(start), 10.0);
    for (int r = 0; r < n; ++r) {
      if (r == dead) continue;
      ASSERT_NE(shrunk[r], nullptr);
      EXPECT_EQ(shrunk[r]->rank(), r < dead ? r : r - 1) << "ranks keep their order";
    }
    expect_collectives_work(shrunk);
  }
}

TEST(Shrink, AroundARankAliveButStuck) {
  // Rank 3 keeps its communicator and never calls shrink: nobody waits for it.
  const int n = 4;
  ThreadWorld w(n, resize_config());
  const auto start = Clock::now();
  Comms shrunk = shrink_all(w, {3}, {3}, Communicator::kShrinkAbort);
  EXPECT_LT(seconds_since(start), 10.0);
  expect_collectives_work(shrunk);
}

TEST(Shrink, DroppingTheUnresponsiveAgreesOnWhoIsLeft) {
  // Rank 1 is gone, rank 3 alive but stuck; the survivors name nobody and
  // let the shrink find out, within the (short) deadline.
  const int n = 5;
  ThreadWorld w(n, resize_config(4));
  w.release(1);
  const auto start = Clock::now();
  Comms shrunk = shrink_all(w, {1, 3}, {}, Communicator::kShrinkDropUnresponsive | Communicator::kShrinkAbort);
  const double took = seconds_since(start);
  EXPECT_LT(took, 4.0 + 5.0);
  for (int r : {0, 2, 4}) ASSERT_NE(shrunk[r], nullptr) << "rank " << r;
  EXPECT_EQ(shrunk[0]->rank(), 0);
  EXPECT_EQ(shrunk[2]->rank(), 1);
  EXPECT_EQ(shrunk[4]->rank(), 2);
  expect_collectives_work(shrunk);
  // The stuck rank wakes up and tries to join: it is told it was left out.
  std::unique_ptr<Communicator> late;
  Status s = w.comm(3).shrink({}, Communicator::kShrinkDropUnresponsive, &late);
  EXPECT_EQ(s.code(), Code::kTimeout) << s.to_string();
  EXPECT_NE(s.message().find("not in the shrunk communicator"), std::string::npos) << s.message();
  EXPECT_EQ(late, nullptr);
}

TEST(Shrink, DisagreeingExclusionsAreAMismatch) {
  ThreadWorld w(3, resize_config(5));
  std::vector<Status> got(3);
  Comms out(3);
  w.run([&](int r) {
    if (r == 2) return;
    got[r] = w.comm(r).shrink(r == 0 ? std::vector<int>{2} : std::vector<int>{}, 0, &out[r]);
  });
  // One of ranks 0 and 1 wrote its proposal first; the other is told (and
  // the first then waits in vain for the members it proposed, until its
  // deadline).
  const int loser = got[0].code() == Code::kMismatch ? 0 : 1;
  EXPECT_EQ(got[loser].code(), Code::kMismatch) << got[loser].to_string();
  EXPECT_NE(got[loser].message().find("every survivor must exclude the same ranks"), std::string::npos);
  EXPECT_FALSE(got[1 - loser].is_ok());
  EXPECT_NE(got[1 - loser].code(), Code::kMismatch) << got[1 - loser].to_string();
}

TEST(Shrink, BadArgumentsAreRefusedNamingThem) {
  ThreadWorld w(2, resize_config());
  std::unique_ptr<Communicator> out;
  Status s = w.comm(0).shrink({0}, 0, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("excludes itself"), std::string::npos) << s.message();
  s = w.comm(0).shrink({5}, 0, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("rank 5"), std::string::npos) << s.message();
  s = w.comm(0).shrink({1}, 64, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("flags 64"), std::string::npos) << s.message();
  s = w.comm(0).grow(2, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("has 2 already"), std::string::npos) << s.message();
  // None of that touched the communicator.
  w.run([&](int r) {
    int32_t x = 1, y = 0;
    ASSERT_TRUE(w.comm(r).allreduce(&x, &y, 1, DataType::kInt32, ReduceOp::kSum).is_ok());
    EXPECT_EQ(y, 2);
  });
}

TEST(Shrink, ASplitShrinksAndItsEngineRunsNamedOperations) {
  // The split's ranks 0..3 are the world's 3..0 (AsSplit); split rank 1 dies.
  ThreadWorld w(4, resize_config(), ThreadWorld::AsSplit{});
  w.release(1);
  Comms shrunk = shrink_all(w, {1}, {1}, Communicator::kShrinkAbort);
  expect_collectives_work(shrunk);
  std::vector<std::unique_ptr<Engine>> engines(shrunk.size());
  for (size_t i = 0; i < shrunk.size(); ++i) {
    if (shrunk[i]) engines[i] = make_sibling_engine(shrunk[i].get());
  }
  run_on(shrunk, [&](int i, Communicator& c) {
    std::vector<float> in(4096, static_cast<float>(c.rank() + 1)), out(4096, 0);
    std::shared_ptr<OpHandle> h;
    ASSERT_TRUE(engines[i]->submit(allreduce_submission("grad", in.data(), out.data(), 4096), &h).is_ok());
    ASSERT_TRUE(h->wait(Deadline::after_seconds(30)).is_ok()) << "rank " << c.rank();
    EXPECT_EQ(out[0], 6.0f);  // 1 + 2 + 3
    EXPECT_EQ(out[4095], 6.0f);
  });
  engines.clear();
}

// Ranks old .. size-1 join `comms`' grow to `size` as threads, beside the
// old ranks' grow calls. Returns every rank's grown communicator.
Comms grow_all(const Comms& comms, Store& store, int size) {
  int old = 0;
  for (const auto& c : comms) old += c != nullptr;
  const Communicator* any = nullptr;
  for (const auto& c : comms) any = any ? any : c.get();
  const Communicator::GrowPlace place = any->next_grow();
  Comms grown(size);
  std::vector<Status> status(size);
  std::vector<std::thread> threads;
  for (const auto& c : comms) {
    if (!c) continue;
    Communicator* comm = c.get();
    threads.emplace_back([&, comm] { status[comm->rank()] = comm->grow(size, &grown[comm->rank()]); });
  }
  for (int r = old; r < size; ++r) {
    threads.emplace_back([&, r] {
      status[r] = Communicator::join_grown(Rendezvous::borrow(&store), place, r, size, resize_config(), &grown[r]);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) EXPECT_TRUE(status[r].is_ok()) << "rank " << r << ": " << status[r].to_string();
  return grown;
}

TEST(Grow, TwoRanksBecomeFive) {
  ThreadWorld w(2, resize_config());
  // Borrow the world's communicators as a Comms (released again below).
  Comms grown;
  {
    Comms view;
    for (int r = 0; r < 2; ++r) view.emplace_back(&w.comm(r));
    grown = grow_all(view, w.store(), 5);
    for (auto& c : view) c.release();
  }
  for (int r = 0; r < 5; ++r) ASSERT_NE(grown[r], nullptr);
  for (int r = 0; r < 5; ++r) EXPECT_EQ(grown[r]->rank(), r);
  expect_collectives_work(grown);
  // The old world goes on beside it.
  w.run([&](int r) {
    int32_t x = 1, y = 0;
    ASSERT_TRUE(w.comm(r).allreduce(&x, &y, 1, DataType::kInt32, ReduceOp::kSum).is_ok());
    EXPECT_EQ(y, 2);
  });
}

TEST(Grow, AShrunkWorldGrowsBackWithAReplacement) {
  const int n = 4;
  ThreadWorld w(n, resize_config());
  w.release(1);
  Comms shrunk = shrink_all(w, {1}, {1}, Communicator::kShrinkAbort);
  Comms survivors;
  for (auto& c : shrunk) {
    if (c) survivors.push_back(std::move(c));
  }
  Comms grown = grow_all(survivors, w.store(), n);
  expect_collectives_work(grown);
}

TEST(ShrinkAgreement, MemberListsRoundTripAndDamageIsRefused) {
  std::vector<int> m;
  ASSERT_TRUE(decode_members(encode_members({0, 2, 7}), 8, &m).is_ok());
  EXPECT_EQ(m, (std::vector<int>{0, 2, 7}));
  for (const char* bad : {"", ",", "1,", "2,1", "1,1", "0,8", "a", "0,,1", "-1", "1234567890"}) {
    EXPECT_FALSE(decode_members(bad, 8, &m).is_ok()) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace kolo
