// The shared-memory transport on its own, two ranks as threads of one
// process over an in-memory store (the conformance suites run every
// collective over it with KOLO_TRANSPORT=shm; the process tests kill a
// rank): the ring tells a new chunk from a stale one by the slot alone;
// messages of every size around the slot size keep their order and
// bytes; a size or tag that disagrees is MISMATCH; an abort ends a waiting
// progress() at once; a peer that closes is PEER_LOST within a second; a
// peer whose process ended before this rank connected is connected to, its
// messages read, and only then lost; and no segment is left in /dev/shm
// once the pair is connected.
#include "transport/shm/shm_transport.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/memory_store.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;

ShmOptions small_rings(uint64_t job_id) {
  ShmOptions o;
  o.job_id = job_id;
  o.ring.slots = 4;
  o.ring.slot_bytes = 1024;
  return o;
}

// Two connected transports.
struct Pair {
  MemoryStore store;
  std::unique_ptr<ShmTransport> t[2];

  explicit Pair(uint64_t job_id) {
    for (int r = 0; r < 2; ++r) {
      Status s = ShmTransport::create(&store, r, 2, small_rings(job_id), &t[r]);
      EXPECT_TRUE(s.is_ok()) << s.to_string();
    }
    Status s[2];
    std::thread other([&] { s[1] = t[1]->connect(0, Deadline::after_seconds(10)); });
    s[0] = t[0]->connect(1, Deadline::after_seconds(10));
    other.join();
    EXPECT_TRUE(s[0].is_ok()) << s[0].to_string();
    EXPECT_TRUE(s[1].is_ok()) << s[1].to_string();
  }
};

Status wait_for(Transport* t, const std::vector<Request*>& requests, double seconds) {
  const Deadline deadline = Deadline::after_seconds(seconds);
  for (;;) {
    bool all = true;
    for (Request* r : requests) all = all && r->done;
    if (all) return Status::ok();
    KOLO_RETURN_IF_ERROR(t->progress(deadline));
  }
}

std::vector<std::string> kolo_segments(uint64_t job_id) {
  std::vector<std::string> names;
  char prefix[64];
  std::snprintf(prefix, sizeof(prefix), "kolo-%llx-", static_cast<unsigned long long>(job_id));
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (std::strncmp(e->d_name, prefix, std::strlen(prefix)) == 0) names.push_back(e->d_name);
    }
    closedir(d);
  }
  return names;
}

TEST(ShmRingShape, RingsGrowWithTheRanksOnTheHostNotTheirSquare) {
  // Up to 17 ranks on a machine: the default rings (8 slots of 128 KiB).
  for (int ranks : {1, 2, 4, 8, 17}) {
    const ShmRingShape shape = ShmRingShape::for_ranks_on_host(ranks);
    EXPECT_EQ(shape.slots, ShmRingShape{}.slots) << ranks;
    EXPECT_EQ(shape.slot_bytes, ShmRingShape{}.slot_bytes) << ranks;
  }
  // Beyond, a rank's rings to all its machine's peers stay within the
  // budget (plus each ring's header and chunk headers), in whole pages.
  uint64_t previous = ShmRingShape{}.slot_bytes;
  for (int ranks : {18, 24, 32, 48, 64, 100, 129}) {
    const ShmRingShape shape = ShmRingShape::for_ranks_on_host(ranks);
    const uint64_t per_rank = static_cast<uint64_t>(ranks - 1) * shape.segment_bytes();
    EXPECT_LE(per_rank, ShmRingShape::kRingBytesPerRank + static_cast<uint64_t>(ranks - 1) * 1024) << ranks;
    EXPECT_GE(shape.slot_bytes, uint64_t{16} << 10) << ranks;
    EXPECT_EQ(shape.slot_bytes % 4096, 0u) << ranks;
    EXPECT_LE(shape.slot_bytes, previous) << ranks;
    previous = shape.slot_bytes;
  }
  // 64 ranks: about 1 GiB of rings on the machine, not 4.
  const uint64_t machine = 64ull * 63 * ShmRingShape::for_ranks_on_host(64).segment_bytes();
  EXPECT_LT(machine, uint64_t{1100} << 20);
  EXPECT_EQ(ShmRingShape::for_ranks_on_host(1000).slot_bytes, uint64_t{16} << 10);  // the floor
}

