// The shared-memory arena on its own, ranks as threads of one process over
// an in-memory store (the conformance suites run the shared-memory
// allreduce on it; the kill test kills a rank of it): a barrier makes each
// rank's writes visible to all and releases them together, round after
// round; no segment is left in /dev/shm once every rank has mapped it; an
// abort ends a waiting barrier at once and the others see the rank closed;
// a rank that never arrives is a TIMEOUT naming it. The one-shot
// exchange likewise: every rank's bytes of every round, a fingerprint that
// differs named, a late poster waited for, and the same ends. Reading a
// peer's memory: every rank may where the kernel lets each, and none may
// where one rank cannot.
#include "transport/shm/shm_arena.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cstddef>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/memory_store.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;

struct Arenas {
  MemoryStore store;
  std::vector<std::unique_ptr<ShmArena>> a;

  // before(r): what rank r's thread does first.
  Arenas(int n, uint64_t job_id, const std::function<void(int)>& before = nullptr) : a(n) {
    ShmArenaOptions o;
    o.job_id = job_id;
    o.slot_bytes = 4096;
    run([&](int r) {
      if (before) before(r);
      Status s = ShmArena::create(&store, r, n, o, Deadline::after_seconds(10), &a[r]);
      EXPECT_TRUE(s.is_ok()) << "rank " << r << ": " << s.to_string();
    });
  }
  void run(const std::function<void(int)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < static_cast<int>(a.size()); ++r) threads.emplace_back(fn, r);
    for (auto& t : threads) t.join();
  }
};

size_t segments_of(uint64_t job_id) {
  char prefix[64];
  std::snprintf(prefix, sizeof(prefix), "kolo-%llx-arena", static_cast<unsigned long long>(job_id));
  size_t found = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) found += std::strncmp(e->d_name, prefix, std::strlen(prefix)) == 0;
    closedir(d);
  }
  return found;
}

TEST(ShmArena, BarriersMakeWritesVisibleRoundAfterRound) {
  const int n = 4;
  Arenas arenas(n, 0xa1);
  arenas.run([&](int r) {
    ShmArena& a = *arenas.a[r];
    for (uint64_t round = 0; round < 2000; ++round) {
      const uint64_t mine = round * 100 + r;
      std::memcpy(a.slot(r), &mine, sizeof(mine));
      ASSERT_TRUE(a.barrier(Deadline::after_seconds(30)).is_ok());
      for (int q = 0; q < n; ++q) {
        uint64_t theirs = 0;
        std::memcpy(&theirs, a.slot(q), sizeof(theirs));
        ASSERT_EQ(theirs, round * 100 + q) << "rank " << r << " reading rank " << q << " in round " << round;
      }
      // Nobody writes the next round's value before everyone has read this one.
      ASSERT_TRUE(a.barrier(Deadline::after_seconds(30)).is_ok());
    }
  });
}

TEST(ShmArena, NoSegmentIsLeftOnceEveryRankMappedIt) {
  Arenas arenas(3, 0xa2);
  EXPECT_EQ(segments_of(0xa2), 0u);
}

TEST(ShmArena, AbortEndsAWaitingBarrierAndTheOthersSeeTheRankClosed) {
  Arenas arenas(2, 0xa3);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    arenas.a[1]->abort();
  });
  const auto start = Clock::now();
  Status s = arenas.a[0]->barrier(Deadline::after_seconds(60));
  aborter.join();
  EXPECT_EQ(s.code(), Code::kPeerLost) << s.to_string();
  EXPECT_NE(s.message().find("rank 1 (shared memory) closed its end"), std::string::npos) << s.message();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(arenas.a[1]->barrier(Deadline::after_seconds(60)).code(), Code::kAborted);
}

TEST(ShmArena, ARankThatGoesAwayIsLostWithinASecond) {
  Arenas arenas(3, 0xa4);
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    arenas.a[2].reset();
  });
  const auto start = Clock::now();
  Status s[2];
  arenas.run([&](int r) {
    if (r < 2) s[r] = arenas.a[r]->barrier(Deadline::after_seconds(60));
  });
  closer.join();
  for (int r = 0; r < 2; ++r) EXPECT_EQ(s[r].code(), Code::kPeerLost) << s[r].to_string();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

