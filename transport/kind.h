// A kind of transport (shared memory, RDMA, TCP) as the runtime sees it:
// what it tells the other ranks at the rendezvous, which peers it reaches,
// and how it opens for one communicator. Each transport's folder defines
// its kind and registers it (a *_kind.cc linked with alwayslink), as Gloo's
// devices and UCX's transports do; the runtime names none of them.
// routes.h chooses one kind per peer from what every rank offered.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/setting_values.h"
#include "common/deadline.h"
#include "common/status.h"
#include "transport/link_cost.h"
#include "transport/shared_arena.h"
#include "transport/store.h"
#include "transport/transport.h"

namespace kolo {

// What opening any transport for one communicator takes.
struct TransportContext {
  Store* store = nullptr;
  int rank = 0;
  int size = 1;
  int ranks_on_host = 1;     // the communicator's ranks on this rank's machine
  std::string store_prefix;  // the communicator's ("", "engine/"); each kind adds its own name
  std::string job_name;      // the job's; communicators tell theirs apart by store_prefix
  std::string bind_address;  // where this rank listens, when a kind listens
  double timeout_s = 300;    // KOLO_TIMEOUT_S
  SettingValues settings;    // every setting; each kind reads its own
};

class TransportKind {
 public:
  virtual ~TransportKind() = default;
  // As KOLO_TRANSPORT names it.
  virtual const char* name() const = 0;
  // The settings it reads from TransportContext::settings (checked to be
  // rows of the settings table).
  virtual std::vector<std::string> settings() const { return {}; }
  // What it carries: the host memory of every collective (the
  // communicator's transports, KOLO_TRANSPORT), or device memory between
  // GPUs, chosen per peer for device buffers before staging them through
  // the host's transport (CUDA IPC; opened with open_over, not open).
  enum class Carries { kHostMemory, kDeviceMemory };
  virtual Carries carries() const { return Carries::kHostMemory; }
  // Whether the peers it reaches map this rank's memory (the log says
  // "same machine").
  virtual bool shares_memory() const { return false; }
  // What one of its links costs when KOLO_LINK_COSTS says nothing, between
  // ranks of one host or of two (the cost model's local and remote links):
  // a one-byte exchange's half round trip, one direction of a large
  // stream. A kind that does not say is priced as TCP between hosts, the
  // slowest kolo knows: it is never chosen for a speed it may not have.
  virtual LinkCost link_cost(bool same_host) const {
    (void)same_host;
    return {30e-6, 1.25e9};
  }
  // Memory every rank of the communicator maps, for the shared-memory
  // allreduce, when this kind reaches every peer. Collective over the
  // communicator's ranks. UNSUPPORTED where the kind has none, or (on every
  // rank alike) when it cannot make one now.
  virtual Status open_arena(const TransportContext& context, int spin_us, bool yield, Deadline deadline,
                            std::unique_ptr<SharedArena>* out) const {
    (void)context, (void)spin_us, (void)yield, (void)deadline, (void)out;
    return unsupported(std::string(name()) + " has no shared arena");
  }
  // Before the rendezvous: whether this rank can use it, and what the peers'
  // reaches() need to know, as text of the kind's own (UNSUPPORTED: it
  // cannot, saying why). A kind that can only tell by opening itself leaves
  // what it opened in *opened, and that is used for the world's peers.
  virtual Status offer(const TransportContext& context, std::string* offer,
                       std::unique_ptr<DirectTransport>* opened) const = 0;
  // Whether ranks a and b can talk over it, else why not (for the log).
  // Symmetric, so both ends decide alike. ranks_on_host: how many ranks
  // share a's host.
  struct Peer {
    const std::string& host;
    const std::string* offer;  // nullptr: the rank could not use this kind
  };
  virtual bool reaches(const Peer& a, const Peer& b, int ranks_on_host, std::string* why_not) const = 0;
  virtual Status open(const TransportContext& context, std::unique_ptr<DirectTransport>* out) const = 0;
  // A kind that carries device memory: opens over `below` (the device
  // buffers' transport to the peers it does not reach), for `device` (the
  // GPU layer's Device, gpu/device.h, which this layer does not name),
  // reaching rank r where reached[r]. UNSUPPORTED for the others.
  virtual Status open_over(Transport* below, void* device, const std::vector<bool>& reached,
                           std::unique_ptr<Transport>* out) const {
    (void)below, (void)device, (void)reached, (void)out;
    return unsupported(std::string(name()) + " carries host memory: it opens on its own");
  }
};

// Registers a kind when the program starts. preference: lower is tried
// first for each peer (CUDA IPC 5 for device memory; shared memory 10,
// RDMA 20, TCP 30), as NCCL's canConnect table orders its transports.
struct TransportRegistration {
  TransportRegistration(int preference, std::unique_ptr<TransportKind> kind);
};

// Every registered kind, in order of preference.
const std::vector<const TransportKind*>& transport_kinds();
// The one KOLO_TRANSPORT calls `name`, or nullptr.
const TransportKind* find_transport_kind(const std::string& name);

}  // namespace kolo
