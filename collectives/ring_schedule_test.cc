#include "collectives/ring_schedule.h"

#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace kolo {
namespace {

TEST(Partition, CoversEveryElementOnceInOrder) {
  for (size_t count : {0, 1, 5, 7, 8, 9, 1000, 1001}) {
    for (size_t parts : {1, 2, 3, 7, 8}) {
      size_t next = 0;
      for (size_t i = 0; i < parts; ++i) {
        Range r = partition(count, parts, i);
        EXPECT_EQ(r.offset, next) << count << "/" << parts << " part " << i;
        next += r.count;
        // Near-equal: sizes differ by at most one.
        EXPECT_LE(r.count, count / parts + 1);
        EXPECT_GE(r.count, count / parts);
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(RingChunks, ReduceScatterEndsWithOwnChunkAndVisitsEachOnce) {
  for (int n = 2; n <= 8; ++n) {
    for (int r = 0; r < n; ++r) {
      std::set<int> received;
      for (int s = 0; s + 1 < n; ++s) received.insert(rs_recv_chunk(r, n, s));
      EXPECT_EQ(received.size(), static_cast<size_t>(n - 1)) << "each chunk reduced at most once";
      EXPECT_EQ(rs_recv_chunk(r, n, n - 2), r) << "rank ends owning its own chunk";
      EXPECT_EQ(received.count(rs_send_chunk(r, n, 0)), 0u) << "the chunk sent first is never overwritten";
      for (int s = 1; s + 1 < n; ++s) {
        EXPECT_EQ(rs_send_chunk(r, n, s), rs_recv_chunk(r, n, s - 1)) << "forward what was just reduced";
      }
      // What rank r sends at step s is what its right neighbour receives.
      for (int s = 0; s + 1 < n; ++s) EXPECT_EQ(rs_send_chunk(r, n, s), rs_recv_chunk((r + 1) % n, n, s));
    }
  }
}

TEST(RingChunks, AllgatherDeliversEveryOtherChunk) {
  for (int n = 2; n <= 8; ++n) {
    for (int r = 0; r < n; ++r) {
      std::set<int> received;
      for (int s = 0; s + 1 < n; ++s) received.insert(ag_recv_chunk(r, n, s));
      EXPECT_EQ(received.size(), static_cast<size_t>(n - 1));
      EXPECT_EQ(received.count(r), 0u);
      EXPECT_EQ(ag_send_chunk(r, n, 0), r);
      for (int s = 1; s + 1 < n; ++s) EXPECT_EQ(ag_send_chunk(r, n, s), ag_recv_chunk(r, n, s - 1));
      for (int s = 0; s + 1 < n; ++s) EXPECT_EQ(ag_send_chunk(r, n, s), ag_recv_chunk((r + 1) % n, n, s));
    }
  }
}

TEST(RingLayout, SegmentsTileEachChunkAndRespectTheLimit) {
  const size_t es = 4;
  for (size_t count : {0, 3, 100, 4096, 100003}) {
    for (int n : {1, 2, 3, 8}) {
      RingLayout L(count, n, es, 1024);
      for (int c = 0; c < n; ++c) {
        Range ch = L.chunk(c);
        size_t next = ch.offset;
        for (size_t j = 0; j < L.segments(); ++j) {
          Range seg = L.segment(c, j);
          EXPECT_EQ(seg.offset, next);
          EXPECT_LE(seg.count * es, 1024u);
          next += seg.count;
        }
        EXPECT_EQ(next, ch.offset + ch.count);
      }
    }
  }
}

TEST(RingLayout, SegmentCountFollowsLargestChunk) {
  EXPECT_EQ(segments_per_chunk(0, 4, 1024), 1u);
  EXPECT_EQ(segments_per_chunk(256, 4, 1024), 1u);
  EXPECT_EQ(segments_per_chunk(257, 4, 1024), 2u);
  RingLayout L(1000, 3, 8, 800);  // largest chunk 334 elems = 2672 bytes -> 4 segments
  EXPECT_EQ(L.segments(), 4u);
}

}  // namespace
}  // namespace kolo
