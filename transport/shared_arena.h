// Memory that every rank of a communicator maps, when all of them run on
// one host, with a barrier among them: what the shared-memory allreduce
// (collectives/arena_allreduce.h) runs on. Each rank owns a slot that it
// writes and every rank may read between barriers, so a rank reduces its
// share of a buffer reading its peers' data where they put it, with no
// message in between.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <sys/uio.h>

#include "common/deadline.h"
#include "common/faster_of_two.h"
#include "common/function_ref.h"
#include "common/status.h"

namespace kolo {

class SharedArena {
 public:
  virtual ~SharedArena() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual size_t slot_bytes() const = 0;
  // Rank r's slot: written by r only, read by every rank between barriers.
  virtual unsigned char* slot(int r) = 0;

  // Returns once every rank has called it as many times: what each wrote
  // before its call is then visible to all. Fails at the deadline (TIMEOUT
  // naming the ranks not there), on abort(), or when a rank closes its end
  // or its process ends (PEER_LOST naming it), within a tenth of a second.
  virtual Status barrier(Deadline deadline) = 0;

  // Small buffers in one step, with no barrier (the one-shot allreduce of
  // arena_allreduce.h): this rank fills outbox(bytes) with up to
  // kMailboxBytes, then exchange() posts them with the call's
  // fingerprint and returns once every rank has posted to the same
  // exchange, with *differs the first rank that posted another fingerprint
  // (-1: none; fingerprint_of(q) says what it posted); inbox(q, bytes) is then
  // rank q's bytes. While it waits past its spin for rank q, it asks
  // `stalled(q)` (if given) at every wake-up, at least every tenth of a
  // second: an error ends the wait with it unless rank q has posted
  // meanwhile (the caller's way to tell a rank that runs another
  // collective from a slow one). Mailboxes alternate as the
  // halves do, counted by the same `chunks`, so that a rank reads a peer's
  // mailbox until the exchange or chunk after next, which the peer enters
  // only once it is done with this one. Fails as barrier() does, its
  // deadline timeout_s from when it starts to wait (a call that finds every
  // post there reads no clock).
  static constexpr size_t kMailboxBytes = (16 << 10) - 64;  // data per mailbox: 16 KiB with its header
  // Up to this much rides on the line that posts it: one line between the
  // cores instead of two. outbox(bytes) and inbox(q, bytes) say where a
  // buffer of `bytes` goes.
  static constexpr size_t kInlineBytes = 48;
  virtual unsigned char* outbox(size_t bytes) = 0;
  using Stalled = FunctionRef<Status(int q)>;  // called only while exchange() waits; nullptr: none
  virtual Status exchange(uint64_t fingerprint, double timeout_s, const Stalled& stalled, int* differs) = 0;
  virtual const unsigned char* inbox(int q, size_t bytes) const = 0;
  virtual uint64_t fingerprint_of(int q) const = 0;

  // Whether this rank may copy straight out of every peer's own memory
  // (read_peer): agreed by every rank when the arena was made, so the same
  // on all. Where it holds, a peer's buffer reaches this rank in one copy,
  // where through a slot it takes two (collectives/single_copy_allreduce.h).
  virtual bool reads_peers() const { return false; }
  // Copies rank q's memory at `remote` (addresses in q's process, as q
  // posted them) into this process's `local`; the two lists cover the same
  // number of bytes. Only where reads_peers(); PEER_LOST where q's process
  // ended or its end closed, TRANSPORT where q's memory could not be read.
  virtual Status read_peer(int q, const iovec* local, size_t local_count, const iovec* remote, size_t remote_count) {
    (void)q, (void)local, (void)local_count, (void)remote, (void)remote_count;
    return unsupported("this arena cannot read its peers' memory");
  }

  // Makes every current and later barrier() fail here, and in the other
  // ranks as a closed peer. Any thread.
  virtual void abort() = 0;

  // Where in every slot the next chunk goes, for the algorithms' own
  // bookkeeping (the same on every rank): halves alternate across chunks
  // and calls, since the ranks may still read the other half, so one
  // barrier per chunk keeps writers and readers apart.
  size_t next_half() { return (chunks++ % 2) * (slot_bytes() / 2); }
  uint64_t chunks = 0;  // chunks moved through the slots so far

  // The size class of a call of `bytes` (log2): what the tables below
  // are kept per.
  static size_t size_class(size_t bytes) {
    size_t c = 0;
    while (c < 63 && (bytes >> (c + 1)) != 0) ++c;
    return c;
  }

  // How this rank writes its data into its slot, and its results out of
  // the slots, per collective and size (collectives/arena_writes.h):
  // through the cache or around it.
  std::array<FasterOfTwo, 256> slot_writes;
  std::array<FasterOfTwo, 256> result_writes;
  // Where reads_peers(), how an allreduce of each size class (log2 of its
  // bytes) crosses between the ranks: straight out of the peers' memory
  // (0) or through the slots (1). Rank 0's calls measure and choose for
  // all (collectives/single_copy_allreduce.h). The first reads of a
  // buffer out of a peer's memory cost more than later ones (a 32 MiB
  // allreduce's first three took 2 to 4 times as long as its tenth), so
  // each way's first two runs are not counted; and a way read straight
  // out of the peers' memory gets faster run after run for about eight
  // runs after the slots' way: its tries settle (FasterOfTwo), up to
  // twelve runs.
  struct Crossings : FasterOfTwo {
    Crossings() : FasterOfTwo(4, 12) {}
  };
  std::array<Crossings, 64> allreduce_crossings;
};

}  // namespace kolo
