// How big one machine's shared memory is made: the rings between its ranks
// and the allreduce arenas, sized to what its /dev/shm holds. A container's
// /dev/shm is often a 64 MiB tmpfs (Docker's and Kubernetes' default),
// where the default shapes for 16 ranks (274 MiB) do not fit: the slots
// then shrink (the rings' down to 4 KiB and to 2 slots, the arenas' down to
// 64 KiB) until they do, trading some speed on large messages for staying
// on shared memory rather than falling back to TCP, several times slower.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/shm/ring.h"

namespace kolo {

struct ShmFit {
  ShmRingShape ring;         // every ring of the machine
  size_t arena_slot_bytes;   // each arena's slot per rank
  uint64_t bytes = 0;        // what they take: a ring each way between every two ranks, and two arenas
  bool fits = false;         // within the budget (else the smallest shapes, which do not)
  bool shrunk = false;       // smaller than the defaults
  std::string describe(int ranks_on_host) const;
};

// The largest shapes, at most the defaults, whose bytes stay within
// `budget`: the same on every rank given the same ranks and budget.
ShmFit fit_shared_memory(int ranks_on_host, uint64_t budget);

// The budget on a machine whose /dev/shm is a tmpfs of `total` bytes: three
// quarters of it, leaving room for other communicators' arenas and for
// whatever else the container keeps there.
inline uint64_t shm_budget(uint64_t total) { return total / 4 * 3; }

}  // namespace kolo
