// How a rank writes its data into its arena slot, chosen by measurement.
// Through its cache, peers then read the data from this core's cache: the
// fastest way where the cores share a cache. Where they do not (cores of
// different dies or sockets, or a VM's two cores that its host runs far
// apart, which it can change while a job runs), each line a peer reads
// from another core's cache costs a round trip between them, and writing
// around the cache, so that peers read from memory, is faster: on the
// 2-core development VM, with a cache line's round trip between the cores
// at 330 ns instead of 55, a 64 MiB allreduce ran 3.7x as fast (N=2) and
// 2.7x (N=4) around the cache as through it, and 0.79x where the round
// trip was short. The way is this rank's alone (peers read the slot either
// way), so each rank picks it from its own calls' times (FasterOfTwo), per
// collective and size.
#pragma once

#include <chrono>
#include <cstddef>

#include "common/log.h"
#include "transport/shared_arena.h"

namespace kolo {

class SlotWrites {
 public:
  // Which arena collective writes (the tables are kept apart).
  enum Collective { kAllreduce = 0, kAllgather = 1, kReduceScatter = 2, kBroadcast = 3 };

  // For a call of `bytes` (its buffer; an allgather's result), the size
  // its time is measured by. Calls smaller than a chunk (half a slot)
  // write through the cache: they stay in the caches anyway, and a clock
  // read would be a larger share of their time.
  SlotWrites(SharedArena& arena, Collective collective, size_t bytes) : bytes_(bytes) {
    if (bytes < arena.slot_bytes() / 2) return;
    size_t size_class = 0;
    while (size_class < 63 && (bytes >> (size_class + 1)) != 0) ++size_class;
    ways_ = &arena.slot_writes[(collective * 64 + size_class) % arena.slot_writes.size()];
    way_ = ways_->pick();
    start_ = std::chrono::steady_clock::now();
  }

  bool around_cache() const { return way_ == 1; }

  // The call's writes and reads are over: its time counts for its way.
  void done() {
    if (ways_ == nullptr) return;
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start_;
    const int was = ways_->faster();
    ways_->record(way_, took.count() / static_cast<double>(bytes_));
    if (ways_->faster() != was) {
      KOLO_DEBUG("arena slot writes of about " << bytes_ << " bytes now go "
                 << (ways_->faster() == 1 ? "around" : "through") << " the cache: "
                 << ways_->cost(1) * 1e9 << " ns/byte around it against " << ways_->cost(0) * 1e9 << " through it");
    }
  }

 private:
  FasterOfTwo* ways_ = nullptr;  // nullptr: not timed, through the cache
  int way_ = 0;
  size_t bytes_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kolo
