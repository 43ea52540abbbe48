// One transport per peer: the first that can reach it wins (shared memory
// for a rank on this machine, RDMA, then TCP; transport/routes.h decides),
// and the algorithms see one Transport as before. Requests go to the
// peer's own transport; progress() drives all of them in one loop.
//
// Waiting: a shared-memory transport sleeps on futexes, the others in
// poll() on descriptors, and no system call sleeps on both. When only one
// transport has requests in flight (the usual case: a hierarchical
// algorithm's phases each talk to one kind of peer) progress() sleeps in it
// as it would alone; when several do, it sleeps in each in turn for at most
// a millisecond, after the usual spin. Peers watched for a receive from
// any peer count as waiting, as requests in flight do.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/progress_loop.h"
#include "transport/any_source.h"
#include "transport/transport.h"

namespace kolo {

class PerPeerTransport final : public Transport, public AnySource {
 public:
  // routes[p] is the index in `transports` of the one that carries the
  // messages to and from rank p (ignored for this rank). Every transport
  // has the same rank and size.
  static Status create(std::vector<std::unique_ptr<DirectTransport>> transports, std::vector<int> routes,
                       std::unique_ptr<PerPeerTransport>* out);

  int rank() const override { return transports_[0]->rank(); }
  int size() const override { return transports_[0]->size(); }
  // "shm+tcp": the transports in use, in the order given.
  const char* name() const override { return name_.c_str(); }

  // The transport that carries the messages to and from `peer`.
  DirectTransport* route(int peer) const { return transports_[routes_[peer]].get(); }

  Status prepare(const std::vector<int>& peers) override;
  Status connect(int peer, Deadline deadline) override { return route(peer)->connect(peer, deadline); }
  Status post_send(int peer, const void* data, size_t bytes, uint64_t tag, Request* request) override {
    return route(peer)->post_send(peer, data, bytes, tag, request);
  }
  Status post_recv(int peer, void* data, size_t bytes, uint64_t tag, Request* request) override {
    return route(peer)->post_recv(peer, data, bytes, tag, request);
  }
  Status progress(Deadline deadline) override;
  void abort() override;
  void interrupt() override;
  Status check_not_awaited(uint64_t tag) override;
  void set_polling(int spin_us, bool yield) override;
  Status register_memory(const void* data, size_t bytes) override;
  void deregister_memory(const void* data, size_t bytes) override;
  // Receiving from any peer: each peer's own transport answers (UNSUPPORTED
  // for a peer whose transport has no AnySource); watch() gives each
  // transport its share of the peers (the others none).
  AnySource* any_source() override { return this; }
  bool can_peek(int peer) const override;
  Status try_connect(int peer, Deadline deadline, bool* connected) override;
  Status peek(int peer, Arrival* next) override;
  Status watch(const std::vector<int>& peers) override;

 private:
  PerPeerTransport() = default;
  Status sleep(Deadline deadline, Pumped* pumped);

  std::vector<std::unique_ptr<DirectTransport>> transports_;
  std::vector<int> routes_;
  std::string name_;
  ProgressLoop loop_;
  size_t next_sleeper_ = 0;  // when several wait: whose turn it is to sleep
};

}  // namespace kolo
