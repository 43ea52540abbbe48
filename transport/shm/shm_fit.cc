#include "transport/shm/shm_fit.h"

#include <algorithm>

#include "transport/shm/shm_arena.h"

namespace kolo {
namespace {

constexpr uint64_t kSmallestRingSlot = 4 << 10;
constexpr uint32_t kFewestRingSlots = 2;
constexpr size_t kSmallestArenaSlot = 64 << 10;

uint64_t rings_bytes(int n, const ShmRingShape& ring) {
  return static_cast<uint64_t>(n) * static_cast<uint64_t>(std::max(0, n - 1)) * ring.segment_bytes();
}

uint64_t arenas_bytes(int n, size_t slot) { return 2 * ShmArena::segment_bytes(n, slot); }

// One step smaller, ring slots first, then their number; false at the floor.
bool shrink_rings(ShmRingShape* ring) {
  if (ring->slot_bytes > kSmallestRingSlot) {
    ring->slot_bytes = std::max(kSmallestRingSlot, ring->slot_bytes / 2);
    return true;
  }
  if (ring->slots > kFewestRingSlots) {
    ring->slots /= 2;
    return true;
  }
  return false;
}

bool shrink_arena(size_t* slot) {
  if (*slot <= kSmallestArenaSlot) return false;
  *slot = std::max(kSmallestArenaSlot, *slot / 2);
  return true;
}

}  // namespace

ShmFit fit_shared_memory(int ranks_on_host, uint64_t budget) {
  ShmFit fit;
  fit.ring = ShmRingShape::for_ranks_on_host(ranks_on_host);
  fit.arena_slot_bytes = ShmArenaOptions{}.slot_bytes;
  for (;;) {
    const uint64_t rings = rings_bytes(ranks_on_host, fit.ring);
    const uint64_t arenas = arenas_bytes(ranks_on_host, fit.arena_slot_bytes);
    fit.bytes = rings + arenas;
    if (fit.bytes <= budget) {
      fit.fits = true;
      return fit;
    }
    // The larger part gives first; either, when the other cannot.
    const bool shrunk = rings >= arenas ? (shrink_rings(&fit.ring) || shrink_arena(&fit.arena_slot_bytes))
                                        : (shrink_arena(&fit.arena_slot_bytes) || shrink_rings(&fit.ring));
    if (!shrunk) return fit;
    fit.shrunk = true;
  }
}

std::string ShmFit::describe(int ranks_on_host) const {
  return "rings of " + std::to_string(ring.slots) + " x " + std::to_string(ring.slot_bytes >> 10) +
         " KiB and arena slots of " + std::to_string(arena_slot_bytes >> 10) + " KiB for " +
         std::to_string(ranks_on_host) + " ranks (" + std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB)";
}

}  // namespace kolo
