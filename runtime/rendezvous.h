// The store the ranks of a job meet through, and what keeps it up: rank 0's
// server when kolo serves it, this rank's client of it, or a client of the
// store torchrun's agent serves. Shared by a world communicator, its
// siblings and every communicator split from it: whichever is destroyed
// last closes it, so they may be destroyed in any order.
//
// Where a rank's process serves the store (rank 0's, by default), losing
// that rank would lose the store, and with it every agreement the
// survivors need (a shrink's members, the first failure). So every rank
// of such a job also holds a standby store: a listening socket, bound at
// the rendezvous and told to the others with its facts, that serves only
// once its rank is chosen to succeed the lost host (fail_over). A shrink
// that excludes the store's host, or finds it gone or stuck, moves the
// survivors to the lowest surviving rank's standby; the old store is never
// waited on past a short look.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "runtime/config.h"
#include "runtime/launch_env.h"
#include "transport/store.h"

namespace kolo {

class StoreServer;
class StoreClient;
class TorchStoreClient;

class Rendezvous {
 public:
  // Serves kolo's store on rank 0 and joins it, or joins torchrun's agent
  // store (TORCHELASTIC_USE_AGENT_STORE) without binding anything.
  static Status open(const LaunchInfo& info, const Config& config, uint64_t job_id,
                     std::shared_ptr<Rendezvous>* out);
  // A store the caller owns and keeps alive longer (tests run ranks as
  // threads over an in-memory store).
  static std::shared_ptr<Rendezvous> borrow(Store* store);
  // kolo_get_unique_id: serves a job's store before its size is known. The
  // server waits in a process-wide registry until rank 0 of that job (same
  // port and job id) opens the rendezvous and takes it over; one never
  // taken is closed at process exit.
  static Status reserve_server(const std::string& host, uint64_t job_id, const std::string& secret, bool encrypt,
                               int* port);
  // Where a process that is not a rank yet finds this store: for the ranks
  // that a grow adds (Communicator::join_grown).
  struct Location {
    std::string host;
    int port = 0;
    uint64_t job_id = 0;
    std::string secret;
    bool encrypt = false;  // KOLO_ENCRYPT: the store seals its messages
  };
  // Joins the store at `location` as a rank that a grow adds: it introduces
  // itself as rank -1 (no rank of the world the store was made for).
  static Status join(const Location& location, double timeout_s, std::shared_ptr<Rendezvous>* out);
  ~Rendezvous();

  // nullptr where kolo does not serve the store (a borrowed one, torchrun's).
  const Location* location() const { return location_.port != 0 ? &location_ : nullptr; }

  // The world rank whose process serves the store: 0 where kolo serves it
  // in rank 0 (a launch by environment variables, kolo_get_unique_id), a
  // successor's after a fail-over; -1 where no rank's process does
  // (torchrun's agent, a borrowed store) and losing a rank never loses the
  // store.
  int host_rank() const { return host_rank_; }
  // A rank that joined by grow (join) is told the store's rank by the
  // ranks already there.
  void learn_store_host(int world_rank) { host_rank_ = world_rank; }
  // Where this process would serve the store in its host's place
  // ("address:port"), or "" where it would not (host_rank() < 0).
  std::string standby_address() const;
  // Whether the store answers a round trip by `deadline`: the connection's
  // failure, or a TIMEOUT naming a stuck host.
  Status check_store(Deadline deadline) const;
  // A rendezvous over the store that world rank `successor` serves from
  // its standby at `address`, for the survivors of this one's host.
  // `rank` is this process's world rank; when it is the successor, its own
  // standby starts serving. Connecting is bounded by `deadline`.
  Status fail_over(int successor, const std::string& address, int rank, Deadline deadline,
                   std::shared_ptr<Rendezvous>* out) const;

  Store* store() const { return store_; }
  // The local address that reached the master ("" for a borrowed store).
  const std::string& local_address() const { return local_address_; }
  // A communicator over this store failed: rank 0's server, which outlives
  // rank 0's communicators while other ranks hold connections to it (up to
  // the timeout, lingering_store.h), then stays up only a moment, for ranks
  // still learning of the failure to read its record.
  void mark_failed() { failed_.store(true); }

 private:
  Rendezvous() = default;
  // Binds this process's standby store (no thread until it serves).
  void open_standby(uint64_t job_id, const std::string& secret, bool encrypt);

  std::unique_ptr<StoreServer> server_;  // rank 0, when kolo serves the store
  // This process's standby (listening, serving once it succeeds a lost
  // host); shared with the rendezvous of a fail-over, and kept serving for
  // its clients (lingering_store.h) after the last of them is destroyed.
  std::shared_ptr<StoreServer> standby_;
  int host_rank_ = -1;
  std::unique_ptr<StoreClient> client_;
  std::unique_ptr<TorchStoreClient> agent_store_;  // instead of both, under torchrun's agent store
  Store* store_ = nullptr;
  std::string local_address_;
  Location location_;
  std::atomic<bool> failed_{false};
  double linger_s_ = 0;  // how long rank 0's server may outlive this (the timeout)
};

// Another store's keys under a prefix: what a split communicator sees, so
// that its addresses, hosts and failure record never meet its parent's.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix) : base_(std::move(base)), prefix_(std::move(prefix)) {}

  Status set(const std::string& key, const std::string& value) override { return base_->set(prefix_ + key, value); }
  Status set_if_absent(const std::string& key, const std::string& value, Deadline deadline,
                       std::string* current) override {
    return base_->set_if_absent(prefix_ + key, value, deadline, current);
  }
  // Waits in slices (get_in_slices), ending early once cancelled (a split
  // communicator aborted or destroyed while its engine waits for a peer).
  Status get(const std::vector<std::string>& keys, Deadline deadline, std::vector<std::string>* values) override;
  void cancel(const Status& why) override;

 private:
  Status get_within(const std::vector<std::string>& keys, Deadline deadline, std::vector<std::string>* values);

  std::shared_ptr<Store> base_;
  std::string prefix_;
  std::mutex mu_;
  Status cancelled_;  // ok until cancel()
};

}  // namespace kolo
