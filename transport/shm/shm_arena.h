// The SharedArena of one host's ranks, in a /dev/shm segment: rank 0 makes
// it and publishes its name through the store, every rank maps it, and the
// last to map it unlinks the name (nothing is left behind once all have
// mapped it; rank 0 unlinks it on its way out otherwise).
//
// The barrier counts arrivals in the segment; the last rank to arrive bumps
// a generation word, which the others spin on (yielding the core where
// ranks outnumber cores), then sleep on as a futex, waking every 100 ms to
// see whether a rank has closed its end or its process has ended.
//
// Where every rank can read every peer's memory (the kernel's cross-memory
// attach), read_peer() copies from it: found out when the arena is made.
//
// exchange() has no shared counter: each rank's mailbox starts with the
// number of the exchange it was last posted for, and each rank waits on
// its peers' numbers, spinning, then sleeping on the poster's own futex
// word.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "transport/shared_arena.h"
#include "transport/shm/process_watch.h"
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
  unsigned char* outbox(size_t bytes) override;
  Status exchange(uint64_t fingerprint, double timeout_s, const Stalled& stalled, int* differs) override;
  const unsigned char* inbox(int q, size_t bytes) const override;
  uint64_t fingerprint_of(int q) const override;
  void abort() override;
  bool reads_peers() const override { return reads_peers_; }
  Status read_peer(int q, const iovec* local, size_t local_count, const iovec* remote, size_t remote_count) override;

  // What a segment of `size` ranks with slots of `slot_bytes` takes.
  static size_t segment_bytes(int size, size_t slot_bytes);

  struct Header;
  struct Member;
  struct Mailbox;

 private:
  ShmArena(int rank, int size, const ShmArenaOptions& options);
  Member& member(int r) const;
  Mailbox* mailbox(int r, uint64_t parity) const;
  // Until rank q has posted to exchange `round` in `box`.
  Status wait_for_post(int q, const Mailbox* box, uint64_t round, Deadline deadline, const Stalled& stalled);
  // A rank that closed its end or whose process ended: PEER_LOST naming it.
  Status check_peers();
  Status check_peer(int r);  // the same for rank r alone
  // Whether this process can read every peer's memory (process_vm_readv:
  // Linux's cross-memory attach, which ptrace's rules allow between one
  // user's processes unless a container's seccomp or Yama forbids it, and
  // which cannot reach a peer in another pid namespace): each peer posted
  // where a random word of its own lies, and this rank reads it.
  bool can_read_every_peer() const;

  int rank_;
  int size_;
  size_t slot_bytes_;
  ShmArenaOptions options_;
  std::string name_;  // rank 0's, until unlinked
  Header* header_ = nullptr;
  size_t mapped_bytes_ = 0;
  std::vector<ProcessWatch> processes_;  // per rank; none for this process's own ranks
  std::atomic<bool> aborted_{false};
  Status failed_;
  uint64_t exchanged_parity_ = 0;  // the mailboxes of the last exchange
  uint64_t probe_word_ = 0;        // what peers read to learn whether they can (can_read_every_peer)
  bool reads_peers_ = false;
};

}  // namespace kolo
