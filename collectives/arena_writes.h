// How an arena collective writes, chosen by measurement: its data into its
// slot, and its result out of the slots into the caller's buffer, each
// through the cache or around it.
//
// Slot writes. Through its cache, peers then read the data from this
// core's cache: the fastest way where the cores share a cache. Where they
// do not (cores of different dies or sockets, or a VM's two cores that its
// host runs far apart, which it can change while a job runs), each line a
// peer reads from another core's cache costs a round trip between them,
// and writing around the cache, so that peers read from memory, is faster:
// on the 2-core development VM, with a cache line's round trip between the
// cores at 330 ns instead of 55, a 64 MiB allreduce ran 3.7x as fast (N=2)
// and 2.7x (N=4) around the cache as through it, and 0.79x where the round
// trip was short.
//
// Result writes. An ordinary store reads its line from memory before
// overwriting it; where the result is larger than the cache holds for
// this core, that read is wasted and the result evicts what the cache
// held, and non-temporal stores (Memory::copy_streaming) save both. What
// the cache holds for a core is not what sysfs says: a VM's last-level
// cache is reported whole (480 MiB on an Intel VM whose 64 MiB allreduce
// ran 1.23x as fast around the cache) and is shared with the host's other
// tenants. So past the core's own L2 it is measured too; below, the
// result stays in the cache for its reader.
//
// Each way is this rank's alone (peers read the slot either way), so each
// rank picks from its own calls' times (FasterOfTwo), per collective and
// size. The two choices share a call's time, so a call tries at most one
// of them, and its time counts only for a choice whose partner took its
// faster way.
#pragma once

#include <chrono>
#include <cstddef>

#include "common/cpu_caches.h"
#include "common/log.h"
#include "transport/shared_arena.h"

namespace kolo {

class ArenaWrites {
 public:
  // Which arena collective writes (the tables are kept apart).
  enum Collective { kAllreduce = 0, kAllgather = 1, kReduceScatter = 2, kBroadcast = 3 };

  // For a call of `bytes` (its buffer; an allgather's result), the size
  // its time is measured by, that copies `result_bytes` out of the slots
  // into the caller's buffer (0: it writes its result otherwise). Calls
  // smaller than a chunk (half a slot) write through the cache: they stay
  // in the caches anyway, and a clock read would be a larger share of
  // their time.
  ArenaWrites(SharedArena& arena, Collective collective, size_t bytes, size_t result_bytes) : bytes_(bytes) {
    if (bytes < arena.slot_bytes() / 2) return;
    const size_t table = table_of(arena, collective, bytes);
    slots_.ways = &arena.slot_writes[table];
    slots_.trying = slots_.ways->trying();
    slots_.way = slots_.ways->pick();
    if (result_bytes > private_cache_bytes()) {
      results_.ways = &arena.result_writes[table];
      // While the slot writes try a way, the result takes its faster.
      results_.trying = !slots_.trying && results_.ways->trying();
      results_.way = slots_.trying ? results_.ways->faster() : results_.ways->pick();
    }
    start_ = std::chrono::steady_clock::now();
  }

  // Whether such a call's writes have settled on their ways, not trying
  // one: its time then says what the collective costs (what
  // single_copy_allreduce.h compares).
  static bool settled(SharedArena& arena, Collective collective, size_t bytes, size_t result_bytes) {
    if (bytes < arena.slot_bytes() / 2) return true;
    const size_t table = table_of(arena, collective, bytes);
    return !arena.slot_writes[table].trying() &&
           (result_bytes <= private_cache_bytes() || !arena.result_writes[table].trying());
  }

  // What a core has of the caches to itself: its L2 (1 MiB where sysfs
  // does not say). Results up to this size stay in the cache.
  static size_t private_cache_bytes() { return cpu_caches().l2 ? cpu_caches().l2 : size_t{1} << 20; }

  bool slots_around_cache() const { return slots_.way == 1; }
  bool result_around_cache() const { return results_.way == 1; }

  // The call's writes and reads are over: its time counts for its ways.
  void done() {
    if (slots_.ways == nullptr) return;
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start_;
    const double cost = took.count() / static_cast<double>(bytes_);
    if (!results_.trying) slots_.record(cost, "slot writes", bytes_);
    if (results_.ways != nullptr && !slots_.trying) results_.record(cost, "result writes", bytes_);
  }

 private:
  static size_t table_of(SharedArena& arena, Collective collective, size_t bytes) {
    return (collective * 64 + SharedArena::size_class(bytes)) % arena.slot_writes.size();
  }

  struct Choice {
    FasterOfTwo* ways = nullptr;  // nullptr: not timed, through the cache
    int way = 0;
    bool trying = false;

    void record(double cost, const char* what, size_t bytes) {
      const int was = ways->faster();
      ways->record(way, cost);
      if (ways->faster() != was) {
        KOLO_DEBUG("arena " << what << " of calls of about " << bytes << " bytes now go "
                   << (ways->faster() == 1 ? "around" : "through") << " the cache: " << ways->cost(1) * 1e9
                   << " ns/byte around it against " << ways->cost(0) * 1e9 << " through it");
      }
    }
  };

  Choice slots_, results_;
  size_t bytes_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kolo
