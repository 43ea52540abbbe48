// The interface every transport implements and every algorithm in
// collectives/ uses. An algorithm only posts messages to peers and waits for
// them to complete; which wire carries them (TCP, RDMA verbs, CUDA IPC) is
// invisible to it.
//
// Contract:
//  - Messages between two ranks are matched in posting order, separately for
//    each direction: the k-th send posted to peer P meets the k-th receive
//    posted for P on the other side. Sizes and tags must agree; a difference
//    is reported as KOLO_ERR_MISMATCH, never delivered.
//  - post_send/post_recv never block. Buffers must stay valid, and a send's
//    buffer unchanged, until the request is done.
//  - progress() is called by one thread at a time (the thread running the
//    collective). abort() may be called from any thread at any time.
//  - Receiving from any peer (kolo_recv_any, MPI_ANY_SOURCE) is optional:
//    a transport whose receiver sees a message's header before any receive
//    is posted for it (TCP: the socket; shared memory: the ring) implements
//    can_peek, try_connect, peek and watch below; the others keep the
//    defaults, which say UNSUPPORTED. RDMA cannot: its receiver-driven
//    protocol moves nothing, not even a header, before the receiver's
//    clear-to-send. None of it adds a byte, a message or a store access to
//    the matched path: it only looks at what the matched path would read.
//    From the thread that runs progress():
//    - try_connect(peer) is connect() as far as it goes without waiting for
//      the peer to connect too (a receiver cannot know which peers will
//      send): *connected says whether the pair is connected now; when not,
//      this rank's half is in place (so the peer's connect() completes
//      without this rank) and a later call finishes once the peer's half is.
//      Waits only for what needs no act of the peer (the store, its
//      listener), bounded by the deadline. PEER_LOST: the peer has gone.
//    - peek(peer) looks at the next message from a connected peer that no
//      posted receive will take, without taking it: nothing yet, its header
//      (size and tag) has arrived, or the peer closed its end and nothing
//      more will come. Only with no receive pending for that peer (else
//      nothing yet: the next message is behind those receives'). The
//      message stays: the next post_recv for the peer takes it as usual,
//      and fails with MISMATCH as usual if size or tag differ.
//    - watch(peers): until the next watch(), progress() also returns OK,
//      with nothing completed, as soon as peek() would report something
//      other than "nothing yet" for one of `peers` (connected, with no
//      receive pending), and sleeps on their connections too. watch({})
//      ends it; a peer the caller is done with must leave the set, or
//      progress() keeps returning at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace kolo {

// One message in flight. Owned by the caller, who must keep it alive and at a
// fixed address until `done` is true or the transport has failed. A
// transport keeps its own progress state for it (TCP: the frame and the
// bytes moved), in records that point here.
struct Request {
  void* data = nullptr;  // const for sends
  size_t bytes = 0;
  uint64_t tag = 0;  // fingerprint of the operation this message belongs to
  bool done = false;
};

// What one look at the wire did.
struct Pumped {
  int completed = 0;     // requests finished
  bool moved = false;    // bytes moved without finishing one: the spin starts again
  bool noticed = false;  // a watched peer's next message arrived, or the peer closed (see watch())
};

// What peek() saw of a peer's next message.
struct Arrival {
  enum State { kNothing, kArrived, kClosed } state = kNothing;
  uint64_t bytes = 0;  // kArrived: the message's size
  uint64_t tag = 0;    // kArrived: its tag
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Announces every peer this rank is about to connect to, before it
  // connects to any. A transport whose connections need parameters from
  // both sides publishes its own here (RDMA: each queue pair's address), so
  // that ranks connecting around a cycle never wait on one another.
  virtual Status prepare(const std::vector<int>& peers) {
    (void)peers;
    return Status::ok();
  }

  // Establishes the connection to `peer`. Both ranks of a pair must call it;
  // it returns once the pair can carry messages, or fails by the deadline.
  virtual Status connect(int peer, Deadline deadline) = 0;

  virtual Status post_send(int peer, const void* data, size_t bytes, uint64_t tag, Request* request) = 0;
  virtual Status post_recv(int peer, void* data, size_t bytes, uint64_t tag, Request* request) = 0;

