// The choice memo: a remembered choice comes back only for the same call,
// table, topology and thresholds; anything else finds nothing, never
// another call's choice.
#include "collectives/choice_memo.h"

#include <gtest/gtest.h>

namespace kolo {
namespace {

// Stand-ins for table entries: the memo only keeps their addresses.
int ring_entry = 0, tree_entry = 1, arena_entry = 2;

Call call_of(size_t bytes) {
  Call c;
  c.bytes = bytes;
  return c;
}

TEST(ChoiceMemo, ARememberedChoiceComesBackForTheSameCallOnly) {
  ChoiceMemo memo;
  Topology t;
  t.size = 4;
  Thresholds th;
  const Call c = call_of(1024);
  EXPECT_EQ(memo.find(ChoiceMemo::kAllreduce, t, th, c), nullptr);
  memo.remember(ChoiceMemo::kAllreduce, t, th, c, &ring_entry);
  EXPECT_EQ(memo.find(ChoiceMemo::kAllreduce, t, th, c), &ring_entry);

  EXPECT_EQ(memo.find(ChoiceMemo::kAllgather, t, th, c), nullptr);
  EXPECT_EQ(memo.find(ChoiceMemo::kAllreduce, t, th, call_of(1028)), nullptr);
  Call other = c;
  other.host_memory = false;
  EXPECT_EQ(memo.find(ChoiceMemo::kAllreduce, t, th, other), nullptr);
  other = c;
  other.equal_blocks = false;
  EXPECT_EQ(memo.find(ChoiceMemo::kAllreduce, t, th, other), nullptr);
  other = c;
  other.wire = WireFormat::kBf16;
  EXPECT_EQ(memo.find(ChoiceMemo::kAllreduce, t, th, other), nullptr);
}

TEST(ChoiceMemo, AnotherTopologyOrThresholdStartsOver) {
  ChoiceMemo memo;
  Topology t;
  t.size = 4;
  Thresholds th;
  const Call c = call_of(1 << 20);
  memo.remember(ChoiceMemo::kAllreduce, t, th, c, &ring_entry);

  Topology with_arena = t;
  int arena_stand_in = 0;
  with_arena.arena = reinterpret_cast<SharedArena*>(&arena_stand_in);
  EXPECT_EQ(memo.find(ChoiceMemo::kAllreduce, with_arena, th, c), nullptr);
  memo.remember(ChoiceMemo::kAllreduce, with_arena, th, c, &arena_entry);
  EXPECT_EQ(memo.find(ChoiceMemo::kAllreduce, with_arena, th, c), &arena_entry);
  EXPECT_EQ(memo.find(ChoiceMemo::kAllreduce, t, th, c), nullptr);  // the old topology's choices are gone

  Thresholds forced = th;
  forced.forced = "tree";
  EXPECT_EQ(memo.find(ChoiceMemo::kAllreduce, with_arena, forced, c), nullptr);
  Thresholds smaller = th;
  smaller.small_bytes = 4096;
  EXPECT_EQ(memo.find(ChoiceMemo::kAllreduce, with_arena, smaller, c), nullptr);
  Topology bigger = with_arena;
  bigger.size = 8;
  EXPECT_EQ(memo.find(ChoiceMemo::kAllreduce, bigger, th, c), nullptr);

  memo.clear();
  EXPECT_EQ(memo.find(ChoiceMemo::kAllreduce, with_arena, th, c), nullptr);
}

TEST(ChoiceMemo, ManySizesFindTheirOwnChoiceOrNothing) {
  ChoiceMemo memo;
  Topology t;
  Thresholds th;
  const auto choice_of = [](size_t bytes) -> const void* {
    return bytes % 3 == 0 ? &ring_entry : bytes % 3 == 1 ? &tree_entry : &arena_entry;
  };
  for (size_t bytes = 4; bytes < 4096; bytes += 4) {
    memo.remember(ChoiceMemo::kAllreduce, t, th, call_of(bytes), choice_of(bytes));
  }
  size_t found = 0;
  for (size_t bytes = 4; bytes < 4096; bytes += 4) {
    const void* a = memo.find(ChoiceMemo::kAllreduce, t, th, call_of(bytes));
    if (!a) continue;
    EXPECT_EQ(a, choice_of(bytes)) << bytes;
    ++found;
  }
  EXPECT_GT(found, 0u);
  EXPECT_LE(found, 16u);
}

}  // namespace
}  // namespace kolo