TEST(ShmArena, ARankThatNeverArrivesIsATimeoutNamingIt) {
  Arenas arenas(3, 0xa5);
  Status s[2];
  arenas.run([&](int r) {
    if (r < 2) s[r] = arenas.a[r]->barrier(Deadline::after_seconds(0.3));
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(s[r].code(), Code::kTimeout) << s[r].to_string();
    EXPECT_NE(s[r].message().find("waiting for rank(s) 2"), std::string::npos) << s[r].message();
  }
}

// What rank r posts in round k: a size that varies up to a full mailbox
// (on the posting line up to kInlineBytes, and either side of that edge),
// and bytes no other rank or round posts.
size_t posted_bytes(uint64_t round) {
  switch (round % 7) {
    case 0:
      return SharedArena::kMailboxBytes;
    case 1:
      return 1 + round % SharedArena::kInlineBytes;
    case 2:
      return SharedArena::kInlineBytes + round % 2;
    default:
      return 1 + round * 131 % 5000;
  }
}
unsigned char posted_byte(int r, uint64_t round, size_t i) { return static_cast<unsigned char>(r * 31 + round * 7 + i); }

TEST(ShmArena, ExchangesShowEveryRanksBytesRoundAfterRoundBesideBarriers) {
  // With barrier rounds through the slots in between (as the arena's
  // other collectives run between one-shot allreduces), and no barrier
  // between exchanges: each rank starts its next exchange as soon as it
  // has read this one, while a slower one may still read.
  const int n = 4;
  Arenas arenas(n, 0xa7);
  arenas.run([&](int r) {
    ShmArena& a = *arenas.a[r];
    for (uint64_t round = 0; round < 600; ++round) {
      if (round % 5 == 4) {
        const size_t half = a.next_half();
        std::memset(a.slot(r) + half, static_cast<int>(round), 64);
        ASSERT_TRUE(a.barrier(Deadline::after_seconds(30)).is_ok());
        continue;
      }
      const size_t bytes = posted_bytes(round);
      unsigned char* out = a.outbox(bytes);
      for (size_t i = 0; i < bytes; ++i) out[i] = posted_byte(r, round, i);
      int differs = -2;
      ASSERT_TRUE(a.exchange(round, 30, nullptr, &differs).is_ok());
      ASSERT_EQ(differs, -1);
      for (int q = 0; q < n; ++q) {
        ASSERT_EQ(a.fingerprint_of(q), round);
        const unsigned char* in = a.inbox(q, bytes);
        for (size_t i = 0; i < bytes; ++i) {
          ASSERT_EQ(in[i], posted_byte(q, round, i)) << "rank " << r << " reading rank " << q << " round " << round;
        }
      }
    }
  });
}

TEST(ShmArena, AnExchangeNamesTheRankWhoseFingerprintDiffers) {
  const int n = 3;
  Arenas arenas(n, 0xa8);
  std::vector<int> differs(n, -2);
  arenas.run([&](int r) {
    ASSERT_TRUE(arenas.a[r]->exchange(r == 2 ? 99 : 42, 30, nullptr, &differs[r]).is_ok());
  });
  EXPECT_EQ(differs[0], 2);
  EXPECT_EQ(differs[1], 2);
  EXPECT_EQ(differs[2], 0);  // the first that differs from its own
  EXPECT_EQ(arenas.a[0]->fingerprint_of(2), 99u);
}

TEST(ShmArena, AnExchangeWaitsForALatePosterAndAsksWhileItWaits) {
  // Past its spin the waiter sleeps, and the poster's post wakes it.
  Arenas arenas(2, 0xa9);
  int asked = 0;
  Status waited;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    int differs = 0;
    EXPECT_TRUE(arenas.a[1]->exchange(7, 30, nullptr, &differs).is_ok());
  });
  int differs = -2;
  waited = arenas.a[0]->exchange(7, 30, [&](int q) {
    EXPECT_EQ(q, 1);
    ++asked;
    return Status::ok();
  }, &differs);
  late.join();
  EXPECT_TRUE(waited.is_ok()) << waited.to_string();
  EXPECT_EQ(differs, -1);
  EXPECT_GE(asked, 1) << "asked at each wake-up while it waited";
}

TEST(ShmArena, WhatTheStalledCallbackSaysEndsTheWait) {
  Arenas arenas(2, 0xaa);
  int differs = -2;
  const auto start = Clock::now();
  Status s = arenas.a[0]->exchange(7, 60, [](int q) {
    return mismatch("rank " + std::to_string(q) + " runs something else");
  }, &differs);
  EXPECT_EQ(s.code(), Code::kMismatch) << s.to_string();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(arenas.a[0]->barrier(Deadline::after_seconds(1)).code(), Code::kMismatch) << "sticky";
}

// Rank 0 of two waits in an exchange that rank 1 never posts to, and rank
// `aborting` aborts its arena from another thread 200 ms in: what rank 0's
// exchange returns, which must come within 2 s.
Status exchange_while_a_rank_aborts(Arenas& arenas, int aborting) {
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    arenas.a[aborting]->abort();
  });
  int differs = -2;
  const auto start = Clock::now();
  Status s = arenas.a[0]->exchange(1, 60, nullptr, &differs);
  aborter.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  return s;
}

