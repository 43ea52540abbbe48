#include "runtime/rendezvous.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <utility>

#include "common/log.h"
#include "runtime/lingering_store.h"
#include "runtime/store_client.h"
#include "runtime/store_server.h"
#include "runtime/torch_store_client.h"

namespace kolo {
namespace {

struct ReservedServers {
  std::mutex mu;
  std::map<std::pair<int, uint64_t>, std::unique_ptr<StoreServer>> servers;  // by (port, job id)
};

ReservedServers& reserved() {
  static ReservedServers* r = new ReservedServers();  // outlives every static destructor that might touch it
  return *r;
}

// Closes the servers never taken when the process exits.
struct CloseReservedAtExit {
  ~CloseReservedAtExit() {
    std::map<std::pair<int, uint64_t>, std::unique_ptr<StoreServer>> servers;
    {
      std::lock_guard<std::mutex> lock(reserved().mu);
      servers.swap(reserved().servers);
    }
  }
};

std::unique_ptr<StoreServer> take_reserved(int port, uint64_t job_id) {
  std::lock_guard<std::mutex> lock(reserved().mu);
  auto it = reserved().servers.find({port, job_id});
  if (it == reserved().servers.end()) return nullptr;
  std::unique_ptr<StoreServer> s = std::move(it->second);
  reserved().servers.erase(it);
  return s;
}

}  // namespace

Status Rendezvous::reserve_server(const std::string& host, uint64_t job_id, const std::string& secret, bool encrypt,
                                  int* port) {
  static CloseReservedAtExit close_at_exit;
  // The world size is not known yet: the server takes any rank (the
  // communicator checks ranks against its own size).
  auto server = std::make_unique<StoreServer>(job_id, std::numeric_limits<int>::max(), secret, encrypt);
  KOLO_RETURN_IF_ERROR(server->start(host, 0));
  *port = server->port();
  std::lock_guard<std::mutex> lock(reserved().mu);
  reserved().servers[{*port, job_id}] = std::move(server);
  return Status::ok();
}

Status Rendezvous::open(const LaunchInfo& info, const Config& config, uint64_t job_id,
                        std::shared_ptr<Rendezvous>* out) {
  std::shared_ptr<Rendezvous> r(new Rendezvous());
  r->linger_s_ = config.timeout_s;
  const Deadline deadline = Deadline::after_seconds(config.timeout_s);
  if (info.torch_agent_store && config.encrypt) {
    return unsupported("KOLO_ENCRYPT=1 under torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE): its protocol "
                       "cannot be encrypted; set KOLO_MASTER_ADDR and KOLO_MASTER_PORT so that kolo serves its own "
                       "store, which can");
  }
  if (info.torch_agent_store) {
    // torchrun's agent already serves a store on the master port: join it.
    if (!config.secret.empty() && info.rank == 0) {
      KOLO_INFO("KOLO_SECRET is not used: torchrun's store at " << info.master_addr << ":" << info.master_port
                                                                 << " has no authentication");
    }
    KOLO_RETURN_IF_ERROR(TorchStoreClient::connect(info.master_addr, info.master_port, info.torch_store_prefix,
                                                   config.timeout_s, deadline, &r->agent_store_));
    r->store_ = r->agent_store_.get();
    r->local_address_ = r->agent_store_->local_address();
  } else {
    int port = info.master_port;
    if (info.rank == 0 && info.master_port != 0) r->server_ = take_reserved(info.master_port, job_id);
    if (r->server_ && r->server_->encrypt() != config.encrypt) {
      return invalid_argument(std::string("KOLO_ENCRYPT is ") + (config.encrypt ? "1" : "0") +
                              " here but was " + (config.encrypt ? "0" : "1") + " where kolo_get_unique_id ran");
    }
    if (info.rank == 0 && !r->server_) {
      r->server_ = std::make_unique<StoreServer>(job_id, info.world_size, config.secret, config.encrypt);
      KOLO_RETURN_IF_ERROR(r->server_->start(info.master_addr, info.master_port));
    }
    if (r->server_) port = r->server_->port();
    KOLO_RETURN_IF_ERROR(
        StoreClient::connect(info.master_addr, port, job_id, info.rank, config.secret, config.timeout_s, deadline,
                             &r->client_, config.encrypt));
    r->store_ = r->client_.get();
    r->local_address_ = r->client_->local_address();
    r->location_ = Location{info.master_addr, port, job_id, config.secret, config.encrypt};
    if (info.world_size > 1) {
      r->host_rank_ = 0;
      r->open_standby(job_id, config.secret, config.encrypt);
    }
  }
  *out = std::move(r);
  return Status::ok();
}

void Rendezvous::open_standby(uint64_t job_id, const std::string& secret, bool encrypt) {
  // Any rank of the world may come to it (none but the survivors will).
  auto* server = new StoreServer(job_id, std::numeric_limits<int>::max(), secret, encrypt);
  const double linger_s = linger_s_;
  std::shared_ptr<StoreServer> standby(server, [linger_s](StoreServer* s) {
    std::unique_ptr<StoreServer> owned(s);
    if (owned->serving()) serve_until_clients_leave(std::move(owned), Deadline::after_seconds(linger_s));
  });
  // Where the store's client reached the master: the others reach here.
  Status s = standby->listen(local_address_, 0);
  if (!s.is_ok()) {
    KOLO_WARN("no standby store (this rank cannot take over the store should its host be lost): " << s.message());
    return;
  }
  standby_ = std::move(standby);
}

std::string Rendezvous::standby_address() const {
  return standby_ ? local_address_ + ":" + std::to_string(standby_->port()) : "";
}

Status Rendezvous::check_store(Deadline deadline) const {
  return client_ ? client_->ping(deadline) : Status::ok();
}

Status Rendezvous::fail_over(int successor, const std::string& address, int rank, Deadline deadline,
                             std::shared_ptr<Rendezvous>* out) const {
  const size_t colon = address.rfind(':');
  const int port = colon == std::string::npos ? 0 : std::atoi(address.c_str() + colon + 1);
  if (port <= 0 || port > 65535) {
    return internal_error("rank " + std::to_string(successor) + "'s standby store address '" + address +
                          "' is malformed");
  }
  std::shared_ptr<Rendezvous> r(new Rendezvous());
  r->linger_s_ = linger_s_;
  r->standby_ = standby_;
  r->host_rank_ = successor;
  if (successor == rank) {
    if (!standby_) return internal_error("rank " + std::to_string(rank) + " succeeds the store's host without a standby store");
    standby_->serve();
  }
  const std::string host = address.substr(0, colon);
  KOLO_RETURN_IF_ERROR(StoreClient::connect(host, port, location_.job_id, rank, location_.secret, linger_s_, deadline,
                                            &r->client_, location_.encrypt));
  r->store_ = r->client_.get();
  r->local_address_ = r->client_->local_address();
  r->location_ = Location{host, port, location_.job_id, location_.secret, location_.encrypt};
  *out = std::move(r);
  return Status::ok();
}

Status Rendezvous::join(const Location& location, double timeout_s, std::shared_ptr<Rendezvous>* out) {
  std::shared_ptr<Rendezvous> r(new Rendezvous());
  r->linger_s_ = timeout_s;
  KOLO_RETURN_IF_ERROR(StoreClient::connect(location.host, location.port, location.job_id, /*rank=*/-1,
                                            location.secret, timeout_s, Deadline::after_seconds(timeout_s),
                                            &r->client_, location.encrypt));
  r->store_ = r->client_.get();
  r->local_address_ = r->client_->local_address();
  r->location_ = location;
  r->open_standby(location.job_id, location.secret, location.encrypt);  // this rank may succeed the store's host too
  *out = std::move(r);
  return Status::ok();
}

std::shared_ptr<Rendezvous> Rendezvous::borrow(Store* store) {
  std::shared_ptr<Rendezvous> r(new Rendezvous());
  r->store_ = store;
  return r;
}

Rendezvous::~Rendezvous() {
  client_.reset();
  agent_store_.reset();
  if (server_) {
    // The other ranks may still need the store (lingering_store.h). After a
    // failure they only read its record, to name the rank that failed
    // first, rather than "rank 0 closed the connection": briefly.
    const double linger_s = failed_.load() ? std::min(linger_s_, 2.0) : linger_s_;
    serve_until_clients_leave(std::move(server_), Deadline::after_seconds(linger_s));
  }
}

Status PrefixStore::get(const std::vector<std::string>& keys, Deadline deadline, std::vector<std::string>* values) {
  return get_in_slices(
      deadline, [&](Deadline slice) { return get_within(keys, slice, values); },
      [this] {
        std::lock_guard<std::mutex> lock(mu_);
        return cancelled_;
      });
}

void PrefixStore::cancel(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_.is_ok()) cancelled_ = why;
}

Status PrefixStore::get_within(const std::vector<std::string>& keys, Deadline deadline,
                               std::vector<std::string>* values) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(prefix_ + k);
  Status s = base_->get(full, deadline, values);
  if (s.is_ok() || prefix_.empty()) return s;
  // The missing keys are named as the caller knows them (callers parse
  // "host/N" out of the message to name ranks that never arrived).
  std::string message = s.message();
  for (size_t at = message.find(prefix_); at != std::string::npos; at = message.find(prefix_, at)) {
    message.erase(at, prefix_.size());
  }
  return Status(s.code(), message);
}

}  // namespace kolo