  // Moves bytes for every posted request. Returns OK as soon as at least one
  // request has completed since the previous call; otherwise waits until one
  // does, the deadline passes (KOLO_ERR_TIMEOUT naming the peers and what was
  // in flight), the transport fails, or abort() is called.
  virtual Status progress(Deadline deadline) = 0;

  // Makes every current and future progress() return KOLO_ERR_ABORTED.
  virtual void abort() = 0;

  // Makes the current progress() call, or the next one if none is running,
  // return OK early even though nothing completed. Any thread. Lets a thread
  // that waits for a peer's message also react to local events (the runtime
  // engine waits for either a peer starting a round or a local submission).
  virtual void interrupt() = 0;

  // How progress() waits when nothing can move: busy-poll for spin_us
  // (giving the core away between polls if yield), then sleep. Set before
  // the first collective; the right choice depends on how many ranks share
  // this machine's cores, which is known only after the rendezvous.
  virtual void set_polling(int spin_us, bool yield) { (void)spin_us, (void)yield; }

  // Declares [data, data + bytes) long-lived: it stays allocated until
  // deregister_memory covers it. A transport that must register memory with
  // its device (RDMA) registers it here, once, and moves messages inside it
  // with no copy; other memory it stages through buffers of its own, since
  // nothing tells it when an application frees a buffer. Transports that
  // need no registration ignore both calls.
  virtual Status register_memory(const void* data, size_t bytes) {
    (void)data, (void)bytes;
    return Status::ok();
  }
  // Before the memory is freed or unmapped. Any part of a declared range
  // forgets the whole declaration.
  virtual void deregister_memory(const void* data, size_t bytes) { (void)data, (void)bytes; }

  // Receiving from any peer: see the contract at the top. can_peek says
  // whether the other three work for `peer` (any thread; fixed once the
  // transport exists).
  virtual bool can_peek(int peer) const {
    (void)peer;
    return false;
  }
  virtual Status try_connect(int peer, Deadline deadline, bool* connected) {
    (void)peer, (void)deadline;
    *connected = false;
    return unsupported(std::string(name()) + " transport cannot receive from any peer");
  }
  virtual Status peek(int peer, Arrival* next) {
    (void)peer;
    *next = Arrival{};
    return unsupported(std::string(name()) + " transport cannot receive from any peer");
  }
  virtual Status watch(const std::vector<int>& peers) {
    return peers.empty() ? Status::ok() : unsupported(std::string(name()) + " transport cannot receive from any peer");
  }

  // For a rank that waits for its peers outside the transport (the arena's
  // one-shot allreduce, which sends no message) in the call `tag` names:
  // MISMATCH if a peer waits for a message from this rank that this rank
  // has not sent. That peer runs another call, and neither would learn it
  // before the deadline, unless the caller's wait has just ended (the peer
  // already past it): the caller looks at its wait again before failing,
  // and the transport stays usable. A transport that cannot tell (any but
  // shared memory, which sees a waiting receiver in the ring's header)
  // says OK.
  virtual Status check_not_awaited(uint64_t tag) {
    (void)tag;
    return Status::ok();
  }

  // "tcp", "ib", ...: for logs and benchmarks.
  virtual const char* name() const = 0;
};

// A transport that moves the bytes itself (TCP, RDMA, shared memory), as
// opposed to one layered over another. Its progress() is a ProgressLoop
// over the parts below; they are public so that one loop can drive several
// such transports at once (per_peer_transport.h: each peer reached by its
// own), which no single system call can put to sleep together.
class DirectTransport : public Transport {
 public:
  // Moves what can move without waiting and counts it. Fails with the
  // transport's sticky failure, if any.
  virtual Status pump(Pumped* pumped) = 0;
  // Waits until bytes may move, the deadline passes, or interrupt() or
  // abort() is called, counting what it completed itself. May return early.
  virtual Status sleep(Deadline deadline, Pumped* pumped) = 0;
  // Whether a posted request is unfinished.
  virtual bool has_pending() = 0;
  // What is still in flight, for a timeout's message ("" when nothing).
  virtual std::string describe_pending() = 0;
  // Whether watch() has a peer in its set: sleep() then waits for them too,
  // even with no request in flight.
  virtual bool watching() const { return false; }
};

}  // namespace kolo
