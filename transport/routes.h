// Which transport carries the messages to each peer. At the rendezvous
// every rank publishes where it runs and what each kind of transport
// offered there (RankFacts); for each peer the first kind (transport_kinds(),
// in order of preference) that both ends can use wins, so the two ranks of
// a pair always agree. KOLO_TRANSPORT names one kind to force it for every
// peer.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/kind.h"

namespace kolo {

// What one rank tells the others at the rendezvous.
struct RankFacts {
  // Ranks with the same host share a kernel and network, IPC and PID
  // namespaces (so /dev/shm and process ids mean the same to them: two
  // containers of one pod sharing a network are kept apart).
  std::string host;
  // Per kind of transport this rank can use: what it offered
  // (TransportKind::offer). A kind absent cannot be used here.
  std::map<std::string, std::string> offers;
  // Where this rank's process would serve the rendezvous store should its
  // host be lost ("address:port"; runtime/rendezvous.h), or "".
  std::string standby_store;
};

struct Routes {
  std::vector<const TransportKind*> kind;  // per rank (this rank's: nullptr)
  std::string summary;  // "shm to ranks 1-3 (same machine); tcp to ranks 4-7 (...)"
  // On the first rank of each machine, when ranks of that machine reach
  // each other without shared memory (too little /dev/shm, say): a sentence
  // saying so and why, for a warning (it costs several times the speed);
  // otherwise empty.
  std::string same_machine_warning;
};
// The kinds that carry host memory. forced: KOLO_TRANSPORT ("auto" chooses
// per peer). A forced transport that cannot reach a peer is an error
// naming it.
Status choose_routes(const std::vector<RankFacts>& facts, int rank, const std::string& forced, Routes* out);
// The kinds that carry device memory: per rank, the first that reaches it,
// or nullptr where none does (device buffers are then staged through the
// host's route). Both ends of a pair choose alike.
std::vector<const TransportKind*> choose_device_routes(const std::vector<RankFacts>& facts, int rank);

}  // namespace kolo
