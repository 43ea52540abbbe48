// The TCP transport as a kind (transport/kind.h): it reaches every peer,
// so it comes last.
#include "transport/tcp/tcp_kind.h"

#include <algorithm>

#include "transport/handshake.h"

namespace kolo {
namespace {

class TcpKind final : public TransportKind {
 public:
  const char* name() const override { return "tcp"; }
  // Within a host the loopback (measured on the machines in
  // docs/performance.md); between hosts a 10 Gbit/s Ethernet's.
  LinkCost link_cost(bool same_host) const override {
    return same_host ? LinkCost{15e-6, 3e9} : LinkCost{30e-6, 1.25e9};
  }
  std::vector<std::string> settings() const override {
    return {"KOLO_SOCKETS_PER_PEER", "KOLO_SOCKET_BUFFER", "KOLO_CHECKSUM", "KOLO_SECRET", "KOLO_ENCRYPT",
            "KOLO_TCP_CONGESTION"};
  }
  Status offer(const TransportContext&, std::string*, std::unique_ptr<DirectTransport>*) const override {
    return Status::ok();
  }
  bool reaches(const Peer&, const Peer&, int, std::string*) const override { return true; }
  Status open(const TransportContext& c, std::unique_ptr<DirectTransport>* out) const override {
    std::unique_ptr<TcpTransport> t;
    KOLO_RETURN_IF_ERROR(TcpTransport::create(c.store, c.rank, c.size, tcp_options(c), &t));
    *out = std::move(t);
    return Status::ok();
  }
};

const TransportRegistration registration(30, std::make_unique<TcpKind>());

}  // namespace

TcpOptions tcp_options(const TransportContext& c) {
  TcpOptions options;
  options.store_prefix = c.store_prefix + "tcp/";
  // One id per communicator, the same on all its ranks: the process's TCP
  // listener tells the engine's sibling (prefix "engine/") and the main
  // communicator (prefix "") apart by it.
  options.job_id = job_id_from_name(c.job_name + c.store_prefix);
  options.bind_address = c.bind_address;
  options.streams_per_peer = static_cast<int>(c.settings.integer("KOLO_SOCKETS_PER_PEER", 1));
  options.socket_buffer_bytes = static_cast<int>(c.settings.integer("KOLO_SOCKET_BUFFER", 0));
  options.congestion = c.settings.text("KOLO_TCP_CONGESTION");
  options.checksum = c.settings.flag("KOLO_CHECKSUM", false);
  options.encrypt = c.settings.flag("KOLO_ENCRYPT", false);
  options.secret = c.settings.text("KOLO_SECRET");
  options.handshake_timeout_s = std::min(c.timeout_s, 10.0);
  return options;
}

}  // namespace kolo