TEST(ShmRingShape, SlotsAreAPowerOfTwoOfAtLeast64Bytes) {
  EXPECT_TRUE((ShmRingShape{2, 64}.valid()));
  EXPECT_TRUE((ShmRingShape{8, 128 << 10}.valid()));
  EXPECT_FALSE((ShmRingShape{1, 64}.valid()));
  EXPECT_FALSE((ShmRingShape{6, 64}.valid())) << "not a power of two";
  EXPECT_FALSE((ShmRingShape{8, 63}.valid()));
  EXPECT_FALSE((ShmRingShape{8, uint64_t{1} << 32}.valid()));
}

TEST(ShmRing, EverySlotStartsOnACacheLineSoASmallChunkIsOneLine) {
  const std::string name = "/kolo-ring-line-test-" + std::to_string(::getpid());
  ShmRing out, in;
  // A payload size that is not a multiple of a line, and one that is.
  for (uint64_t slot_bytes : {uint64_t{100}, uint64_t{128 << 10}}) {
    ASSERT_TRUE(ShmRing::create(name, ShmRingShape{8, slot_bytes}, 7, 0, 1, &out).is_ok());
    ASSERT_TRUE(ShmRing::open_and_unlink(name, 7, 0, 1, &in).is_ok());
    for (uint64_t m = 0; m < 8; ++m) {
      size_t offset = 0;
      ASSERT_TRUE(out.write_chunk(&m, sizeof(m), m, &offset));
      const ShmChunk* c = in.peek();
      ASSERT_NE(c, nullptr);
      const auto at = reinterpret_cast<uintptr_t>(c);
      EXPECT_EQ(at % 64, 0u) << "slot " << m << " of " << slot_bytes << " bytes";
      // The header and the first 32 bytes of payload: one line.
      EXPECT_LE(sizeof(ShmChunk) + 32, 64u);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(in.payload(c)) / 64, at / 64);
      in.release();
    }
  }
}

TEST(ShmRing, TheReceiverSeesAChunkFromItsSlotAndNotOneFromTheLastLap) {
  const std::string name = "/kolo-ring-test-" + std::to_string(::getpid());
  ShmRing out, in;
  ASSERT_TRUE(ShmRing::create(name, ShmRingShape{4, 64}, 7, 0, 1, &out).is_ok());
  ASSERT_TRUE(ShmRing::open_and_unlink(name, 7, 0, 1, &in).is_ok());
  EXPECT_EQ(in.peek(), nullptr) << "a new ring is empty";
  // Two laps and a half: every slot once written, read and then stale.
  for (uint64_t m = 0; m < 10; ++m) {
    const uint64_t value = 1000 + m;
    size_t offset = 0;
    ASSERT_TRUE(out.write_chunk(&value, sizeof(value), m, &offset)) << m;
    const ShmChunk* c = in.peek();
    ASSERT_NE(c, nullptr) << m;
    EXPECT_EQ(c->tag, m);
    uint64_t got = 0;
    std::memcpy(&got, in.payload(c), sizeof(got));
    EXPECT_EQ(got, value);
    in.release();
    // The slot the next chunk goes to still holds one from the last lap.
    EXPECT_EQ(in.peek(), nullptr) << "after message " << m;
  }
  // Full: the sender sees it from `tail`, and again once a chunk is read.
  for (uint64_t m = 0; m < 4; ++m) {
    size_t offset = 0;
    ASSERT_TRUE(out.write_chunk(&m, sizeof(m), m, &offset)) << m;
  }
  size_t offset = 0;
  uint64_t one_more = 5;
  EXPECT_FALSE(out.write_chunk(&one_more, sizeof(one_more), 5, &offset)) << "4 slots, 4 unread chunks";
  ASSERT_NE(in.peek(), nullptr);
  in.release();
  EXPECT_TRUE(out.write_chunk(&one_more, sizeof(one_more), 5, &offset));
}

