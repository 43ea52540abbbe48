// The RDMA verbs transport: InfiniBand or RoCE (soft-RoCE included) through
// libibverbs (opened at run time, verbs_library.h: without it there is no
// RDMA device), behind the same interface as TCP, so every collective runs on
// it unchanged. One reliable-connected queue pair per peer (pair.h has the
// protocol), one completion queue for all of them. Memory declared through
// register_memory is registered once and moves with no copy; any other
// message is staged through registered rings, so steady-state collectives
// register nothing either way.
//
// progress() polls the completion queue; when nothing has completed it
// spins briefly, then sleeps on the completion channel's file descriptor
// (with the interrupt eventfd beside it): no busy spin while idle.
//
// Beside each queue pair runs a TCP connection (the link), made by the TCP
// transport with the same authenticated handshake. It carries no data: its
// end is how a peer's death is learnt at once. A queue pair whose peer was
// killed learns nothing by itself (its receives just wait; soft-RoCE does
// not even fail the sends), but the dead process's sockets are closed by its
// kernel. An abort ends the links too, which tells the neighbours at once.
// Asynchronous device events (a port going down, a queue pair or the device
// failing) fail the transport naming the event.
//
// The device context and protection domain are the process's, shared with
// every other communicator's transport (device_context.h); the completion
// channel and queue are this transport's own.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>

#include "transport/ib/device.h"
#include "transport/ib/device_context.h"
#include "transport/ib/memory_registrar.h"
#include "transport/ib/pair.h"
#include "transport/ib/registration_cache.h"
#include "transport/progress_loop.h"
#include "transport/store.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/pair_table.h"
#include "transport/transport.h"

namespace kolo {

struct IbOptions {
  uint64_t job_id = 0;
  std::string store_prefix = "ib/";  // keys this transport owns in the store
  IbSettings settings;               // KOLO_IB_DEV, KOLO_IB_PORT, KOLO_IB_GID_INDEX
  TcpOptions link;                   // the TCP link beside each queue pair (one stream)
  int window = 64;                   // receive slots (credits) per peer
};

class IbTransport final : public DirectTransport, private IbEventListener {
 public:
  // UNSUPPORTED when there is no usable RDMA device, or no libibverbs to
  // ask (the caller falls back to TCP; the message says which).
  static Status create(Store* store, int rank, int size, const IbOptions& options,
                       std::unique_ptr<IbTransport>* out);
  ~IbTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "ib"; }
  const IbChoice& device() const { return choice_; }
  // The process's shared context on that device (tests compare them).
  const IbDeviceContext* device_context() const { return device_.get(); }

  // Registered once (RegistrationCache); messages inside move without staging.
  Status register_memory(const void* data, size_t bytes) override;
  void deregister_memory(const void* data, size_t bytes) override;

  struct Stats {
    uint64_t registrations = 0;  // NIC registrations: declared memory and staging rings
    uint64_t direct = 0;         // message ends in declared memory
    uint64_t staged = 0;         // message ends staged through a ring
  };
  Stats stats();

  // Fault injection for tests: moves the queue pair to `peer` into the
  // error state, as a failing NIC or a fatal transfer error would.
  void inject_queue_pair_error(int peer);

  // Creates the queue pairs and publishes their addresses.
  Status prepare(const std::vector<int>& peers) override;
  Status connect(int peer, Deadline deadline) override;
  Status post_send(int peer, const void* data, size_t bytes, uint64_t tag, Request* request) override;
  Status post_recv(int peer, void* data, size_t bytes, uint64_t tag, Request* request) override;
  Status progress(Deadline deadline) override;
  void abort() override;
  void interrupt() override;
  void set_polling(int spin_us, bool yield) override { loop_.set_polling(spin_us, yield); }
  // Polls the completion queue.
  Status pump(Pumped* pumped) override;
  // On the completion channel; after a second with nothing completing, it
  // probes the peers it waits on (a dead one fails the probe within ~0.5 s).
  Status sleep(Deadline deadline, Pumped* pumped) override;
  bool has_pending() override;
  std::string describe_pending() override;

 private:
  class VerbsRegistration;
  IbTransport(Store* store, int rank, int size, const IbOptions& options);
  Status open(const IbChoice& choice);
  // The pair to `peer`, unless this transport has failed.
  Status pair_for(int peer, IbPair** pair);
  std::string address_key(int from, int to) const;
  Status poll_completions(int* completed);
  Status sleep_until_event(Deadline deadline, int* completed);
  // Sends a probe to every peer this rank waits on (IbPair::probe).
  Status probe_pending_peers();
  // IbEventListener: keeps the events that concern this transport, for
  // poll_completions() to fail on (and wakes a sleeping progress()).
  void on_async_event(const ibv_async_event& event) override;
  Status take_event_failure();
  // The link to `peer` has ended, waiting up to wait_ms for its end.
  bool link_ended(int peer, int wait_ms);
  // A peer's link ended: what it still owed this rank is lost.
  Status on_link_end(int peer, int* completed);
  // A completion failed: PEER_LOST rather than TRANSPORT if the peer is gone.
  Status explain_failure(int peer, Status s);
  Status fail(Status s);

  Store* store_;
  int rank_;
  int size_;
  IbOptions options_;
  IbChoice choice_;
  std::shared_ptr<IbDeviceContext> device_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::unique_ptr<VerbsRegistration> verbs_;
  std::unique_ptr<MemoryRegistrar> registrar_;
  std::unique_ptr<RegistrationCache> cache_;
  std::unique_ptr<TcpTransport> link_;
  std::map<int, int> link_fds_;  // peer -> its link's socket, while the link lasts
  // Peers whose link has ended: a failed completion found while settling
  // their queue (on_link_end) is explained as their end, the socket gone.
  std::set<int> ended_links_;
  std::map<int, std::unique_ptr<IbPair>> prepared_;  // published, not yet connected (the collective's thread only)
  PairTable<IbPair> pairs_{"RDMA"};                  // connected
  ProgressLoop loop_;  // progress(), abort() and interrupt()
  Status failed_;
  std::chrono::steady_clock::time_point next_probe_;  // sleep() probes the peers it waits on from then
  std::chrono::steady_clock::time_point last_sleep_;  // when sleep() last returned: a later one starts a new wait
  std::mutex event_mutex_;
  Status event_failure_;                  // from on_async_event, under event_mutex_
  std::atomic<bool> event_failed_{false};  // event_failure_ is set
};

}  // namespace kolo
