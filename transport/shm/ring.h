// One direction between two ranks of a machine: a single-producer,
// single-consumer ring of fixed-size slots in a shared memory segment. The
// sender copies each message in, a slot-sized chunk at a time; the
// receiver copies it out into the buffer it posted. Messages keep their
// order; each chunk carries the message's tag and size, so a receive that
// disagrees with its send is told apart before any byte lands.
//
// The two counters are also the futex words each side sleeps on: `head`
// (slots written) wakes the receiver, `tail` (slots read) the sender. A
// side sets its `*_sleeping` flag before sleeping and the other side wakes
// it only then, so a busy pair makes no system call.
//
// A small message's latency is the cache lines it moves between the two
// cores, so the fast path touches as few as it can: the receiver learns of
// a chunk from the slot itself (its `seq`, written last), not from `head`;
// the sender remembers `tail` and reads it again only when the ring looks
// full; and the flags lie on lines of their own, apart from the counters
// written at every chunk.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace kolo {

// Why a side closed its end (0 while open).
enum ShmClosed : uint32_t { kShmOpen = 0, kShmGone = 1, kShmMismatch = 2 };

// The segment's first bytes. Cache-line apart: each line is written by one
// side only.
struct ShmRingHeader {
  static constexpr uint64_t kMagic = 0x6b6f6c6f73686d33;  // "kolo" "shm3": slots start on a line

  alignas(64) std::atomic<uint32_t> head;             // slots written, by the sender
  alignas(64) std::atomic<uint32_t> tail;             // slots read, by the receiver
  alignas(64) std::atomic<uint32_t> sender_sleeping;  // the sender waits for `tail` to move
  std::atomic<uint32_t> sender_closed;                // a ShmClosed: the sender aborted or went away
  alignas(64) std::atomic<uint32_t> receiver_sleeping;
  std::atomic<uint32_t> receiver_closed;    // a ShmClosed
  std::atomic<uint32_t> receiver_attached;  // mapped (and the name unlinked)
  // While the receiver sleeps waiting for a message that has not begun to
  // arrive: that message's number (from 0) plus one; else 0. The sender
  // compares it with what it has sent (Transport::check_not_awaited).
  std::atomic<uint64_t> receiver_awaits;
  alignas(64) uint64_t magic;
  uint64_t job_id;
  int32_t from, to;
  int32_t sender_pid;
  uint32_t slots;
  uint64_t slot_bytes;  // payload bytes per slot
};

// Each slot: this, then slot_bytes of payload.
struct ShmChunk {
  uint64_t tag;
  uint64_t message_bytes;  // the whole message's size
  uint64_t offset;         // of this chunk in the message
  uint32_t bytes;          // of this chunk (at most a slot's)
  // The slot's index in the sender's count plus one, stored (release)
  // after the rest: the chunk is there when seq says so. A slot left from
  // the ring's previous lap holds a number `slots` smaller.
  std::atomic<uint32_t> seq;
};

struct ShmRingShape {
  uint32_t slots = 8;  // a power of two: a slot's index is a mask, not a division
  uint64_t slot_bytes = 128 << 10;
  size_t segment_bytes() const;
  // At least 2 slots, a power of two, of 64 bytes to 4 GiB each.
  bool valid() const;

  // The rings a rank sends on when `ranks_on_host` ranks share the machine:
  // the default up to 17 ranks; beyond, slots shrink (down to 16 KiB) so
  // that a rank's rings to all its machine's peers stay within
  // kRingBytesPerRank, and /dev/shm grows with the ranks, not their square
  // (64 ranks: about 1 GiB of rings instead of 4). The receiver reads the
  // shape from the ring's header, so both ends need not compute it alike.
  static constexpr uint64_t kRingBytesPerRank = uint64_t{16} << 20;
  static ShmRingShape for_ranks_on_host(int ranks_on_host);
};

// A mapped segment: the sender's or the receiver's view.
class ShmRing {
 public:
  // The sender creates the segment (O_EXCL, under `name`) and fills in its
  // header; the receiver opens it, checks the header against what it
  // expects, and unlinks the name at once, so nothing of it outlives the
  // two processes.
  static Status create(const std::string& name, const ShmRingShape& shape, uint64_t job_id, int from, int to,
                       ShmRing* out);
  static Status open_and_unlink(const std::string& name, uint64_t job_id, int from, int to, ShmRing* out);
  ShmRing() = default;
  ~ShmRing();
  ShmRing(ShmRing&& other) noexcept;
  ShmRing& operator=(ShmRing&& other) noexcept;

  ShmRingHeader* header() const { return header_; }
  bool mapped() const { return header_ != nullptr; }
  // Removes the name if this side created it and the receiver never
  // attached (a connection that failed half way).
  void unlink_if_unattached();

  // Sender: copies the next chunk of [data, data + bytes) from `*offset` on
  // into a free slot; false when the ring is full. A message of 0 bytes is
  // one empty chunk.
  bool write_chunk(const void* data, size_t bytes, uint64_t tag, size_t* offset);
  // Receiver: the oldest unread chunk, or nullptr.
  const ShmChunk* peek() const;
  const unsigned char* payload(const ShmChunk* chunk) const {
    return reinterpret_cast<const unsigned char*>(chunk + 1);
  }
  // Receiver: done with the chunk peek() gave.
  void release();

 private:
  ShmChunk* slot(uint32_t index) const;

  std::string name_;  // the creator's, until unlinked
  ShmRingHeader* header_ = nullptr;
  size_t mapped_bytes_ = 0;
  // Sender: `tail` as last read (see the top of this file).
  uint32_t tail_seen_ = 0;
  // The header's shape, kept here: slot() runs for every chunk.
  uint32_t slots_ = 0;
  size_t slot_stride_ = 0;
};

}  // namespace kolo