TEST(ShmTransport, MessagesAroundTheSlotSizeKeepOrderAndBytes) {
  Pair pair(0x5a11);
  EXPECT_TRUE(kolo_segments(0x5a11).empty()) << "a connected pair leaves no name in /dev/shm";
  const std::vector<size_t> sizes = {0, 1, 1023, 1024, 1025, 4096, 4097, 100000, 0, 7};
  std::vector<std::vector<unsigned char>> out(sizes.size()), in(sizes.size());
  std::vector<Request> sends(sizes.size()), recvs(sizes.size());
  std::vector<Request*> s_ptrs, r_ptrs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out[i].resize(sizes[i]);
    for (size_t j = 0; j < sizes[i]; ++j) out[i][j] = static_cast<unsigned char>(i * 31 + j * 7);
    in[i].assign(sizes[i], 0xEE);
    ASSERT_TRUE(pair.t[0]->post_send(1, out[i].data(), sizes[i], 100 + i, &sends[i]).is_ok());
    ASSERT_TRUE(pair.t[1]->post_recv(0, in[i].data(), sizes[i], 100 + i, &recvs[i]).is_ok());
    s_ptrs.push_back(&sends[i]);
    r_ptrs.push_back(&recvs[i]);
  }
  Status s0, s1;
  // Both sides progress at once: the rings hold only 4 KiB.
  std::thread receiver([&] { s1 = wait_for(pair.t[1].get(), r_ptrs, 30); });
  s0 = wait_for(pair.t[0].get(), s_ptrs, 30);
  receiver.join();
  ASSERT_TRUE(s0.is_ok()) << s0.to_string();
  ASSERT_TRUE(s1.is_ok()) << s1.to_string();
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(in[i], out[i]) << "message " << i;
}

// A small message moves as it is posted, and one already in the ring is
// taken as its receive is posted; progress() then returns at once, since
// requests completed since the last call (the transport contract), rather
// than waiting for another.
TEST(ShmTransport, AMessageMovesAsItIsPostedAndProgressSaysSo) {
  Pair pair(0x5a14);
  const std::vector<unsigned char> out = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<unsigned char> in(8, 0);
  Request send, recv;
  ASSERT_TRUE(pair.t[0]->post_send(1, out.data(), out.size(), 9, &send).is_ok());
  EXPECT_TRUE(send.done);
  ASSERT_TRUE(pair.t[1]->post_recv(0, in.data(), in.size(), 9, &recv).is_ok());
  EXPECT_TRUE(recv.done);
  EXPECT_EQ(in, out);
  for (Transport* t : {pair.t[0].get(), pair.t[1].get()}) {
    const auto start = Clock::now();
    EXPECT_TRUE(t->progress(Deadline::after_seconds(10)).is_ok());
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  }
}

// A PerPeerTransport drives a shared memory transport through pump(), not
// progress(): what completed as it was posted is counted by the next pump,
// once, or that loop would wait for another completion.
TEST(ShmTransport, APumpCountsWhatCompletedAsItWasPosted) {
  Pair pair(0x5a15);
  const std::vector<unsigned char> out(100, 7);
  std::vector<unsigned char> in(100, 0);
  Request send, recv;
  ASSERT_TRUE(pair.t[0]->post_send(1, out.data(), out.size(), 3, &send).is_ok());
  ASSERT_TRUE(pair.t[1]->post_recv(0, in.data(), in.size(), 3, &recv).is_ok());
  ASSERT_TRUE(send.done && recv.done);
  for (ShmTransport* t : {pair.t[0].get(), pair.t[1].get()}) {
    Pumped first, second;
    ASSERT_TRUE(t->pump(&first).is_ok());
    EXPECT_EQ(first.completed, 1);
    ASSERT_TRUE(t->pump(&second).is_ok());
    EXPECT_EQ(second.completed, 0);
  }
}

