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
  int completed = 0;   // requests finished
  bool moved = false;  // bytes moved without finishing one: the spin starts again
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
};

}  // namespace kolo
