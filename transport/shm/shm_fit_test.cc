// fit_shared_memory: the default shapes where they fit, smaller slots (never
// below their floors) where /dev/shm is small, and what they take within
// the budget whenever it says they fit.
#include "transport/shm/shm_fit.h"

#include <gtest/gtest.h>

#include "transport/shm/shm_arena.h"

namespace kolo {
namespace {

uint64_t bytes_of(int n, const ShmFit& f) {
  return static_cast<uint64_t>(n) * (n - 1) * f.ring.segment_bytes() +
         2 * ShmArena::segment_bytes(n, f.arena_slot_bytes);
}

TEST(ShmFit, TheDefaultsWhereThereIsRoom) {
  const ShmFit f = fit_shared_memory(16, uint64_t{1} << 34);
  EXPECT_TRUE(f.fits);
  EXPECT_FALSE(f.shrunk);
  EXPECT_EQ(f.ring.slots, ShmRingShape::for_ranks_on_host(16).slots);
  EXPECT_EQ(f.ring.slot_bytes, ShmRingShape::for_ranks_on_host(16).slot_bytes);
  EXPECT_EQ(f.arena_slot_bytes, ShmArenaOptions{}.slot_bytes);
  EXPECT_EQ(f.bytes, bytes_of(16, f));
}

TEST(ShmFit, ADockerDevShmOf64MiBHolds16And32Ranks) {
  for (int n : {16, 32}) {
    const ShmFit f = fit_shared_memory(n, shm_budget(uint64_t{64} << 20));
    EXPECT_TRUE(f.fits) << n << ": " << f.describe(n);
    EXPECT_TRUE(f.shrunk);
    EXPECT_LE(f.bytes, shm_budget(uint64_t{64} << 20));
    EXPECT_EQ(f.bytes, bytes_of(n, f));
    EXPECT_TRUE(f.ring.valid());
    EXPECT_GE(f.ring.slot_bytes, 4u << 10);
    EXPECT_GE(f.arena_slot_bytes, 64u << 10);
  }
}

TEST(ShmFit, EveryBudgetEitherFitsOrIsBelowTheSmallestShapes) {
  const ShmFit smallest = fit_shared_memory(8, 0);
  EXPECT_FALSE(smallest.fits);
  EXPECT_EQ(smallest.ring.slots, 2u);
  EXPECT_EQ(smallest.ring.slot_bytes, 4u << 10);
  EXPECT_EQ(smallest.arena_slot_bytes, 64u << 10);
  for (uint64_t budget = 1 << 20; budget < (uint64_t{1} << 30); budget = budget * 3 / 2) {
    const ShmFit f = fit_shared_memory(8, budget);
    EXPECT_EQ(f.fits, budget >= smallest.bytes) << budget;
    if (f.fits) EXPECT_LE(f.bytes, budget);
  }
}

}  // namespace
}  // namespace kolo