TEST(ShmTransport, ASizeOrTagThatDisagreesIsAMismatch) {
  Pair pair(0x5a12);
  std::vector<unsigned char> out(10000, 1), in(2000, 0);  // more than the ring holds
  Request send, recv;
  ASSERT_TRUE(pair.t[0]->post_send(1, out.data(), out.size(), 7, &send).is_ok());
  // The first chunk is in the ring already, so the receive may find out as
  // it is posted.
  const Status posted = pair.t[1]->post_recv(0, in.data(), in.size(), 7, &recv);
  Status t;  // the sender, still writing when the receiver finds out, learns it too
  std::thread sender([&] { t = wait_for(pair.t[0].get(), {&send}, 10); });
  Status s = posted.is_ok() ? wait_for(pair.t[1].get(), {&recv}, 10) : posted;
  sender.join();
  EXPECT_EQ(s.code(), Code::kMismatch) << s.to_string();
  EXPECT_NE(s.message().find("10000 bytes"), std::string::npos) << s.message();
  EXPECT_EQ(t.code(), Code::kMismatch) << t.to_string();
}

// A receiver asleep on a message not yet begun shows its number in the
// ring's header; its sender, while sending nothing, is told (MISMATCH) for
// as long as it has not sent that message, and stays usable: the message
// it then sends arrives.
TEST(ShmTransport, ASenderSeesAReceiverAwaitAMessageItHasNotSent) {
  Pair pair(0x5a16);
  // One message delivered first, so the receiver awaits message number 1.
  uint64_t first = 5, got = 0;
  Request send0, recv0;
  ASSERT_TRUE(pair.t[0]->post_send(1, &first, sizeof(first), 2, &send0).is_ok());
  ASSERT_TRUE(pair.t[1]->post_recv(0, &got, sizeof(got), 2, &recv0).is_ok());
  ASSERT_TRUE(wait_for(pair.t[0].get(), {&send0}, 10).is_ok());
  ASSERT_TRUE(wait_for(pair.t[1].get(), {&recv0}, 10).is_ok());
  EXPECT_TRUE(pair.t[0]->check_not_awaited(1).is_ok()) << "nobody waits yet";
  uint64_t value = 0;
  Request recv;
  ASSERT_TRUE(pair.t[1]->post_recv(0, &value, sizeof(value), 3, &recv).is_ok());
  Status received;
  std::thread receiver([&] { received = wait_for(pair.t[1].get(), {&recv}, 30); });
  // The receiver spins for a moment, then sleeps and says what it awaits.
  Status told;
  const auto start = Clock::now();
  while (told.is_ok() && Clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    told = pair.t[0]->check_not_awaited(1);
  }
  EXPECT_EQ(told.code(), Code::kMismatch) << told.to_string();
  EXPECT_NE(told.message().find("waits for message 1 from this rank, which has sent it 1"), std::string::npos)
      << told.message();
  const uint64_t later = 42;
  Request send;
  ASSERT_TRUE(pair.t[0]->post_send(1, &later, sizeof(later), 3, &send).is_ok());
  EXPECT_TRUE(wait_for(pair.t[0].get(), {&send}, 10).is_ok()) << "the sender stays usable";
  receiver.join();
  EXPECT_TRUE(received.is_ok()) << received.to_string();
  EXPECT_EQ(value, 42u);
  EXPECT_TRUE(pair.t[0]->check_not_awaited(1).is_ok()) << "message 1 sent";
}

