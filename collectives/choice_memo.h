// The tables' recent choices (algorithms.h) for one communicator. A choice
// depends only on the call (Call), the topology and the thresholds, and a
// communicator's topology and thresholds stay as bring-up set them; so the
// same call chooses the same entry, and a call seen recently skips the
// cost model, whose estimates for every entry were some 5% of a small
// allreduce's time on two ranks.
//
// The memo remembers the topology and thresholds it was filled for and
// starts over when a lookup brings others. What the topology points at is
// not compared: the cost model's numbers (Topology::costs) change only when
// the communicator sets them, which clears the memo (clear()).
//
// Not thread-safe: a communicator uses it under its call lock, from the
// collectives it runs; estimates (kolo_comm_estimate), which may come from
// any thread, choose without it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/algorithm.h"

namespace kolo {

class ChoiceMemo {
 public:
  // The tables, as the memo tells their entries apart.
  enum Table : uint8_t { kAllreduce, kAllgather, kReduceScatter, kBroadcast };

  // The entry chosen for this call before, or nullptr.
  const void* find(Table table, const Topology& topology, const Thresholds& thresholds, const Call& call) {
    if (!same(topology, thresholds)) return nullptr;
    const Slot& s = slots_[index(table, call)];
    return s.algorithm && s.table == table && s.bytes == call.bytes && s.flags == flags(call) ? s.algorithm : nullptr;
  }

  void remember(Table table, const Topology& topology, const Thresholds& thresholds, const Call& call,
                const void* algorithm) {
    if (!same(topology, thresholds)) {
      clear();
      topology_ = topology;
      thresholds_ = thresholds;
      filled_ = true;
    }
    slots_[index(table, call)] = {call.bytes, flags(call), table, algorithm};
  }

  void clear() {
    for (Slot& s : slots_) s.algorithm = nullptr;
    filled_ = false;
  }

 private:
  static constexpr size_t kSlots = 16;  // direct-mapped: a training step's few sizes, each in a slot
  struct Slot {
    size_t bytes = 0;
    uint32_t flags = 0;
    Table table = kAllreduce;
    const void* algorithm = nullptr;
  };

  static uint32_t flags(const Call& c) {
    return static_cast<uint32_t>(c.equal_blocks) | static_cast<uint32_t>(c.host_memory) << 1 |
           static_cast<uint32_t>(c.wire) << 2;
  }
  static size_t index(Table table, const Call& c) {
    uint64_t h = (c.bytes ^ (uint64_t{flags(c)} << 56) ^ (uint64_t{table} << 60)) * 0x9e3779b97f4a7c15ull;
    return static_cast<size_t>(h >> 60) % kSlots;
  }
  bool same(const Topology& t, const Thresholds& th) const {
    return filled_ && t.rank == topology_.rank && t.size == topology_.size && t.hosts == topology_.hosts &&
           t.arena == topology_.arena && t.arena_reads_peers == topology_.arena_reads_peers &&
           t.host_arena == topology_.host_arena &&
           t.host_count == topology_.host_count && t.ranks_per_host == topology_.ranks_per_host &&
           t.costs == topology_.costs && th.small_bytes == thresholds_.small_bytes &&
           th.forced == thresholds_.forced;
  }

  Slot slots_[kSlots];
  bool filled_ = false;
  Topology topology_;
  Thresholds thresholds_;
};

}  // namespace kolo
