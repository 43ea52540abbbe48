// Messages in GPU memory between ranks on one node, over CUDA IPC: each
// message is one device-to-device copy, made by the sender straight into
// the receiver's buffer. Receiver-driven, like the RDMA transport: once
// the receiver's stream has finished with the destination, it shares it
// (an IPC handle; the sender opens each allocation once and keeps it
// open), the sender copies on its own stream, and when the copy has run it
// says so. Opening a peer's allocation waits for the whole device, so on
// the thread that runs what callers' streams are held for (device.h's
// ReleasingHoldsScope) the sender opens none: a message into an allocation
// not yet open goes staged through `next` instead (its DONE says so, and
// the data follows it), and the allocation is opened before the next
// call's hold (Device::open_remembered); with a caching allocator's
// buffers, after the first steps every message is a direct copy again. Those two small control messages travel through the transport below (`next`), which
// also carries every message to peers not on this node (staged through
// host memory). Several ranks may share one GPU.
//
// Both ranks of an IPC pair must use it: a collective in which one passes
// host buffers and its neighbour device buffers fails with MISMATCH.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "transport/layered_transport.h"

namespace kolo {

class IpcTransport : public LayeredTransport {
 public:
  // next: the transport below. ipc_peers[r]: rank r shares this node
  // (messages to it go over IPC).
  IpcTransport(Transport* next, Device* device, std::vector<bool> ipc_peers);
  ~IpcTransport() override;

  Status post_send(int peer, const void* data, size_t bytes, uint64_t tag, Request* request) override;
  Status post_recv(int peer, void* data, size_t bytes, uint64_t tag, Request* request) override;
  Status progress(Deadline deadline) override;
  const char* name() const override { return "cuda-ipc"; }

 private:
  struct Control;
  struct Message;
  struct Peer;

  Status pump(int* completed, bool* device_busy);
  Status pump_peer(int peer, Peer* p, int* completed, bool* device_busy);
  // Posts receives on `next` for every control message this peer owes us.
  Status expect_controls(int peer, Peer* p);
  Status send_ready(int peer, Peer* p, const Control& c);
  // What is in flight, for a timeout's message.
  std::string describe() const;

  Device* device_;
  std::vector<bool> ipc_peers_;
  std::map<int, std::unique_ptr<Peer>> peers_;
};

}  // namespace kolo
