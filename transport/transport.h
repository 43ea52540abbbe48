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
//  - Receiving from any peer (kolo_recv_any, MPI_ANY_SOURCE) is a
//    capability a transport may have: any_source() (any_source.h).
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

class AnySource;

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

  // Receiving from any peer (any_source.h): this transport's, or nullptr
  // where it cannot see a message before a receive names its sender.
  virtual AnySource* any_source() { return nullptr; }

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
