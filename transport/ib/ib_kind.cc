// The RDMA transport as a kind (transport/kind.h). Whether a rank can use
// RDMA is known only by opening a device, so its offer opens the transport,
// and that one serves the world's peers.
#include "transport/handshake.h"
#include "transport/ib/ib_transport.h"
#include "transport/kind.h"
#include "transport/tcp/tcp_kind.h"

namespace kolo {
namespace {

class IbKind final : public TransportKind {
 public:
  const char* name() const override { return "ib"; }
  // Measured on the machines in docs/performance.md.
  LinkCost link_cost(bool) const override { return {4e-6, 11e9}; }
  std::vector<std::string> settings() const override {
    return {"KOLO_IB_DEV", "KOLO_IB_PORT", "KOLO_IB_GID_INDEX", "KOLO_ENCRYPT"};
  }

  Status offer(const TransportContext& c, std::string* offer, std::unique_ptr<DirectTransport>* opened) const override {
    KOLO_RETURN_IF_ERROR(open(c, opened));
    *offer = "1";
    return Status::ok();
  }

  bool reaches(const Peer& a, const Peer& b, int, std::string* why_not) const override {
    if (a.offer && b.offer) return true;
    *why_not = a.offer || b.offer ? "RDMA on one end only" : "no RDMA device";
    return false;
  }

  Status open(const TransportContext& c, std::unique_ptr<DirectTransport>* out) const override {
    // The NIC writes into the peer's memory itself: nothing of the host
    // sees the bytes to seal them. Under KOLO_TRANSPORT=auto TCP then
    // carries what crosses hosts.
    if (c.settings.flag("KOLO_ENCRYPT", false)) {
      return unsupported("RDMA verbs cannot encrypt (KOLO_ENCRYPT=1): the NIC moves the bytes without the host");
    }
    IbOptions options;
    options.store_prefix = c.store_prefix + "ib/";
    options.job_id = job_id_from_name(c.job_name);
    options.settings.device = c.settings.text("KOLO_IB_DEV");
    options.settings.port = static_cast<int>(c.settings.integer("KOLO_IB_PORT", 0));
    options.settings.gid_index = static_cast<int>(c.settings.integer("KOLO_IB_GID_INDEX", -1));
    options.link = tcp_options(c);
    std::unique_ptr<IbTransport> t;
    Status status = IbTransport::create(c.store, c.rank, c.size, options, &t);
    if (!status.is_ok()) return status.with_context("the RDMA transport");
    *out = std::move(t);
    return Status::ok();
  }
};

const TransportRegistration registration(20, std::make_unique<IbKind>());

}  // namespace
}  // namespace kolo