TEST(ShmTransport, AbortEndsAWaitingProgressAtOnce) {
  Pair pair(0x5a13);
  std::vector<unsigned char> in(10);
  Request recv;
  ASSERT_TRUE(pair.t[1]->post_recv(0, in.data(), in.size(), 1, &recv).is_ok());
  Status s;
  const auto start = Clock::now();
  std::thread waiter([&] { s = wait_for(pair.t[1].get(), {&recv}, 60); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  pair.t[1]->abort();
  waiter.join();
  EXPECT_EQ(s.code(), Code::kAborted) << s.to_string();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  // The peer, waiting on the aborted rank, learns it within a second.
  Request recv0;
  ASSERT_TRUE(pair.t[0]->post_recv(1, in.data(), in.size(), 1, &recv0).is_ok());
  const auto t0 = Clock::now();
  Status lost = wait_for(pair.t[0].get(), {&recv0}, 60);
  EXPECT_EQ(lost.code(), Code::kPeerLost) << lost.to_string();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
}

TEST(ShmTransport, APeerThatGoesAwayIsLostWithinASecond) {
  Pair pair(0x5a14);
  std::vector<unsigned char> in(10);
  Request recv;
  ASSERT_TRUE(pair.t[0]->post_recv(1, in.data(), in.size(), 1, &recv).is_ok());
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    pair.t[1].reset();
  });
  const auto start = Clock::now();
  Status s = wait_for(pair.t[0].get(), {&recv}, 60);
  closer.join();
  EXPECT_EQ(s.code(), Code::kPeerLost) << s.to_string();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

// A peer may do its whole part of a connection, send, and exit before this
// rank connects (a split whose other member had nothing more to do): the
// connection still comes up, what it sent is read, and only a receive
// beyond that is PEER_LOST. Rank 1 is a child process (a thread shares this
// process's pid, which is never watched).
TEST(ShmTransport, APeerWhoseProcessEndedBeforeThisRankConnectedIsReadThenLost) {
  const uint64_t job = 0x5a15;
  MemoryStore store;
  std::unique_ptr<ShmTransport> t0;
  ASSERT_TRUE(ShmTransport::create(&store, 0, 2, small_rings(job), &t0).is_ok());
  ASSERT_TRUE(t0->prepare({1}).is_ok());  // rank 0's ring is named in the store the child inherits
  const std::string theirs_key = "shm/ring/1/0";
  int names[2];
  ASSERT_EQ(::pipe(names), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::unique_ptr<ShmTransport> t1;
    std::vector<std::string> name;
    unsigned char out[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    Request send;
    const bool ok = ShmTransport::create(&store, 1, 2, small_rings(job), &t1).is_ok() &&
                    t1->connect(0, Deadline::after_seconds(10)).is_ok() &&
                    t1->post_send(0, out, sizeof(out), 1, &send).is_ok() && send.done &&
                    store.get({theirs_key}, Deadline::after_seconds(1), &name).is_ok();
    if (ok) (void)!::write(names[1], name[0].data(), name[0].size());
    ::_exit(ok ? 0 : 1);  // no destructor: the process just ends, its ring unread
  }
  ::close(names[1]);
  char buffer[256];
  const ssize_t got = ::read(names[0], buffer, sizeof(buffer));
  ::close(names[0]);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  ASSERT_GT(got, 0);
  ASSERT_TRUE(store.set(theirs_key, std::string(buffer, static_cast<size_t>(got))).is_ok());

  Status s = t0->connect(1, Deadline::after_seconds(10));
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  std::vector<unsigned char> in(10);
  Request recv;
  ASSERT_TRUE(t0->post_recv(1, in.data(), in.size(), 1, &recv).is_ok());
  s = wait_for(t0.get(), {&recv}, 10);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(in, (std::vector<unsigned char>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  Request more;
  const auto start = Clock::now();
  s = t0->post_recv(1, in.data(), in.size(), 2, &more);
  if (s.is_ok()) s = wait_for(t0.get(), {&more}, 60);
  EXPECT_EQ(s.code(), Code::kPeerLost) << s.to_string();
  EXPECT_NE(s.to_string().find("process has ended"), std::string::npos) << s.to_string();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(kolo_segments(job).empty());
}

}  // namespace
}  // namespace kolo
