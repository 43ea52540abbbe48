#include "transport/ib/staging_ring.h"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <random>

#include "transport/ib/fake_registration_backend.h"

namespace kolo {
namespace {

using FakeBackend = FakeRegistrationBackend;

StagingSlice take(StagingRing& ring, size_t bytes) {
  StagingSlice s;
  bool taken = false;
  EXPECT_TRUE(ring.allocate(bytes, &s, &taken).is_ok());
  EXPECT_TRUE(taken) << bytes << " bytes";
  return s;
}

bool fits(StagingRing& ring, size_t bytes) {
  StagingSlice s;
  bool taken = false;
  EXPECT_TRUE(ring.allocate(bytes, &s, &taken).is_ok());
  return taken;
}

TEST(StagingRing, RegistersOnceAndReusesTheMemory) {
  FakeBackend backend;
  StagingRing ring(&backend, 1 << 20, 8 << 20);
  EXPECT_EQ(ring.registrations(), 0u);  // nothing until a message needs it
  for (int i = 0; i < 1000; ++i) {
    StagingSlice s = take(ring, 100000);
    std::memset(s.data, i, s.bytes);
    ring.release_oldest();
  }
  EXPECT_EQ(ring.registrations(), 1u);
  EXPECT_EQ(backend.live.size(), 1u);
}

TEST(StagingRing, WaitsWhenFullAndWrapsAroundInOrder) {
  FakeBackend backend;
  StagingRing ring(&backend, 1024, 1024);
  StagingSlice a = take(ring, 400);
  StagingSlice b = take(ring, 400);
  EXPECT_FALSE(fits(ring, 400));  // 128 bytes left at the end, none before a
  ring.release_oldest();          // a
  StagingSlice c = take(ring, 400);  // wraps to the start, where a was
  EXPECT_EQ(c.data, a.data);
  EXPECT_EQ(b.data, a.data + 448);  // slices are cache-line aligned
  EXPECT_FALSE(fits(ring, 64));     // between c and b: 448 - 448 = 0
  ring.release_oldest();            // b
  EXPECT_TRUE(fits(ring, 500));     // after c
  EXPECT_EQ(ring.outstanding(), 2u);
  EXPECT_EQ(ring.registrations(), 1u);
}

TEST(StagingRing, GrowsForALargeMessageOnceEmpty) {
  FakeBackend backend;
  StagingRing ring(&backend, 1024, 4096);
  take(ring, 512);
  EXPECT_FALSE(fits(ring, 10000));  // larger than the ring: waits while it is in use
  ring.release_oldest();
  StagingSlice big = take(ring, 10000);  // empty: grows past max_bytes for one message
  EXPECT_EQ(big.bytes, 10000u);
  EXPECT_GE(ring.capacity(), 10000u);
  EXPECT_EQ(ring.registrations(), 2u);
  EXPECT_EQ(backend.live.size(), 1u);  // the old registration went
  EXPECT_EQ(big.lkey, backend.next_key);
}

TEST(StagingRing, ARegistrationFailureIsReported) {
  FakeBackend backend;
  backend.fail_next = true;
  StagingRing ring(&backend, 1024, 4096);
  StagingSlice s;
  bool taken = true;
  Status st = ring.allocate(100, &s, &taken);
  EXPECT_EQ(st.code(), Code::kTransport);
  EXPECT_FALSE(taken);
  EXPECT_TRUE(fits(ring, 100));  // and it recovers on the next try
}

// Random FIFO traffic: live slices never overlap and always lie inside the ring.
TEST(StagingRing, LiveSlicesNeverOverlap) {
  FakeBackend backend;
  StagingRing ring(&backend, 8192, 8192);
  std::mt19937 rng(7);
  std::deque<StagingSlice> live;
  for (int step = 0; step < 20000; ++step) {
    if (!live.empty() && rng() % 2) {
      ring.release_oldest();
      live.pop_front();
      continue;
    }
    StagingSlice s;
    bool taken = false;
    ASSERT_TRUE(ring.allocate(1 + rng() % 3000, &s, &taken).is_ok());
    if (!taken) continue;
    for (const StagingSlice& o : live) {
      ASSERT_TRUE(s.data + s.bytes <= o.data || o.data + o.bytes <= s.data) << "step " << step;
    }
    live.push_back(s);
  }
  EXPECT_EQ(ring.registrations(), 1u);
}

}  // namespace
}  // namespace kolo
