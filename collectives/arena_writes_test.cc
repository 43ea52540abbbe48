#include "collectives/arena_writes.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace kolo {
namespace {

// An arena of one rank with nothing behind it: ArenaWrites reads only its
// slot size and its tables.
class TablesOnly final : public SharedArena {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  size_t slot_bytes() const override { return 1 << 20; }
  unsigned char* slot(int) override { return nullptr; }
  Status barrier(Deadline) override { return Status::ok(); }
  unsigned char* outbox(size_t) override { return nullptr; }
  Status exchange(uint64_t, double, const Stalled&, int* differs) override {
    *differs = -1;
    return Status::ok();
  }
  const unsigned char* inbox(int, size_t) const override { return nullptr; }
  uint64_t fingerprint_of(int) const override { return 0; }
  void abort() override {}
};

const size_t kBig = size_t{64} << 20;  // past any core's L2

struct Ways {
  bool slots_around, result_around;
};

// One allreduce call of `bytes` that takes 5 ms longer where its slots go
// around the cache and `slow_s` longer where its result goes
// `slow_result_way` (0 through the cache, 1 around it). Margins of
// milliseconds: a loaded machine oversleeps, and a try is decided by two
// calls.
Ways call(SharedArena& arena, size_t bytes, int slow_result_way, double slow_s) {
  ArenaWrites writes(arena, ArenaWrites::kAllreduce, bytes, bytes);
  const Ways ways{writes.slots_around_cache(), writes.result_around_cache()};
  double wait_s = ways.slots_around ? 0.005 : 0;
  if (static_cast<int>(ways.result_around) == slow_result_way) wait_s += slow_s;
  std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
  writes.done();
  return ways;
}

TEST(ArenaWrites, TriesTheSlotWaysFirstThenTheResultWays) {
  TablesOnly arena;
  std::vector<Ways> seen;
  for (int i = 0; i < 10; ++i) seen.push_back(call(arena, kBig, 1, 0.005));
  // The slot writes' uncounted first call and four alternating ones, the
  // result through the cache meanwhile; then the same for the result.
  const bool slots[10] = {false, false, true, false, true, false, false, false, false, false};
  const bool results[10] = {false, false, false, false, false, false, false, true, false, true};
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(seen[i].slots_around, slots[i]) << "call " << i;
    EXPECT_EQ(seen[i].result_around, results[i]) << "call " << i;
  }
}

TEST(ArenaWrites, NeverTriesBothAtOnceAndFindsTheFasterResultWay) {
  TablesOnly arena;
  const size_t table = ArenaWrites::kAllreduce * 64 + 26;  // 64 MiB's size class
  const FasterOfTwo& slots = arena.slot_writes[table];
  const FasterOfTwo& results = arena.result_writes[table];
  // Results through the cache 5 ms slower: the result table learns it,
  // and from then on only its tries go through the cache.
  int through_late = 0;
  for (int i = 0; i < 80; ++i) {
    const bool slots_trying = slots.trying();
    const int results_faster = results.faster();
    const Ways w = call(arena, kBig, 0, 0.005);
    if (slots_trying) EXPECT_EQ(w.result_around, results_faster == 1) << "call " << i;
    if (i >= 40) through_late += !w.result_around;
  }
  EXPECT_EQ(results.faster(), 1);
  EXPECT_LE(through_late, 2);  // the tries, one call in FasterOfTwo::kTryEvery
}

TEST(ArenaWrites, ResultsThatFitACoresCacheStayInIt) {
  TablesOnly arena;
  const size_t fits = ArenaWrites::private_cache_bytes();
  for (int i = 0; i < 40; ++i) EXPECT_FALSE(call(arena, fits, 0, 0.001).result_around) << "call " << i;
}

}  // namespace
}  // namespace kolo
