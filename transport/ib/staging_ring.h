// Registered bounce memory for messages whose buffers are not registered
// (see registration_cache.h): the sender copies such a message into its
// ring and writes from there; the receiver offers a slice of its ring and
// copies the message out when it lands. The ring is registered when first
// needed and then reused, so steady-state collectives register nothing.
//
// Allocation is first-in first-out, matching a queue pair, whose messages
// complete in order: each allocation is taken at the tail and released
// from the head. When the ring is too full the caller waits for releases
// (the message stays queued); a message larger than the whole ring grows it
// once the ring is empty, so any single message fits eventually and the
// oldest queued message always moves. Growth stops doubling at max_bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>

#include "common/status.h"
#include "transport/ib/registration_cache.h"

namespace kolo {

struct StagingSlice {
  unsigned char* data = nullptr;
  size_t bytes = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

class StagingRing {
 public:
  StagingRing(RegistrationBackend* backend, size_t initial_bytes, size_t max_bytes);
  ~StagingRing();

  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  // A slice of `bytes` (> 0) at the tail in *out and *taken = true, or
  // *taken = false when it does not fit until older slices are released.
  // Fails only when registering (growing) the ring fails.
  Status allocate(size_t bytes, StagingSlice* out, bool* taken);
  // Releases the oldest slice still allocated.
  void release_oldest();

  size_t capacity() const { return capacity_; }
  size_t outstanding() const { return slices_.size(); }
  uint64_t registrations() const { return registrations_; }

 private:
  Status grow(size_t at_least);
  void drop();

  struct Slice {
    size_t offset;
    size_t bytes;
  };

  RegistrationBackend* backend_;
  size_t initial_bytes_;
  size_t max_bytes_;
  std::unique_ptr<unsigned char[]> memory_;
  size_t capacity_ = 0;
  MemoryRegion region_{};
  bool registered_ = false;
  std::deque<Slice> slices_;  // allocated, oldest first
  size_t tail_ = 0;           // where the next slice goes
  uint64_t registrations_ = 0;
};

}  // namespace kolo
