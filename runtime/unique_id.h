// A job's rendezvous in 128 opaque bytes (kolo_unique_id_t; NCCL's
// ncclUniqueId): the address and port of the store rank 0 serves, a job id
// and a random secret that authenticates every connection of the job. The
// C API's kolo_get_unique_id and kolo_comm_init_rank only wrap these.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/status.h"
#include "runtime/communicator.h"
#include "runtime/config.h"

namespace kolo {

constexpr size_t kUniqueIdBytes = 128;

// What an id holds.
struct UniqueIdFields {
  std::string address;
  int port = 0;
  std::string job_name;
  std::string secret;
};

// Called once, in rank 0's process: starts the job's store on a free port of
// the address other hosts reach (config.bind_address, else the address of
// the default route's interface, else the first non-loopback IPv4, else
// 127.0.0.1) and writes the id into out[0..kUniqueIdBytes).
Status make_unique_id(const Config& config, char* out);

// The fields of an id made by make_unique_id; anything else is
// invalid_argument.
Status read_unique_id(const char* id, UniqueIdFields* out);

// Every rank: joins the job of `id` as `rank` of `nranks`. The id's secret
// and job name replace config's.
Status join_unique_id(const char* id, int rank, int nranks, Config config, std::unique_ptr<Communicator>* out);

// kolo_comm_get_unique_id, on one rank of `comm`: an id by which new ranks
// join comm's next grow (Communicator::grow). The grow's place waits in the
// rendezvous store under a random token the id carries. UNSUPPORTED where
// kolo does not serve the store.
Status make_grow_id(const Communicator& comm, char* out);
// A new rank: joins the grow of `id` as `rank` of `nranks`.
Status join_grow_id(const char* id, int rank, int nranks, Config config, std::unique_ptr<Communicator>* out);

// The interface of the default route (/proc/net/route), or "".
std::string default_route_interface();

}  // namespace kolo
