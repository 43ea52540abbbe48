// Receiving from any peer (kolo_recv_any, MPI_ANY_SOURCE): a capability
// a transport opts into, Transport::any_source() returning its AnySource.
//
// A transport whose receiver sees a message's header before any receive
// is posted for it (TCP: the socket; shared memory: the ring) has one;
// the others return nullptr from any_source(). RDMA cannot: its receiver-driven
// protocol moves nothing, not even a header, before the receiver's
// clear-to-send. None of it adds a byte, a message or a store access to
// the matched path: it only looks at what the matched path would read.
// From the thread that runs progress():
// - try_connect(peer) is connect() as far as it goes without waiting for
//   the peer to connect too (a receiver cannot know which peers will
//   send): *connected says whether the pair is connected now; when not,
//   this rank's half is in place (so the peer's connect() completes
//   without this rank) and a later call finishes once the peer's half is.
//   Waits only for what needs no act of the peer (the store, its
//   listener), bounded by the deadline. PEER_LOST: the peer has gone.
// - peek(peer) looks at the next message from a connected peer that no
//   posted receive will take, without taking it: nothing yet, its header
//   (size and tag) has arrived, or the peer closed its end and nothing
//   more will come. Only with no receive pending for that peer (else
//   nothing yet: the next message is behind those receives'). The
//   message stays: the next post_recv for the peer takes it as usual,
//   and fails with MISMATCH as usual if size or tag differ.
// - watch(peers): until the next watch(), progress() also returns OK,
//   with nothing completed, as soon as peek() would report something
//   other than "nothing yet" for one of `peers` (connected, with no
//   receive pending), and sleeps on their connections too. watch({})
//   ends it; a peer the caller is done with must leave the set, or
//   progress() keeps returning at once.
#pragma once

#include <cstdint>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace kolo {

// What peek() saw of a peer's next message.
struct Arrival {
  enum State { kNothing, kArrived, kClosed } state = kNothing;
  uint64_t bytes = 0;  // kArrived: the message's size
  uint64_t tag = 0;    // kArrived: its tag
};

class AnySource {
 public:
  // Whether the other three work for `peer` (any thread; fixed once the
  // transport exists).
  virtual bool can_peek(int peer) const = 0;
  virtual Status try_connect(int peer, Deadline deadline, bool* connected) = 0;
  virtual Status peek(int peer, Arrival* next) = 0;
  virtual Status watch(const std::vector<int>& peers) = 0;

 protected:
  ~AnySource() = default;  // not owned through this interface
};

}  // namespace kolo
