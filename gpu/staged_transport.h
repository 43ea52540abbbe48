// Messages in GPU memory over a transport that moves host bytes (TCP, or
// RDMA where the NIC cannot reach the GPU): each one is staged through
// pinned host memory. A send is copied device-to-host into a pinned slot
// on the Device's stream and goes on the wire once that copy has run; a
// receive lands in a pinned slot and is copied host-to-device. Every
// message takes a slot of its own (a few per direction, each a pipeline
// segment), so the copy of segment i+1 overlaps the wire carrying segment
// i, and reductions stay on the GPU (the collective reduces the device
// buffer the receive filled). Host-memory messages pass straight through,
// in order with the staged ones: the wire sees exactly the byte stream
// host buffers would have made, so a staged rank interoperates with any
// peer using the same wire.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "transport/layered_transport.h"

namespace kolo {

class StagedTransport : public LayeredTransport {
 public:
  // `wire` (below) is connected already and outlives this. slot_bytes: the usual
  // message size (larger messages get a buffer of their own, of pageable
  // host memory, freed after); slots: pinned buffers per direction (at
  // least 2: double buffering).
  StagedTransport(Transport* wire, Device* device, size_t slot_bytes, int slots);
  // Allocates every slot now (pinned memory waits for the whole device):
  // from a caller's thread, before any of its streams is held.
  Status allocate_slots();
  ~StagedTransport() override;

  Status post_send(int peer, const void* data, size_t bytes, uint64_t tag, Request* request) override;
  Status post_recv(int peer, void* data, size_t bytes, uint64_t tag, Request* request) override;
  Status progress(Deadline deadline) override;
  const char* name() const override { return name_.c_str(); }

 private:
  enum class Stage {
    kQueued,    // waits for a slot (device) or its turn on the wire
    kCopying,   // device-to-host copy into the slot enqueued (sends)
    kReady,     // may go on the wire
    kOnWire,
    kUnstaging, // host-to-device copy out of the slot enqueued (receives)
    kDone,
  };
  struct Message {
    Request* request;
    bool staged;           // device memory: goes through a slot
    void* slot = nullptr;  // pinned host memory
    bool own_slot = false; // larger than slot_bytes_: pageable, freed when done
    uint64_t fence = 0;
    Stage stage = Stage::kQueued;
    Request wire;
  };
  using Queue = std::deque<std::unique_ptr<Message>>;

  Status post(int peer, bool send, void* data, size_t bytes, uint64_t tag, Request* request);
  // Moves every message as far as it can go; counts requests it finished.
  Status pump(int* completed, bool* device_busy);
  Status pump_queue(int peer, bool send, Queue* q, int* completed, bool* device_busy);
  void* take_slot(std::vector<void*>* pool, int* allocated, size_t bytes, bool* own);
  void give_slot(std::vector<void*>* pool, Message* m);
  // The message's request is done: its slot goes back to the pool.
  void finish(std::vector<void*>* pool, Message* m, int* completed);

  Device* device_;
  const size_t slot_bytes_;
  const int slots_;
  std::string name_;
  std::map<int, Queue> sends_;  // per peer, in posting order
  std::map<int, Queue> recvs_;
  std::vector<void*> free_send_slots_, free_recv_slots_;
  std::vector<void*> all_slots_;
  int send_slots_ = 0, recv_slots_ = 0;  // allocated so far
};

}  // namespace kolo
