// Which transport carries the messages to each peer. At the rendezvous
// every rank publishes what it can use (RankFacts); for each peer the first
// transport of the registry that both ends can use wins (shared memory on
// the same machine, then RDMA, then TCP, as NCCL's canConnect table), so
// the two ranks of a pair always agree. KOLO_TRANSPORT names one to force
// it for every peer. Adding a transport is a folder under transport/ and a
// line in the registry (transport_registry.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/rank_facts.h"
#include "transport/ib/ib_transport.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/transport.h"

namespace kolo {

// What opening a transport for one communicator takes.
struct TransportSetup {
  Store* store = nullptr;
  int rank = 0;
  int size = 1;
  std::string store_prefix;  // the communicator's ("", "engine/"); each transport adds its own
  std::string job_name;      // the job's; communicators tell theirs apart by store_prefix
  TcpOptions tcp;            // TCP's, and the RDMA transport's side links'
  IbSettings ib;
  // The RDMA transport KOLO_TRANSPORT=auto opened to learn whether this rank
  // can use RDMA: taken rather than opening a second one.
  std::unique_ptr<IbTransport> opened_rdma;
};

// The RDMA transport, which KOLO_TRANSPORT=auto opens before the
// rendezvous to learn whether this rank can use RDMA (UNSUPPORTED: no device).
Status open_rdma(const TransportSetup& setup, std::unique_ptr<IbTransport>* out);

struct TransportKind {
  const char* name;  // as KOLO_TRANSPORT names it
  // Whether ranks a and b can talk over it, else why not (for the log).
  // Symmetric, so both ends decide alike. ranks_on_host: how many ranks
  // share a's host.
  bool (*reaches)(const RankFacts& a, const RankFacts& b, int ranks_on_host, std::string* why_not);
  Status (*open)(TransportSetup* setup, std::unique_ptr<DirectTransport>* out);
};

// In order of preference.
const std::vector<TransportKind>& transport_registry();

struct Routes {
  std::vector<int> kind;  // per rank: its index in transport_registry() (this rank's: -1)
  std::string summary;    // "shm to ranks 1-3 (same machine); tcp to ranks 4-7 (...)"
};
// forced: KOLO_TRANSPORT ("auto" chooses per peer). A forced transport that
// cannot reach a peer is an error naming it.
Status choose_routes(const std::vector<RankFacts>& facts, int rank, const std::string& forced, Routes* out);

}  // namespace kolo
