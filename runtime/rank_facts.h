// What each rank tells the others at the rendezvous about where it runs
// and which transports it can use (transport_registry.h decides from them).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace kolo {

// What one rank can use, as it tells the others.
struct RankFacts {
  // Ranks with the same host share a kernel and network, IPC and PID
  // namespaces (so /dev/shm and process ids mean the same to them: two
  // containers of one pod sharing a network are kept apart).
  std::string host;
  bool rdma = false;      // it opened an RDMA device
  uint64_t shm_free = 0;  // bytes free in its /dev/shm (0: none usable)
};
std::string encode_rank_facts(const RankFacts& facts);
Status decode_rank_facts(const std::string& text, RankFacts* facts);
// This rank's facts: host from host_name (empty: the machine's name) and
// the namespaces; the /dev/shm it sees.
RankFacts local_rank_facts(const std::string& host_name, bool rdma);

}  // namespace kolo