TEST(ShmArena, AnExchangeEndsOnAbortOrALostRankAndTimesOutNamingWhoIsMissing) {
  {
    // Aborted from another thread of its own rank, asleep waiting for a
    // peer that never posts.
    Arenas arenas(2, 0xad);
    const Status s = exchange_while_a_rank_aborts(arenas, 0);
    EXPECT_EQ(s.code(), Code::kAborted) << s.to_string();
  }
  {
    Arenas arenas(2, 0xab);
    const Status s = exchange_while_a_rank_aborts(arenas, 1);
    EXPECT_EQ(s.code(), Code::kPeerLost) << s.to_string();
    int differs = -2;
    EXPECT_EQ(arenas.a[1]->exchange(1, 60, nullptr, &differs).code(), Code::kAborted);
  }
  {
    Arenas arenas(3, 0xac);
    Status s[2];
    arenas.run([&](int r) {
      int differs = -2;
      if (r < 2) s[r] = arenas.a[r]->exchange(1, 0.3, nullptr, &differs);
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(s[r].code(), Code::kTimeout) << s[r].to_string();
      EXPECT_NE(s[r].message().find("waiting for rank 2"), std::string::npos) << s[r].message();
    }
  }
}

TEST(ShmArena, EveryRankReadsItsPeersMemoryWhereTheKernelLetsIt) {
  // Ranks as threads of one process: each may read the others' memory (the
  // same process; between processes, ptrace's rules for one user, which
  // the collectives' tests run over), and read_peer gathers what it reads
  // from several pieces into several.
  const int n = 3;
  Arenas arenas(n, 0xad);
  std::vector<std::vector<uint32_t>> data(n, std::vector<uint32_t>(5000));
  for (int q = 0; q < n; ++q) {
    for (size_t i = 0; i < data[q].size(); ++i) data[q][i] = static_cast<uint32_t>(q * 100000 + i);
  }
  arenas.run([&](int r) {
    ShmArena& a = *arenas.a[r];
    ASSERT_TRUE(a.reads_peers()) << "this machine's kernel lets a process read its own memory";
    const int q = (r + 1) % n;
    std::vector<uint32_t> got(3000, 0), more(1000, 0);
    // Elements 100..2100 and 3000..5000 of rank q's data, into `got` and then `more`.
    const iovec remote[] = {{&data[q][100], 2000 * 4}, {&data[q][3000], 2000 * 4}};
    const iovec local[] = {{got.data(), got.size() * 4}, {more.data(), more.size() * 4}};
    ASSERT_TRUE(a.read_peer(q, local, 2, remote, 2).is_ok());
    for (size_t i = 0; i < 2000; ++i) ASSERT_EQ(got[i], q * 100000 + 100 + i) << i;
    for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(got[2000 + i], q * 100000 + 3000 + i) << i;
    for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(more[i], q * 100000 + 4000 + i) << i;
    // Memory that is not there: an error naming the rank, not a crash.
    const iovec nowhere{reinterpret_cast<void*>(uintptr_t{16}), 8};
    const iovec into{got.data(), 8};
    Status s = a.read_peer(q, &into, 1, &nowhere, 1);
    EXPECT_EQ(s.code(), Code::kTransport) << s.to_string();
    EXPECT_NE(s.message().find("rank " + std::to_string(q)), std::string::npos) << s.message();
  });
}

TEST(ShmArena, AReadThatFailsOnAPeerThatAbortedNamesThatPeerLost) {
  // A rank whose communicator failed aborts its arena, and its caller may
  // then free the buffers it posted: a peer's read of them fails, and that
  // is the aborted rank lost (PEER_LOST naming it), not this transport's
  // fault.
  Arenas arenas(2, 0xae);
  ASSERT_TRUE(arenas.a[0]->reads_peers());
  arenas.a[1]->abort();
  uint64_t word = 0;
  const iovec freed{reinterpret_cast<void*>(uintptr_t{16}), 8};
  const iovec into{&word, 8};
  Status s = arenas.a[0]->read_peer(1, &into, 1, &freed, 1);
  EXPECT_EQ(s.code(), Code::kPeerLost) << s.to_string();
  EXPECT_NE(s.message().find("rank 1 (shared memory) closed its end"), std::string::npos) << s.message();
}

TEST(ShmArena, WhereOneRankCannotReadItsPeersNoRankReads) {
  // Rank 1's thread is refused process_vm_readv (seccomp, as a container's
  // profile may refuse it): its probe fails, so every rank goes without,
  // and read_peer says why.
  Arenas arenas(3, 0xae, [](int r) {
    if (r != 1) return;
    sock_filter refuse[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{sizeof(refuse) / sizeof(refuse[0]), refuse};
    ASSERT_EQ(::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
    ASSERT_EQ(::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program), 0);  // this thread only
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_NE(arenas.a[r], nullptr);
    EXPECT_FALSE(arenas.a[r]->reads_peers()) << "rank " << r;
  }
  uint64_t word = 0;
  const iovec v{&word, sizeof word};
  EXPECT_EQ(arenas.a[0]->read_peer(2, &v, 1, &v, 1).code(), Code::kUnsupported);
}

TEST(ShmArena, EveryRankGoesWithoutItWhenRankZeroCouldNotMakeIt) {
  // What rank 0 publishes when /dev/shm has no room: an empty name.
  MemoryStore store;
  ASSERT_TRUE(store.set("shm/arena", "").is_ok());
  ShmArenaOptions o;
  o.job_id = 0xa6;
  std::unique_ptr<ShmArena> a;
  Status s = ShmArena::create(&store, 1, 2, o, Deadline::after_seconds(5), &a);
  EXPECT_EQ(s.code(), Code::kUnsupported) << s.to_string();
  EXPECT_EQ(a, nullptr);
}

}  // namespace
}  // namespace kolo
