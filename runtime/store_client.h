// A rank's connection to the rendezvous store served by rank 0. Implements
// the Store interface the transports use. Thread-safe: one request at a time.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "runtime/store_protocol.h"
#include "transport/store.h"

namespace kolo {

// Waits for a store's keys in slices of 50 ms, each one
// get_slice(the slice's deadline), until a slice succeeds or fails other than
// by timeout, or `deadline` passes. Between slices the connection is free
// (the communicators split from one world share it: one waiting for keys
// that never come must not hold back the others) and `cancelled` is asked
// (a split communicator aborted or destroyed). A store that closes after
// slices timed out reports the keys still missing, as a TIMEOUT: rank 0
// gave up on the same keys a moment sooner.
Status get_in_slices(Deadline deadline, const std::function<Status(Deadline)>& get_slice,
                     const std::function<Status()>& cancelled = [] { return Status::ok(); });

// Whether address:port is the local end of a StoreClient of this process
// (a store server at exit waits for other processes' ranks only).
bool is_this_process_store_client(const std::string& endpoint);

class StoreClient : public Store {
 public:
  ~StoreClient() override;

  // Connects to host:port (retrying while rank 0 is still starting, or
  // while the port still serves an earlier run of the job) and introduces
  // itself, all within the deadline. request_timeout_s bounds each later
  // request that takes no deadline of its own (set): KOLO_TIMEOUT_S.
  // `encrypt` (KOLO_ENCRYPT): every message after the handshake sealed
  // (StoreSeal, store_protocol.h); the store must seal too.
  static Status connect(const std::string& host, int port, uint64_t job_id, int rank, const std::string& secret,
                        double request_timeout_s, Deadline deadline, std::unique_ptr<StoreClient>* out,
                        bool encrypt = false);

  // Every request ends by its deadline (set: request_timeout_s; a get's
  // answer is awaited a second more, its trip), whether the store answers
  // or not; one the store left unanswered leaves the
  // connection out of step, and every later request fails at once with
  // that failure (an answer that came late must never be read as the next
  // request's).
  Status set(const std::string& key, const std::string& value) override;
  Status set_if_absent(const std::string& key, const std::string& value, Deadline deadline,
                       std::string* current) override;
  Status get(const std::vector<std::string>& keys, Deadline deadline, std::vector<std::string>* values) override;

  // One round trip the store answers at once (a get of no key that waits
  // for nothing): ok while the store serves; the connection's failure, or
  // a TIMEOUT when no answer comes by the deadline (its host is stuck).
  Status ping(Deadline deadline);

  // This end's address: the interface that routes to the master, which is
  // where peers can reach this rank too.
  std::string local_address() const;

 private:
  StoreClient() = default;
  // One connection and hello; *other_job says to try again: the store
  // serves another job, or closed before its challenge.
  static Status connect_once(const std::string& host, int port, uint64_t job_id, int rank, const std::string& secret,
                             bool encrypt, Deadline deadline, bool* other_job, std::unique_ptr<StoreClient>* out);
  Status round_trip(const std::string& request, Deadline deadline, std::string* reply);
  // One get, the connection held until the keys are there or the deadline.
  Status get_within(const std::vector<std::string>& keys, Deadline deadline, std::vector<std::string>* values);

  std::mutex mutex_;
  boost::asio::io_context io_;
  std::unique_ptr<boost::asio::ip::tcp::socket> socket_;
  std::string server_;
  std::string endpoint_;  // this end's address:port, once connected
  double request_timeout_s_ = 30;
  Status broken_;  // why the connection is out of step, once it is
  std::unique_ptr<StoreSeal> seal_;  // after the handshake, with KOLO_ENCRYPT=1
};

}  // namespace kolo
