// The SharedArena of one host's ranks, in a /dev/shm segment: rank 0 makes
// it and publishes its name through the store, every rank maps it, and the
// last to map it unlinks the name (nothing is left behind once all have
// mapped it; rank 0 unlinks it on its way out otherwise).
//
// The barrier counts arrivals in the segment; the last rank to arrive bumps
// a generation word, which the others spin on (yielding the core where
// ranks outnumber cores), then sleep on as a futex, waking every 100 ms to
// see whether a rank has closed its end or its process has ended.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "transport/shared_arena.h"
#include "transport/store.h"

namespace kolo {

struct ShmArenaOptions {
  uint64_t job_id = 0;                  // the communicator's
  std::string store_key = "shm/arena";  // where rank 0 publishes the segment's name
  size_t slot_bytes = 1 << 20;
  int spin_us = 50;
  bool yield = true;
};

class ShmArena final : public SharedArena {
 public:
  // Collective over the `size` ranks. UNSUPPORTED on every rank when rank
  // 0 cannot make the segment (/dev/shm full): the caller goes without.
  static Status create(Store* store, int rank, int size, const ShmArenaOptions& options, Deadline deadline,
                       std::unique_ptr<ShmArena>* out);
  ~ShmArena() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  size_t slot_bytes() const override { return slot_bytes_; }
  unsigned char* slot(int r) override;
  Status barrier(Deadline deadline) override;
  void abort() override;

  struct Header;
  struct Member;

 private:
  ShmArena(int rank, int size, const ShmArenaOptions& options);
  Member& member(int r) const;
  // A rank that closed its end or whose process ended: PEER_LOST naming it.
  Status check_peers();

  int rank_;
  int size_;
  size_t slot_bytes_;
  ShmArenaOptions options_;
  std::string name_;  // rank 0's, until unlinked
  Header* header_ = nullptr;
  size_t mapped_bytes_ = 0;
  std::vector<int> pidfds_;  // per rank; -1 for this process's own ranks
  std::atomic<bool> aborted_{false};
  Status failed_;
};

}  // namespace kolo
