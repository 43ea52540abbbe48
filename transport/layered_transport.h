// A transport that carries its messages through another one below it (the
// GPU transports over TCP or RDMA): it has the same ranks, connections and
// abort, and only decides how each message crosses.
#pragma once

#include "transport/transport.h"

namespace kolo {

class LayeredTransport : public Transport {
 public:
  // `below` is connected already and outlives this.
  explicit LayeredTransport(Transport* below) : below_(below) {}

  int rank() const override { return below_->rank(); }
  int size() const override { return below_->size(); }
  Status connect(int peer, Deadline deadline) override { return below_->connect(peer, deadline); }
  void abort() override { below_->abort(); }
  void interrupt() override { below_->interrupt(); }
  Status check_not_awaited(uint64_t tag) override { return below_->check_not_awaited(tag); }

 protected:
  Transport* const below_;
};

}  // namespace kolo
